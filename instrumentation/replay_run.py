"""``python -m tracefix.replay_run``: one replay in this process (contracts §4).

The process's entry point, kept apart from `tracefix.replay_mode` because it starts tracing
(`tracefix.init()`, which installs replay mode): replay mode itself never imports what starts it.
"""
from __future__ import annotations

import os

from . import runtime
from .replay_mode import ENV_VAR, ReplayController, logger, run_entrypoint
from .start import init


def main() -> int:
    """Init tracefix (replay mode from TRACEFIX_REPLAY), call the cassette's entrypoint with
    its recorded inputs, flush, write the report."""
    if not os.environ.get(ENV_VAR):
        print(f"tracefix replay: set {ENV_VAR}=/path/replay.json", flush=True)
        return 2
    handle = init()
    controller: ReplayController = runtime.replay
    code = 0
    try:
        run_entrypoint(controller.cassette["entrypoint"], dict(controller.cassette.get("inputs") or {}),
                       controller.allowed_modules, controller.allowed_entrypoints)
    except Exception as exc:
        controller._session_error = f"{type(exc).__name__}: {exc}"
        logger.exception("tracefix replay: the entrypoint raised")
        code = 1
    finally:
        controller.write_report_at_exit()
        handle.shutdown()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
