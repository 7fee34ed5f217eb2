"""The job vocabulary shared by the collector, its API and `tracefix worker` (no heavy imports).

Two kinds of job: a **diagnosis** (the analysis, run inside `tracefix serve`, or claimed over
the API by a `tracefix worker --jobs diagnosis`) and a **replay** (claimed over the API by a
`tracefix worker` beside the agent's code). A job claimed over the API is leased to its worker
while it runs. A replay job may carry what a person asked it to test (`replay_request`).
"""
from __future__ import annotations

from typing import Any

# diagnosis: the analysis (in the collector or a worker); replay: claimed by a `tracefix worker`;
# regress: one dataset item run again (`tracefix regress --queue`), claimed by `tracefix worker --jobs regress`
JOB_KINDS = ("diagnosis", "replay", "regress")
FINISHED_JOB_STATES = ("done", "failed", "refused")
JOB_STATES = ("queued", "running", *FINISHED_JOB_STATES)
MAX_JOB_ATTEMPTS = 3


MAX_REQUESTED_STEPS = 20
MAX_EDIT_CHARS = 20_000


def replay_request(steps: Any = None, edit: Any = None) -> dict | None:
    """What a person asks a replay to test, checked: `steps` (step numbers to test instead of
    the attributed ones) and `edit` (their own intervention text, for exactly one step).
    None when nothing is asked (the replay attributes on its own). ValueError says what is wrong."""
    if steps is None and edit is None:
        return None
    if not isinstance(steps, list) or not steps or len(steps) > MAX_REQUESTED_STEPS or any(
            isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 1 << 31 for s in steps):
        raise ValueError(f"'steps' must be a list of 1 to {MAX_REQUESTED_STEPS} step numbers")
    if edit is not None:
        if not isinstance(edit, str) or not edit.strip() or len(edit) > MAX_EDIT_CHARS:
            raise ValueError(f"'edit' must be a non-empty text of at most {MAX_EDIT_CHARS} characters")
        if len(steps) != 1:
            raise ValueError("an 'edit' is tested at exactly one step: give one step with it")
    return {"steps": list(steps), **({"edit": edit} if edit is not None else {})}
