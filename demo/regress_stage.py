"""`tracefix demo --regress`: the last step of the loop on the testbed. Once the failed
sessions got their thumbs-down (each an item of the dataset `default`) and their diagnosis,
`tracefix regress` runs them again on the banking team's version 2 (TRACEFIX_DEMO_AGENT_VERSION=2,
:mod:`tracefix.demo.team`: a worker's tool call missing a required argument is not run, the
worker is asked for a complete one), against the same scripted model with the same fault
plan, and then, as a control, on version 1.

Version 2 addresses one kind of fault (:data:`ADDRESSED`): those sessions must come out
fixed, every other one still failing, and on version 1 none fixed; anything else is a
problem the demo reports."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from rich.markup import escape

from .team import VERSION_ENV

# the fault kinds version 2's check of a call's required arguments prevents
ADDRESSED = ("missing_argument",)


def run_regress(serve_url: str, replay_key: str, version: int, timeout_s: float) -> tuple[int, dict[str, dict], str]:
    """`tracefix regress` of the dataset `default` on `version` of the app: (exit status,
    results by session id, what it printed on stderr)."""
    env = {**os.environ, VERSION_ENV: str(version), "TRACEFIX_REPLAY_KEY": replay_key, "TRACEFIX_TOKEN": ""}
    done = subprocess.run([sys.executable, "-m", "tracefix.cli", "regress", "--server", serve_url, "--dataset",
                           "default", "--allow-module", "tracefix.demo", "--tools", "live", "--json"],
                          env=env, capture_output=True, text=True, timeout=timeout_s)
    try:
        results = {r["session_id"]: r for r in json.loads(done.stdout)}
    except ValueError:
        results = {}
    return done.returncode, results, done.stderr


def expected_verdict(kind: str | None, version: int) -> str:
    return "fixed" if version == 2 and kind in ADDRESSED else "still failing"


def check(failed, results: dict[str, dict], version: int) -> list[str]:
    """What went against the expectation, one line per session."""
    problems = []
    for f in failed:
        kind = (f.fault or {}).get("kind")
        got = (results.get(f.session_id) or {}).get("verdict")
        want = expected_verdict(kind, version)
        if got != want:
            reason = (results.get(f.session_id) or {}).get("reason") or "no result"
            problems.append(f"regress on version {version}: {f.task_id} ({kind}) came out {got}, expected {want}: "
                            f"{reason}")
    return problems


def regress_stage(demo) -> None:
    """Regress the demo's failed sessions on version 2, then on version 1; what it finds goes
    to `demo.regressed` (by version, results by session id) and `demo.problems`."""
    demo.regressed = {}
    for version in (2, 1):
        code, results, err = run_regress(demo.serve_url, demo.replay_key, version, demo.time_left())
        if not results:
            demo.problems.append(f"tracefix regress on version {version} gave no results (exit {code}): "
                                 f"{err.strip().splitlines()[-1] if err.strip() else 'no output'}")
            continue
        demo.regressed[version] = results
        demo.problems += check(demo.failed, results, version)
        fixed = sum(1 for r in results.values() if r["verdict"] == "fixed")
        demo.say(f"[green]✓[/] regressed {len(results)} item(s) on version {version}: {fixed} fixed "
                 f"(exit {code})")


def regress_table(demo):
    from rich.table import Table

    table = Table(title="regression: version 1's failures run again", title_justify="left")
    for col in ("task", "injected fault", "version 2 (k/N)", "version 1, control (k/N)"):
        table.add_column(col, overflow="fold")

    def cell(version: int, sid: str) -> str:
        r = demo.regressed.get(version, {}).get(sid)
        return "—" if r is None else escape(f"{r['verdict']} ({r['after']['succeeded']}/{r['after']['runs']})")

    for f in demo.failed:
        table.add_row(f.task_id, (f.fault or {}).get("kind") or "—", cell(2, f.session_id), cell(1, f.session_id))
    return table
