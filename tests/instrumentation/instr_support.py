"""Helpers shared by the instrumentation tests (a plain module: conftest names collide across areas)."""
from __future__ import annotations


def by_name(exporter, prefix: str) -> list:
    """Finished spans whose name starts with `prefix`, in end order."""
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def cassette_from_spans(finished_spans) -> dict:
    """A contracts §4 cassette built straight from one recorded session's spans (what the
    replay worker builds from the collector's copy): entrypoint and inputs from the root,
    per step the fingerprint and raw response of the LLM span, its tool spans' fingerprints
    and results, and every snapshot event (the final one included)."""
    import json

    from tracefix import semconv as sc

    root = next(s for s in finished_spans if s.attributes.get(sc.SESSION_SPAN))
    steps: dict[int, dict] = {}
    snapshots = []
    for span in finished_spans:
        a = span.attributes
        if a.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_CHAT:
            steps[a[sc.STEP]] = {"index": a[sc.STEP], "agent": a.get(sc.GEN_AI_AGENT_NAME),
                                 "fingerprint": a[sc.REQUEST_FINGERPRINT],
                                 "response": json.loads(a[sc.RESPONSE_RAW]), "tool_calls": []}
            if a.get(sc.RESPONSE_STREAM):
                steps[a[sc.STEP]]["stream"] = json.loads(a[sc.RESPONSE_STREAM])
        for event in span.events:
            if event.name in (sc.SNAPSHOT_EVENT, sc.SNAPSHOT_FINAL_EVENT):
                snapshots.append({"step": event.attributes[sc.STEP], "key": event.attributes[sc.SNAPSHOT_KEY],
                                  "state": json.loads(event.attributes[sc.SNAPSHOT_STATE])})
    for span in finished_spans:
        a = span.attributes
        if a.get(sc.GEN_AI_OPERATION_NAME) == sc.OP_EXECUTE_TOOL:
            error = None
            if span.status.status_code.name == "ERROR":
                error = span.status.description
            steps[a[sc.STEP]]["tool_calls"].append({
                "id": a.get(sc.GEN_AI_TOOL_CALL_ID), "name": a[sc.GEN_AI_TOOL_NAME],
                "fingerprint": a[sc.TOOL_FINGERPRINT],
                "result": json.loads(a[sc.GEN_AI_TOOL_CALL_RESULT]) if sc.GEN_AI_TOOL_CALL_RESULT in a else None,
                "error": error})
    return {"session_id": root.attributes[sc.SESSION_ID], "entrypoint": root.attributes[sc.ENTRYPOINT],
            "inputs": json.loads(root.attributes[sc.INPUTS]), "steps": [steps[i] for i in sorted(steps)],
            "snapshots": snapshots}


def sim_requests(sim_url: str) -> int:
    """Completions the scripted LLM server has answered so far (GET /_sim/stats)."""
    import json
    import urllib.request

    base = sim_url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(f"{base}/_sim/stats", timeout=5) as r:
        return json.loads(r.read())["requests"]


def replay_in_this_process(tmp_path, cassette: dict, session_id: str, monkeypatch) -> None:
    """The next tracefix.init() of this process replays `cassette` without intervention,
    reporting to tmp_path/report.json."""
    import json

    config = tmp_path / "replay.json"
    config.write_text(json.dumps({"cassette": cassette, "intervention": None, "session_id": session_id,
                                  "parent_session_id": cassette["session_id"],
                                  "report_path": str(tmp_path / "report.json")}))
    monkeypatch.setenv("TRACEFIX_REPLAY", str(config))
