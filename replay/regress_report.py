"""How `tracefix regress` shows what it found: a progress bar while the runs go, a table of
the items (before → after k/N, milestones, verdict), and JUnit XML for CI (one test case an
item: still or newly failing is a failure, refused or error an error, flaky passes with a
note in its output)."""
from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from typing import TextIO

BAR_WIDTH = 30


def progress_bar(stream: TextIO = sys.stderr):
    """`progress(done, total)` drawing `[#####.....] done/total runs` on one line of `stream`
    (a new line at the end; on a terminal redrawn in place, else one line per tenth)."""
    tty = getattr(stream, "isatty", lambda: False)()
    shown = {"tenth": -1}

    def progress(done: int, total: int) -> None:
        filled = BAR_WIDTH * done // max(total, 1)
        line = f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {done}/{total} runs"
        if tty:
            stream.write("\r" + line + ("\n" if done >= total else ""))
        elif 10 * done // max(total, 1) > shown["tenth"] or done >= total:
            shown["tenth"] = 10 * done // max(total, 1)
            stream.write(line + "\n")
        stream.flush()

    return progress


def _milestones_after(result: dict) -> str:
    runs = [r for r in result["runs"] if r["milestones"]]
    if not runs:
        return "-"
    reached = sum(sum(m["achieved"] for m in r["milestones"]) for r in runs) / len(runs)
    return f"{reached:.1f}/{len(runs[0]['milestones'])}"


def _before(result: dict) -> str:
    success = result["before"]["success"]
    return {True: "success", False: "failure", None: "unknown"}[success]


def table(results: list[dict]) -> str:
    """The items, one line each, and a count per verdict."""
    lines = [f"{'SESSION':<34} {'TASK':<6} {'BEFORE':<8} {'AFTER':>5}  {'MILESTONES':<17} {'VERDICT':<14} REASON"]
    for r in results:
        after = f"{r['after']['succeeded']}/{r['after']['runs']}" if r["runs"] else "-"
        milestones = f"{r['before']['milestones'] or '-'} -> {_milestones_after(r)}"
        lines.append(f"{r['session_id'][:34]:<34} {(r.get('task') or '-')[:6]:<6} {_before(r):<8} {after:>5}  "
                     f"{milestones:<17} {r['verdict'].upper():<14} {' '.join(str(r['reason']).split())[:100]}")
        lines += [f"    note: {note}" for note in r.get("notes") or []]
    counts: dict[str, int] = {}
    for r in results:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    lines.append(f"{len(results)} item(s): " + ", ".join(f"{n} {v}" for v, n in counts.items()))
    return "\n".join(lines)


def junit_xml(results: list[dict], run_id: str) -> str:
    """JUnit XML (the schema Jenkins, GitLab and GitHub's test reporters read): a test suite
    `tracefix regress`, a test case per item named by its session (and task)."""
    failures = sum(1 for r in results if r["verdict"] in ("still failing", "newly failing"))
    errors = sum(1 for r in results if r["verdict"] in ("refused", "error"))
    total_s = sum((run.get("wall_s") or 0) for r in results for run in r["runs"])
    suites = ET.Element("testsuites", name="tracefix regress", tests=str(len(results)), failures=str(failures),
                        errors=str(errors), time=f"{total_s:.3f}")
    suite = ET.SubElement(suites, "testsuite", name=f"tracefix regress {run_id}", tests=str(len(results)),
                          failures=str(failures), errors=str(errors), skipped="0", time=f"{total_s:.3f}")
    for r in results:
        name = r["session_id"] + (f" ({r['task']})" if r.get("task") else "")
        case = ET.SubElement(suite, "testcase", classname=r.get("dataset") or "dataset", name=name,
                             time=f"{sum((run.get('wall_s') or 0) for run in r['runs']):.3f}")
        message = f"{r['verdict']}: {r['reason']}"
        if r["verdict"] in ("still failing", "newly failing"):
            ET.SubElement(case, "failure", message=message, type=r["verdict"]).text = _runs_text(r)
        elif r["verdict"] in ("refused", "error"):
            ET.SubElement(case, "error", message=message, type=r["verdict"]).text = _runs_text(r)
        ET.SubElement(case, "system-out").text = message + "\n" + _runs_text(r)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _runs_text(result: dict) -> str:
    lines = []
    for i, run in enumerate(result["runs"], 1):
        state = {True: "success", False: "failure", None: "no outcome"}[run["success"]]
        reached = sum(m["achieved"] for m in run["milestones"])
        if run.get("judged_by") not in (None, "evaluator"):
            state += f" (scored by {run['judged_by']})"
        lines.append(f"run {i}: {state}, milestones {reached}/{len(run['milestones'])}, "
                     f"{run['llm_requests']} LLM request(s), session {run['child_session_id']}"
                     + (f", error: {run['error']}" if run.get("error") else ""))
    return "\n".join(lines)
