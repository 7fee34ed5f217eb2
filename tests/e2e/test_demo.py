"""`tracefix demo` end to end, in reduced size, as a user runs it: a subprocess that starts
its own scripted LLM server and collector, records, trains, alerts, diagnoses and writes
reports. The report files are checked for their parts, and the demo's processes for being
gone once it exits; so is the collector of a benchmark's harness (bench/demo_corpus.py)
killed with SIGTERM."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

VERDICT_BADGE = re.compile(r'class="badge v-(validated|partially_validated|refuted|inconclusive)"')
# The two subprocesses the demo starts print their address; both answer /healthz while they run.
ADDRESS = re.compile(r"(scripted LLM server|collector \(tracefix serve\)): (http://127\.0\.0\.1:\d+)")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "reports"
    result = subprocess.run(
        [sys.executable, "-m", "tracefix.cli", "demo", "--tasks", "5", "--fault-rate", "0.4", "--seed", "7",
         "--epochs", "8", "--llm", "none", "--out", str(out), "--keep"],
        capture_output=True, text=True, timeout=420)
    return result, out


def test_demo_exits_zero_with_a_summary_table_and_the_index_path(demo):
    result, out = demo
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "failed sessions" in result.stdout and "injected fault" in result.stdout
    assert f"reports: {out / 'index.html'}" in result.stdout.replace("\n", "")
    # not kept serving (no terminal): the link is not offered as one that still answers
    assert re.search(r"web UI: stopped with the demo \(it answered at http://127\.0\.0\.1:\d+/",
                     " ".join(result.stdout.split()))
    assert re.search(r"5 sessions recorded: 3 succeeded, 2 failed", result.stdout), result.stdout


def test_demo_writes_a_report_per_failed_session_linked_from_the_index(demo):
    _, out = demo
    index = (out / "index.html").read_text(encoding="utf-8")
    reports = sorted(out.glob("t*.html"))
    assert len(reports) == 2
    for report in reports:
        assert f'href="{report.name}"' in index
    assert len(VERDICT_BADGE.findall(index)) == 2  # a verdict per failed session
    assert "injected fault (ground truth)" in index


def test_each_report_has_steps_graph_hypotheses_and_replayed_verdicts(demo):
    _, out = demo
    for report in sorted(out.glob("t*.html")):
        html = report.read_text(encoding="utf-8")
        assert 'id="step-0"' in html and "<details class=\"step" in html, report.name
        assert html.count("data:image/png;base64,") == 2, "transition graph and score timeline"
        assert "Failure hypotheses, ranked" in html and "hypothesis #1" in html
        assert VERDICT_BADGE.search(html), "every tested intervention carries its verdict"
        # 3 replays per intervention, each compared with the original from step t on
        assert "Replay 3 ·" in html and "Side by side from step t" in html
        assert "is not available" not in html, "every child session of the replays was found"
        assert "thumbs-down" in html  # the feedback that started the diagnosis
        assert "deterministic fallback" in html  # --llm none: the report says which stages had no LLM


def test_markdown_report_of_a_diagnosed_session_from_the_kept_store(demo, tmp_path):
    """--keep leaves the store; `tracefix report --format md` on it shows the replays as diffs."""
    _, out = demo
    store = out / "work" / "tracefix.duckdb"
    assert store.exists()
    session = re.search(r'<a href="t\d+-\w+\.html" title="(\w+)">', (out / "index.html").read_text()).group(1)
    md_path = tmp_path / "r.md"
    result = subprocess.run([sys.executable, "-m", "tracefix.cli", "report", session, "--db", str(store),
                             "--out", str(md_path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    md = md_path.read_text(encoding="utf-8")
    assert "## Interventions and replays" in md and "```diff" in md and "Replay 1 against the original from step" in md
    assert re.search(r"\| 3 \| s-replay-", md), "three runs per intervention"
    assert (tmp_path / "r.graph.png").exists() and (tmp_path / "r.scores.png").exists()


def test_demo_stops_every_process_it_started(demo):
    result, _ = demo
    addresses = dict(ADDRESS.findall(result.stdout))
    assert len(addresses) == 2, result.stdout[:2000]
    for url in addresses.values():
        with pytest.raises(OSError):
            urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/healthz", timeout=2)


def test_demo_interrupted_stops_its_processes_and_says_so(tmp_path):
    """SIGTERM (as Ctrl-C) while the demo runs: exit 130, the sim and the collector gone."""
    proc = subprocess.Popen([sys.executable, "-m", "tracefix.cli", "demo", "--tasks", "3", "--out",
                             str(tmp_path / "reports")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if "collector (tracefix serve):" in line:
                break
        addresses = dict(ADDRESS.findall("".join(seen)))
        assert len(addresses) == 2, "".join(seen)
        proc.terminate()
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, "".join(seen) + rest
    assert "interrupted: stopping the demo's processes" in rest
    for url in addresses.values():
        with pytest.raises(OSError):
            urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/healthz", timeout=2)


# A benchmark's harness (bench/demo_corpus.py over tests/procs.py) holding its collector the
# way bench/localization.py does, until it is killed.
CORPUS_HOLDER = """
import sys, tempfile, time
sys.path.insert(0, sys.argv[1])
from demo_corpus import DemoCorpus
with tempfile.TemporaryDirectory() as tmp, DemoCorpus(tmp) as corpus:
    print("collector", corpus.serve.popen.pid, corpus.server_url, flush=True)
    time.sleep(120)
"""


def test_bench_harness_killed_with_sigterm_stops_its_collector():
    """`kill PID` of a benchmark (a job runner's stop, a timeout) must not leave its
    `tracefix serve` running with its ports and DuckDB file, as Python's default SIGTERM
    action (no `finally`, no `__exit__`, no atexit) did."""
    bench = Path(__file__).resolve().parents[2] / "bench"
    proc = subprocess.Popen([sys.executable, "-c", CORPUS_HOLDER, str(bench)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    child = None
    try:
        line = proc.stdout.readline()
        m = re.match(r"collector (\d+) (\S+)", line)
        assert m, line + proc.stdout.read()
        child, url = int(m.group(1)), m.group(2)
        proc.terminate()
        rest, _ = proc.communicate(timeout=30)
        assert not _alive(child), f"collector {child} outlived its harness:\n{rest}"
        assert proc.returncode != -signal.SIGTERM, "SIGTERM still ends the harness without unwinding"
        with pytest.raises(OSError):
            urllib.request.urlopen(url + "/healthz", timeout=2)
    finally:
        if proc.poll() is None:
            proc.kill()
        if child is not None and _alive(child):
            os.kill(child, signal.SIGKILL)  # the orphan this test is about: never leave it behind


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
