"""One replay, in its own process: ``python -m tracefix.replay.child`` with TRACEFIX_REPLAY set.

Started by :mod:`tracefix.replay.runner`. It turns tracefix on in replay mode (the
instrumentation reads the cassette and the intervention from the same file), exporting to
the collector the parent names (or to a file the parent posts from: tracefix.replay.span_handoff),
registers the guard's live hook when asked, calls the
recorded entrypoint with the recorded inputs (some overridden, e.g. ``base_url``), and
leaves the report (written by the instrumentation when the session ends) with the guard's
firings added. Exit status 0 when the entrypoint returned, 1 when it raised.

The child then leaves without the interpreter's teardown of every module (`leave`): after an
agent framework's imports that teardown takes seconds (about 6 s after AG2's on a busy
machine, against a replay of 2 s), and nothing in it is the replay's work.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import threading
import time

from tracefix.replay import child_tracing

logger = logging.getLogger("tracefix.replay")


def _add_to_report(path: str | None, **fields) -> None:
    if not path or not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    report.update(fields)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, default=repr)
    os.replace(tmp, path)


def main() -> int:
    # when each phase ended (wall clock, so the runner can set them against its own clock):
    # the report's "timings", which the runner turns into the run's phases
    timings = {"main": time.time()}
    from tracefix import replay_mode

    path = os.environ.get(replay_mode.ENV_VAR)
    if not path:
        print(f"tracefix.replay.child: set {replay_mode.ENV_VAR}=/path/replay.json", flush=True)
        return 2
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    timings["config"] = time.time()

    import tracefix
    from tracefix import runtime
    from tracefix.entrypoints import EntrypointRefused

    init_kwargs = {"endpoint": config["otlp_endpoint"]} if config.get("otlp_endpoint") else {}
    if config.get("otlp_headers"):
        init_kwargs["headers"] = config["otlp_headers"]
    if config.get("service"):
        init_kwargs["service_name"] = config["service"]
    if config.get("spans_file"):  # the runner posts them once this process is gone (replay.span_handoff)
        handle = child_tracing.init(config["spans_file"], config.get("service"), **init_kwargs)
    else:
        handle = tracefix.init(**init_kwargs)
    timings["init"] = time.time()
    controller = runtime.replay
    if controller is None:
        print("tracefix.replay.child: replay mode did not start", flush=True)
        return 2

    guard = None
    if config.get("guard") and config.get("guard_config"):
        from tracefix.replay.guard import Guard

        guard = Guard(**config["guard_config"])
        replay_mode.add_live_hook(guard)

    inputs = {**(config["cassette"].get("inputs") or {}), **(config.get("input_overrides") or {})}
    code = 0
    refused = None
    try:
        replay_mode.run_entrypoint(config["cassette"]["entrypoint"], inputs, controller.allowed_modules,
                                   controller.allowed_entrypoints)
    except EntrypointRefused as exc:  # nothing of the agent's ran: the replay (and its job) is refused
        refused = str(exc)
        controller.write_report(error=f"refused: {exc}")
        code = 1
    except Exception as exc:  # the agent's own failure is a replay outcome, not a crash of ours
        logger.exception("tracefix replay: the entrypoint raised")
        # a no-op when the session already ended (and reported) with this error
        controller.write_report(error=f"{type(exc).__name__}: {exc}")
        code = 1
    finally:
        timings["ran"] = time.time()
        controller.write_report_at_exit()
        # flush the child's spans (to the collector, or its file: written on this thread) before the parent looks
        handle.shutdown(on_this_thread=bool(config.get("spans_file")))
        timings["flushed"] = time.time()
    _add_to_report(config.get("report_path"), timings=timings,
                   **({"guard": {"fired": guard.fired}} if guard is not None else {}),
                   **({"refused": refused} if refused is not None else {}))
    return code


def leave(code: int) -> None:
    """Exit with `code` as the interpreter would, without tearing every module down: the
    agent's atexit handlers run, stdio is flushed. While a non-daemon thread still runs, the
    interpreter's exit (which waits for it) is kept: this returns and the caller exits."""
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        return
    atexit._run_exitfuncs()  # what a normal exit runs before its teardown (OpenTelemetry's, logging's, the agent's)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def run() -> int:
    code = main()
    leave(code)
    return code


if __name__ == "__main__":
    raise SystemExit(run())
