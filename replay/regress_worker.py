"""A `regress` job in `tracefix worker --jobs regress`: one dataset item run again
(`tracefix.replay.regress`) under the worker's own trust settings (its --allow-module,
--allow-entrypoint, TRACEFIX_REPLAY_KEY, --allow-unsigned, --allow-live-tools), its result
stored under the job's run id for the `tracefix regress --queue` that waits for it."""
from __future__ import annotations

from tracefix.replay.regress import RegressOptions, regress

# what a regress job's end state is, by its item's verdict
REFUSED, ERRORED = ("refused",), ("error",)


def run_regress_job(access, job: dict, *, allowed_modules: list[str], allowed_entrypoints: list[str],
                    replay_options: dict, zygotes=None) -> tuple[str, str | None]:
    """(job state, error) of one claimed regress job: `done` once the item's result is stored
    (whatever its verdict), `refused` when the item may not run here, `failed` when no run
    ended with an outcome or the item is gone."""
    options = job.get("options") or {}
    run_id = options.get("run_id") or job["job_id"]
    items = access.dataset_items(options.get("dataset"), full=True, session_ids=[job["session_id"]])
    if not items:
        return "failed", f"session {job['session_id']} is in no dataset{' ' + repr(options['dataset']) if options.get('dataset') else ''}"
    token = getattr(access, "token", None)
    regress_options = RegressOptions(
        allowed_modules=allowed_modules, allowed_entrypoints=allowed_entrypoints, runs=int(options.get("runs") or 3),
        tools=options.get("tools") or "recorded", allow_live_tools=bool(replay_options.get("allow_live_tools")),
        replay_key=replay_options.get("replay_key"), allow_unsigned=bool(replay_options.get("allow_unsigned")),
        concurrency=int(replay_options.get("concurrency") or 3), preload=replay_options.get("preload", True),
        timeout_s=float(replay_options.get("timeout_s") or 120.0), otlp_endpoint=access.server,
        otlp_headers={"authorization": f"Bearer {token}"} if token else None, keep=bool(replay_options.get("keep")))
    [result] = regress(items[:1], regress_options, run_id=run_id, zygotes=zygotes, access=access,
                       llm=replay_options.get("llm") or None)  # the worker's --llm-base-url: the judge
    access.save_regress_result(run_id, result["session_id"], result)
    if result["verdict"] in REFUSED:
        return "refused", result["reason"]
    if result["verdict"] in ERRORED:
        return "failed", result["reason"]
    return "done", None
