"""The report of a long session stays readable and bounded: the trace shows the steps around
the hypotheses, tests, frontier and errors, and the session's ends, with a line for each run
of steps left out; a session of a few hundred steps is shown whole."""
from __future__ import annotations

import json
import re

import pytest
from report_session import tracefix

from tracefix.report.content.steps import TRACE_CONTEXT, TRACE_STEPS_SHOWN, trace_positions

STEPS = 1_500


def long_log(steps: int) -> dict:
    """A message log of `steps` steps: a planner and a worker taking turns."""
    history = [{"name": "Planner", "content": f"Next, fetch page {i // 2} of the archive."} if i % 2 == 0 else
               {"name": "Worker", "content": f"Page {i // 2}: {i % 7} new records, stored."} for i in range(steps)]
    return {"task": "copy the archive, page by page", "history": history}


@pytest.fixture(scope="module")
def long_report(reported, tmp_path_factory):
    folder = tmp_path_factory.mktemp("long")
    log = folder / "long.json"
    log.write_text(json.dumps(long_log(STEPS)))
    [sid] = json.loads(tracefix("import", str(log), "--server", reported.server, "--json").stdout)
    tracefix("analyze", sid, "--server", reported.server)
    html, markdown = folder / "long.html", folder / "md" / "long.md"
    tracefix("report", sid, "--server", reported.server, "--out", str(html))
    tracefix("report", sid, "--server", reported.server, "--out", str(markdown))
    analysis = json.loads(tracefix("analyze", sid, "--server", reported.server, "--json").stdout)
    return html.read_text(encoding="utf-8"), markdown.read_text(encoding="utf-8"), analysis


def test_a_long_sessions_trace_shows_its_marked_steps_and_ends_and_says_what_it_leaves_out(long_report):
    html, markdown, analysis = long_report
    shown = [int(k) for k in re.findall(r'<details class="step[^"]*" id="step-(\d+)"', html)]
    assert len(shown) <= TRACE_STEPS_SHOWN + 2 * TRACE_CONTEXT and shown == sorted(shown)
    for h in analysis["hypotheses"]:  # every hypothesis's step is in the trace, in full
        assert h["step"] in shown, h["step"]
    assert {0, STEPS - 1} <= set(shown)  # the first and the last step
    assert f"The session has {STEPS:,} steps" in html and f"The session has {STEPS:,} steps" in markdown
    gaps = re.findall(r'<div class="gap">… (\d+) steps? not shown \(steps (\d+)–(\d+)\)</div>', html)
    assert gaps and sum(int(n) for n, _, _ in gaps) == STEPS - len(shown)
    for n, low, high in gaps:  # each gap names the steps it stands for, none of them shown
        assert int(high) - int(low) + 1 == int(n) and not set(range(int(low), int(high) + 1)) & set(shown)
    assert len(re.findall(r"\*… \d+ steps? not shown", markdown)) == len(gaps)
    assert len(html) < 3_000_000


def test_a_session_of_a_few_hundred_steps_is_shown_whole(reported, tmp_path):
    log = tmp_path / "short.json"
    log.write_text(json.dumps(long_log(TRACE_STEPS_SHOWN)))
    [sid] = json.loads(tracefix("import", str(log), "--server", reported.server, "--json").stdout)
    out = tmp_path / "short.html"
    tracefix("report", sid, "--server", reported.server, "--out", str(out))
    html = out.read_text(encoding="utf-8")
    assert len(re.findall(r'<details class="step', html)) == TRACE_STEPS_SHOWN
    assert 'class="gap"' not in html and "not shown" not in html


def test_the_marks_are_taken_in_a_readers_order_until_the_budget_is_spent():
    steps = [{"index": k, "agent": "Worker"} for k in range(1_000)]
    steps[700]["error"] = "the archive answered 503"
    analysis = {"hypotheses": [{"rank": 2, "step": 400}, {"rank": 1, "step": 600}]}
    replay = {"hypotheses": [{"step": 900, "verdict": "validated"}]}
    shown = trace_positions(steps, analysis, replay, limit=40, context=2)
    around = {k for mark in (400, 600, 700, 900) for k in range(mark - 2, mark + 3)}
    assert around | {0, 1, 2, 997, 998, 999} <= set(shown) and len(shown) == 40
    assert shown[:40 - len(around) - 3] == list(range(40 - len(around) - 3))  # the rest: how the session began
    # a budget too small for every mark keeps the stronger ones: the top hypothesis first
    few = set(trace_positions(steps, analysis, replay, limit=12, context=2))
    assert set(range(598, 603)) <= few and not {700, 900} & few
    assert trace_positions(steps[:40], analysis, replay, limit=40) == list(range(40))
