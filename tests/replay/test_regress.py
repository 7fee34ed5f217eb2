"""Datasets of sessions and `tracefix regress`, on real processes: a collector, the scripted LLM
server with one fault plan, and banking sessions recorded by the instrumented app.

Two tasks fail through faults the scripted model injects by task and step, whatever the app
does: t04's worker calls deposit_check without its check number (missing_argument), t02's
transfers to the wrong account (wrong_argument). The app's version 2
(TRACEFIX_DEMO_AGENT_VERSION=2, demo/team.py) checks a worker's tool call for its required
arguments and re-asks for a complete one, and does nothing else: regressed on it, t04 comes
out fixed and t02 still failing; on version 1 (the control) neither is fixed.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import procs
import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
FAULTS = [{"task": "t04", "step": 6, "kind": "missing_argument"},  # version 2 re-asks: fixed
          {"task": "t02", "step": 6, "kind": "wrong_argument"}]  # version 2 changes nothing there: still failing


def readme_regress_command() -> str:
    """The command README.md's "Regression tests from thumbs-downs" shows, as written."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## Regression tests from thumbs-downs\n")
    section = text[start:text.index("\n## ", start + 1)]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return block.strip()


class Bed:
    def __init__(self, serve_url: str, sim_url: str, key: str, by_task: dict[str, str], workdir: Path):
        self.serve_url, self.sim_url, self.key = serve_url, sim_url, key
        self.by_task, self.workdir = by_task, workdir

    def env(self, version: int) -> dict:
        return {**os.environ, "TRACEFIX_SERVER": self.serve_url, "TRACEFIX_REPLAY_KEY": self.key,
                "TRACEFIX_DEMO_AGENT_VERSION": str(version), "TRACEFIX_TOKEN": "",
                "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}  # tracefix installed

    def access(self):
        from tracefix.collector.access import connect

        return connect(server=self.serve_url)

    def regress(self, *args: str, version: int, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tracefix.cli", "regress", *args], env=self.env(version),
                              cwd=self.workdir, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    import secrets

    import tracefix

    d = tmp_path_factory.mktemp("regress")
    (d / "plan.json").write_text(json.dumps(FAULTS))
    key = secrets.token_hex(32)
    started = []
    try:
        sim = procs.start_sim("--seed", "1", "--faults", str(d / "plan.json"))
        started.append(sim)
        serve = procs.start_serve(d / "store.duckdb", "--diagnose", "off")
        started.append(serve)
        sim_url, serve_url = sim.match["base_url"], serve.match["http"]
        subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", sim_url, "--otlp-endpoint",
                        serve_url, "--tasks", "t02,t03,t04"], env={**os.environ, "TRACEFIX_REPLAY_KEY": key},
                       check=True, capture_output=True, timeout=120)
        from tracefix.collector.access import connect

        access = connect(server=serve_url)

        def recorded():
            docs = [access.get_session(s["session_id"]) for s in access.list_sessions(limit=20)]
            done = [doc for doc in docs if doc and doc.get("outcome") and doc.get("ended_at")]
            return done if len(done) == 3 else None

        docs = procs.wait_for(recorded, "the three recorded sessions")
        by_task = {doc["inputs"]["task_id"]: doc["session_id"] for doc in docs}
        assert {t: access.get_session(by_task[t])["outcome"] for t in ("t02", "t03", "t04")} == {
            "t02": "failure", "t03": "success", "t04": "failure"}
        for task in ("t02", "t04"):  # the users' thumbs-down: each makes an item by itself
            tracefix.feedback(by_task[task], -1.0, comment="wrong", server=serve_url)
        yield Bed(serve_url, sim_url, key, by_task, d)
    finally:
        for p in reversed(started):
            p.stop()


