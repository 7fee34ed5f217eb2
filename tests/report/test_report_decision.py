"""The report decides its root cause once (issue 38): the summary's "Most likely root cause",
the graph's star, the ranked table's first row and the trace's "hypothesis #1" are the same
step, in HTML and in Markdown; trials are counted from 1 everywhere; the stage table says
what ordered the hypotheses (the learned ranker, when it did)."""
from __future__ import annotations

import re

import pytest

from tracefix.report.render import render_html, render_markdown

AGENTS = ["Orchestrator", "Refunder", "Tool", "Refunder", "Checker", "Orchestrator"]


def session() -> dict:
    steps = [{"index": k, "kind": "llm", "agent": agent, "input_messages": [{"role": "user", "content": f"go {k}"}],
              "output_message": {"role": "assistant", "content": f"step {k} output"}, "tool_calls": [],
              "error": None} for k, agent in enumerate(AGENTS)]
    return {"session_id": "s-decision", "task": "Refund order 42", "outcome": "failure", "steps": steps,
            "feedback": [{"score": -1, "comment": "refunded the wrong order"}]}


def analysis(ranker_version: str | None = "ranker-7f3a") -> dict:
    """The analysis ranks steps 1 and 2; step 4 is not among its hypotheses."""
    return {"session_id": "s-decision", "llm_used": False, "ranker_version": ranker_version,
            "detectors": ["isolation_forest"],
            "notes": (["hypotheses ordered by the learned step ranker ranker-7f3a over the detectors' signals"]
                      if ranker_version else ["hypotheses ranked by detectors and dependency paths"]),
            "scores": [{"step": k, "isolation_forest": 0.1 * k, "agent": a} for k, a in enumerate(AGENTS)],
            "graph": {"nodes": [{"step": k, "agent": a, "phase": "act"} for k, a in enumerate(AGENTS)],
                      "edges": [{"src": k, "dst": k + 1, "type": "temporal"} for k in range(len(AGENTS) - 1)]},
            "hypotheses": [{"rank": 1, "step": 1, "agent": "Refunder", "score": 0.9, "source": "ranker",
                            "rationale": "Step 1 (Refunder): introduces an order id nobody gave",
                            "evidence": {"detectors": ["isolation_forest"], "tool": "refund"}},
                           {"rank": 2, "step": 2, "agent": "Tool", "score": 0.4, "source": "detectors",
                            "rationale": "Step 2 (Tool): the refund failed", "evidence": {"error": "order 24 not found"}}]}


def replay_test(step: int, agent: str, verdict: str, successes: int, runs: int, trial: int, reason: str) -> dict:
    return {"id": f"h-{step}", "step": step, "agent": agent, "round": 1, "trial": trial, "source": "fallback",
            "reason": reason, "verdict": verdict, "verdict_reason": f"{successes}/{runs} replays succeeded",
            "intervention": {"id": f"iv-{step}", "step": step, "kind": "add_message", "category": "correction",
                             "text": f"fix at step {step}"},
            "runs": [{"success": i < successes, "child_session_id": None} for i in range(runs)]}


def replay(*hypotheses: dict) -> dict:
    return {"session_id": "s-decision", "rounds": 1, "stages": {"segmentation": "fallback", "attribution": "fallback"},
            "trials": [{"index": 0, "start": 0, "end": 2, "failed": True}, {"index": 1, "start": 3, "end": 5,
                                                                          "failed": True}],
            "hypotheses": list(hypotheses)}


def decided_steps(markdown: str) -> dict[str, int]:
    """The step each part of the Markdown report names as its first cause."""
    table = markdown[markdown.index("## Failure hypotheses, ranked"):]
    return {"summary": int(re.search(r"Most likely root cause(?: \(not verified by replay\))?: step (\d+)",
                                     markdown).group(1)),
            "table": int(re.search(r"^\| 1 \| (\d+) \|", table, re.M).group(1)),
            "star": int(re.search(r"The star marks step (\d+)", markdown).group(1))}


CASES = {
    # the t03 report: the analysis ranked step 1 first (validated 2/3); the replay's own attribution
    # tested step 4, not among the analysis's hypotheses, and validated it 3/3
    "verified-off-the-ranking": (replay(replay_test(1, "Refunder", "validated", 2, 3, 0, "order id from nowhere"),
                                        replay_test(4, "Checker", "validated", 3, 3, 1,
                                               "highest anomaly score in the trial")), 4),
    "the-top-refuted": (replay(replay_test(1, "Refunder", "refuted", 0, 3, 0, "order id from nowhere")), 2),
    "not-replayed": (None, 1),
}


@pytest.mark.parametrize("case", CASES)
def test_the_summary_the_star_the_table_and_the_trace_name_one_root_cause(case):
    result, expected = CASES[case]
    doc, found = session(), analysis()
    markdown = render_markdown(doc, found, result)
    assert decided_steps(markdown) == {"summary": expected, "table": expected, "star": expected}, markdown[:3000]
    html = render_html(doc, found, result)
    assert f"The star marks step {expected}," in html
    first_row = re.search(r"<th>replay</th></tr><tr><td>1</td><td[^>]*><a href=\"#step-(\d+)\"", html)
    assert int(first_row.group(1)) == expected
    marked = re.search(r'id="step-(\d+)" open>', html)  # the trace opens its "hypothesis #1"
    assert int(marked.group(1)) == expected
    assert re.search(rf'id="step-{expected}"[^>]*><summary>.*?hypothesis #1<', html, re.S)
    if case == "the-top-refuted":
        assert "Refuted: step 1 (Refunder)" in markdown


def test_trials_are_counted_from_one_everywhere():
    result = replay(replay_test(1, "Refunder", "validated", 2, 3, 0, "order id from nowhere"),
                    replay_test(4, "Checker", "validated", 3, 3, 1, "highest anomaly score in the trial"))
    for text in (render_html(session(), analysis(), result), render_markdown(session(), analysis(), result)):
        named = set(re.findall(r"\btrial (\d+)\b", text, re.I))
        assert named == {"1", "2"}, named
    html = render_html(session(), analysis(), result)
    assert re.search(r"Step 4 · Checker <span class=\"sub\">hypothesis h-4, round 1, trial 2,", html)
    assert "Trial 2: steps 3–5" in html


@pytest.mark.parametrize("ranker, said", [("ranker-7f3a", "learned step ranker ranker-7f3a"),
                                          (None, "detectors and dependency paths")])
def test_the_stage_table_says_what_ordered_the_hypotheses(ranker, said):
    markdown = render_markdown(session(), analysis(ranker), None)
    row = re.search(r"^\| hypothesis ranking \| (.*) \|$", markdown, re.M).group(1)
    assert said in row and "fallback" not in row, row
    summary = markdown[:markdown.index("## Failure hypotheses")]
    assert f"The hypotheses were ranked by the {said}" in summary