def test_a_thumbs_down_makes_an_item_with_what_the_session_recorded(bed):
    with bed.access() as access:
        items = access.dataset_items("default")
    assert {i["session_id"]: i["kind"] for i in items} == {bed.by_task["t02"]: "thumbs-down",
                                                           bed.by_task["t04"]: "thumbs-down"}
    t04 = next(i for i in items if i["session_id"] == bed.by_task["t04"])
    assert t04["entrypoint"] == "tracefix.demo.bank:run_task" and t04["inputs"]["task_id"] == "t04"
    assert t04["outcome"] == "failure" and t04["feedback_score"] == -1.0
    # the bank's evaluator reports a milestone per gold action: the deposit never happened
    assert any(not m["achieved"] and m["name"].startswith("deposit") for m in t04["milestones"])
    assert t04["validated_edit"] is None  # no replay ran yet


def test_add_show_export_import_round_trip(bed, tmp_path):
    from tracefix.collector.dataset_cli import dataset
    from tracefix.collector.store import Store

    server = ["--server", bed.serve_url]
    runner = CliRunner()
    added = runner.invoke(dataset, ["add", bed.by_task["t03"], "--dataset", "smoke", *server])
    assert added.exit_code == 0 and "1 session(s) added to smoke" in added.output
    again = runner.invoke(dataset, ["add", bed.by_task["t03"], "--dataset", "smoke", *server])
    assert "0 session(s) added to smoke; 1 there already" in again.output
    unknown = runner.invoke(dataset, ["add", bed.by_task["t03"], "no-such-session", "--dataset", "other", *server])
    assert unknown.exit_code != 0 and "no-such-session" in unknown.output
    with bed.access() as access:
        assert not access.dataset_items("other")  # nothing of a refused add is kept
        assert [i["session_id"] for i in access.dataset_items(kind="added")] == [bed.by_task["t03"]]
        assert not access.dataset_items(since="2200-01-01T00:00:00Z")
        service = access.get_session(bed.by_task["t03"])["service"]
        assert len(access.dataset_items(service=service)) == 3 and not access.dataset_items(service="other")
        # a replay that validated an edit: the item shows it
        access.save_replay(bed.by_task["t04"], {"session_id": bed.by_task["t04"], "hypotheses": [
            {"step": 6, "agent": "PaymentsAgent", "verdict": "refuted", "runs": [],
             "intervention": {"kind": "add_message", "text": "wrong idea"}},
            {"step": 6, "agent": "PaymentsAgent", "verdict": "validated", "runs": [{"success": True}] * 3,
             "intervention": {"kind": "add_message", "text": "Pass check_number = CHK-5001."}}]})
    listed = runner.invoke(dataset, ["list", *server]).output
    assert "dataset default: 2 item(s) (2 thumbs-down, 0 added, 0 imported)" in listed
    t04_line = next(line for line in listed.splitlines() if bed.by_task["t04"][:30] in line)
    assert "thumbs-down" in t04_line and "failure" in t04_line and "0/3" in t04_line  # milestones reached
    shown = runner.invoke(dataset, ["show", bed.by_task["t04"], *server])
    item = json.loads(shown.output)
    assert item["validated_edit"] == {"step": 6, "agent": "PaymentsAgent", "kind": "add_message",
                                      "text": "Pass check_number = CHK-5001.", "succeeded": "3/3"}
    assert item["signatures"] and item["recorded_tools"] and item["snapshots"]

    exported = tmp_path / "items.jsonl"
    assert runner.invoke(dataset, ["export", "--dataset", "default", "-o", str(exported), *server]).exit_code == 0
    lines = exported.read_text().splitlines()
    assert len(lines) == 2
    other = tmp_path / "other.duckdb"
    Store(str(other)).close()  # a store of its own, no collector on it: a CI job's
    imported = runner.invoke(dataset, ["import", str(exported), "--db", str(other)])
    assert imported.exit_code == 0 and "2 item(s) imported" in imported.output, imported.output
    assert "2 there already" in runner.invoke(dataset, ["import", str(exported), "--db", str(other)]).output
    back = tmp_path / "back.jsonl"
    assert runner.invoke(dataset, ["export", "-o", str(back), "--db", str(other)]).exit_code == 0
    kept = ("session_id", "dataset", "entrypoint", "inputs", "outcome", "milestones", "validated_edit", "signatures",
            "recorded_tools", "snapshots", "service", "feedback_score")
    before = [{k: json.loads(x).get(k) for k in kept} for x in lines]
    after = [json.loads(x) for x in back.read_text().splitlines()]
    assert [{k: a.get(k) for k in kept} for a in after] == before
    assert {a["kind"] for a in after} == {"imported"} and not any(a["stored"] for a in after)
    # the signature travelled with the item: checked against the app's key, wherever it runs again
    from tracefix.replay.regress import RegressOptions, admit

    options = RegressOptions(allowed_modules=["tracefix.demo"], replay_key=bed.key.encode())
    assert [admit(item, options) for item in after] == [None, None]
    forged = {**after[0], "inputs": {**after[0]["inputs"], "task_id": "t01"}}
    assert "not what the app signed" in admit(forged, options)
    other_key = RegressOptions(allowed_modules=["tracefix.demo"], replay_key=b"k" * 32)
    assert "signed with another replay key" in admit(after[0], other_key)


def _results(output: str) -> dict[str, dict]:
    return {r["session_id"]: r for r in json.loads(output)}


def test_readme_regress_on_version_2_fixes_what_it_addresses(bed):
    done = subprocess.run(["bash", "-c", readme_regress_command()], env=bed.env(2), cwd=bed.workdir,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 1, done.stdout + done.stderr  # t02 is still failing
    lines = {sid: next(line for line in done.stdout.splitlines() if line.startswith(sid[:34]))
             for sid in (bed.by_task["t02"], bed.by_task["t04"])}
    assert re.search(r"failure\s+3/3 .* FIXED ", lines[bed.by_task["t04"]]), done.stdout
    assert re.search(r"failure\s+0/3 .* STILL FAILING ", lines[bed.by_task["t02"]]), done.stdout
    assert "runs]" not in done.stdout and "6/6 runs" in done.stderr  # the progress bar went to stderr
    suites = ET.parse(bed.workdir / "regress.xml").getroot()
    assert suites.tag == "testsuites" and suites.get("tests") == "2" and suites.get("failures") == "1"
    [suite] = suites
    assert suite.tag == "testsuite" and suite.get("errors") == "0" and float(suite.get("time")) > 0
    cases = {case.get("name").split()[0]: case for case in suite.iter("testcase")}
    # what JUnit's schema asks of a suite: its counts are its cases', each case named, timed, in a class
    assert int(suite.get("tests")) == len(cases) and int(suite.get("failures")) == len(suite.findall("*/failure"))
    assert all(c.get("classname") == "default" and float(c.get("time")) > 0 for c in cases.values())
    assert {child.tag for c in cases.values() for child in c} <= {"failure", "error", "skipped", "system-out"}
    assert set(cases) == {bed.by_task["t02"], bed.by_task["t04"]}
    assert cases[bed.by_task["t04"]].find("failure") is None
    failure = cases[bed.by_task["t02"]].find("failure")
    assert failure.get("type") == "still failing" and "run 3: failure" in failure.text
    with bed.access() as access:  # each run exported its session, linked to the item's
        children = access.list_sessions(parent_session_id=bed.by_task["t04"], limit=10)
    assert len(children) == 3
    # the web UI's page of the run: each item's runs beside the session it ran again
    run_id = re.search(r"tracefix regress (rg-\S+):", done.stderr).group(1)
    assert run_id in page(bed.serve_url + "/regress")
    html = page(f"{bed.serve_url}/regress?run={run_id}")
    row = html[html.index(f"/session?id={bed.by_task['t04']}"):]
    row = row[:row.index("</tr>")]
    assert ">fixed<" in row and all(f"/session?id={c['session_id']}" in row for c in children)


def page(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept": "text/html"}), timeout=10) as r:
        return r.read().decode()


def test_the_control_on_version_1_fixes_nothing(bed):
    done = bed.regress("--dataset", "default", "--allow-module", "tracefix.demo", "--tools", "live", "--runs", "1",
                       "--json", version=1)
    assert done.returncode == 1, done.stderr
    results = _results(done.stdout)
    assert {r["verdict"] for r in results.values()} == {"still failing"}
    assert all(r["runs"][0]["llm_requests"] > 5 for r in results.values())  # the LLM ran live, from the first step


def test_unsigned_and_forged_items_are_refused_and_nothing_of_them_runs(bed):
    with bed.access() as access:
        access.add_to_dataset("source", [bed.by_task["t03"]])
        [item] = access.dataset_items("source", full=True)
        # as anyone with the API token could import them: no signature; a signed record moved to another id
        access.import_dataset_items("suspect", [{**item, "session_id": "s-unsigned", "signatures": []},
                                                {**item, "session_id": "s-forged"}])
    done = bed.regress("--dataset", "suspect", "--allow-module", "tracefix.demo", "--tools", "live", "--json",
                       version=2)
    assert done.returncode == 2, done.stdout + done.stderr
    results = _results(done.stdout)
    assert {r["verdict"] for r in results.values()} == {"refused"} and not any(r["runs"] for r in results.values())
    assert "carries no replay signature" in results["s-unsigned"]["reason"]
    assert "not what the app signed" in results["s-forged"]["reason"]
    with bed.access() as access:  # no run exported a session
        assert not access.list_sessions(parent_session_id="s-unsigned") + access.list_sessions(
            parent_session_id="s-forged")
    table = bed.regress("--dataset", "suspect", "--allow-module", "tracefix.demo", version=2)
    assert table.returncode == 2 and table.stdout.count("REFUSED") == 2
    other = bed.regress("--dataset", "suspect", "--allow-module", "other.pkg", "--allow-unsigned", "--json",
                        version=2)
    assert other.returncode == 2 and "outside the modules allowed" in _results(other.stdout)["s-unsigned"]["reason"]


def test_a_worker_runs_the_queued_items(bed):
    worker = procs.start_worker(bed.serve_url, "--jobs", "regress", "--allow-module", "tracefix.demo",
                                env={"TRACEFIX_REPLAY_KEY": bed.key, "TRACEFIX_DEMO_AGENT_VERSION": "2"})
    try:
        done = bed.regress("--dataset", "default", "--runs", "1", "--queue", "--json",
                           version=1)  # this process's version does not matter: the worker's code runs
    finally:
        worker.stop()
    assert done.returncode == 1, done.stdout + done.stderr
    results = _results(done.stdout)
    assert results[bed.by_task["t04"]]["verdict"] == "fixed"
    # tools recorded (the default): the read calls came from the recording; the deposit, never
    # recorded with its check number, ran live on the app's own database
    [run] = results[bed.by_task["t04"]]["runs"]
    assert run["tools_recorded"] >= 2 and run["tools_live"] >= 1
    assert results[bed.by_task["t02"]]["verdict"] == "still failing"
    with bed.access() as access:
        jobs = access.list_jobs(kind="regress")
    assert len(jobs) == 2 and {j["state"] for j in jobs} == {"done"}


def test_verdicts_compare_the_recorded_outcome_with_the_runs():
    from tracefix.replay.regress import exit_code, verdict

    def runs(*outcomes):
        return [{"success": o, "error": None if o is not None else "killed after its timeout"} for o in outcomes]

    assert verdict(False, runs(True, True, True))[0] == "fixed"
    assert verdict(False, runs(False, False, False))[0] == "still failing"
    assert verdict(False, runs(True, False, True)) == ("flaky", "2/3 runs succeeded")
    assert verdict(True, runs(False, False, False))[0] == "newly failing"
    assert verdict(True, runs(True, True, True))[0] == "passing"
    assert verdict(None, runs(None, None, None)) == ("error", "killed after its timeout")
    assert exit_code([{"verdict": "passing"}, {"verdict": "flaky"}, {"verdict": "fixed"}]) == 0
    assert exit_code([{"verdict": "refused"}, {"verdict": "fixed"}]) == 2
    assert exit_code([{"verdict": "refused"}, {"verdict": "newly failing"}]) == 1
