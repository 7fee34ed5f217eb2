"""README.md's "Trace your own agent" and examples/README.md, run the way they are read.

The code and the commands come out of the Markdown files themselves and run in a temp
folder, in order, in one bash shell each (so `export` and `cd` carry over, as in a
reader's terminal), with only what the files say. The substitutions a reader would make
are the only ones: a free port for the sim's, the temp folder, and `SESSION` by the id the
`tracefix sessions` before it printed. The collector runs on its default port, as the text
says (the test fails, saying so, when something else holds it). Background commands (`&`)
are started by the shell and stopped by the test; between two commands the test waits as a
reader would (for a port to open, for a session to be stored, for jobs to end), never adds
one. Every fenced block of those sections must be run here, and what the text says a
command prints or ends with is checked against what it did.
"""
from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import procs
import pytest

from tracefix.collector.jobs import FINISHED_JOB_STATES

ROOT = Path(__file__).resolve().parents[2]
COLLECTOR = "http://127.0.0.1:4318"  # `tracefix serve`'s default, which the texts rely on
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
COMMENT = re.compile(r"\s+#\s.*$")  # a trailing shell comment (the texts' notes)


def section(path: Path, heading: str | None) -> str:
    """The text under `## heading` up to the next `## ` heading (the whole file for None)."""
    text = path.read_text(encoding="utf-8")
    if heading is None:
        return text
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def commands(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def api(path: str):
    try:
        with urllib.request.urlopen(COLLECTOR + path, timeout=5) as resp:
            return json.loads(resp.read())
    except OSError:
        return None


def root_sessions() -> list[dict]:
    answer = api("/api/v1/sessions?limit=200") or {}
    rows = answer.get("sessions", answer) if isinstance(answer, dict) else answer
    return [s for s in rows or [] if not s.get("parent_session_id")]


class Shell:
    """One bash process fed a command at a time, like a terminal; its background jobs are
    remembered and stopped by `close`."""

    def __init__(self, cwd: Path, env: dict):
        self.proc = subprocess.Popen(["bash", "--norc", "--noprofile"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, cwd=cwd, env=env, start_new_session=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.transcript: list[str] = []
        self.background: list[int] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)

    def run(self, command: str, timeout: float) -> tuple[int, str]:
        """Run `command`; (its exit status, what the shell printed meanwhile)."""
        marker = f"__done_{time.monotonic_ns()}__"
        background = command.endswith("&")
        suffix = f"echo {marker}$! 0" if background else f"echo {marker}0 $?"
        self.proc.stdin.write(f"{command}\n{suffix}\n")
        self.proc.stdin.flush()
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"{command!r} ran over {timeout:.0f} s:\n{''.join(out)[-3000:]}") from None
            if line.startswith(marker):
                pid, status = line[len(marker):].split()
                if background:
                    self.background.append(int(pid))
                self.transcript.append(f"$ {command}\n{''.join(out)}")
                return int(status), "".join(out)
            out.append(line)

    def output_so_far(self) -> str:
        time.sleep(0.2)
        while not self.lines.empty():
            self.transcript.append(self.lines.get())
        return "".join(self.transcript)

    def close(self) -> None:
        for pid in reversed(self.background):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            for _ in range(100):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                os.kill(pid, signal.SIGKILL)
        self.proc.stdin.close()
        self.proc.wait(10)


def reader_env() -> dict:
    """A new reader's environment: tracefix installed (this venv first on PATH), nothing set."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TRACEFIX_", "OPENAI_", "OTEL_", "ANTHROPIC_", "PYTHONPATH"))}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    return env


def run_as_written(shell: Shell, block: str, sim_port: int, *, steps: dict) -> dict[str, str]:
    """Run `block`'s commands in order (the sim's port made free); the output of each, by
    its first words. `steps` says how long each may take, by its first words."""
    printed: dict[str, str] = {}
    session = None
    for command in commands(block.replace("8765", str(sim_port))):
        bare = COMMENT.sub("", command).strip()
        words = " ".join(bare.split()[:2])
        if "SESSION" in bare:
            assert session, f"{bare!r}: no `tracefix sessions` before it printed a session"
            bare = bare.replace("SESSION", session)
        if words == "tracefix sessions":  # a reader looks once the app's session is stored
            procs.wait_for(lambda: any(s.get("outcome") for s in root_sessions()), "the app's session in the collector", 30)
        if words == "tracefix jobs":  # and for the jobs to end (the text says how long)
            procs.wait_for(lambda: (jobs := (api("/api/v1/jobs") or {}).get("jobs"))
                           and all(j["state"] in FINISHED_JOB_STATES for j in jobs)
                           and {j["kind"] for j in jobs} >= {"diagnosis", "replay"}, "every job to end", 120)
        status, out = shell.run(bare, timeout=steps.get(words, 60))
        assert status == 0, f"{bare!r} exited {status}:\n{out[-3000:]}\n{shell.output_so_far()[-4000:]}"
        printed[words] = out
        if bare.endswith("&") and "tracefix sim" in bare:
            procs.wait_for(lambda: port_open(sim_port), f"the sim on port {sim_port}", 30)
        if bare.endswith("&") and "tracefix serve" in bare:
            procs.wait_for(lambda: api("/healthz"), "tracefix serve on its default port", 60)
        if words == "tracefix sessions":
            rows = out.splitlines()[1:]
            assert rows, f"`tracefix sessions` listed no session:\n{out}"
            session = rows[0].split()[0]  # the newest, first under the header
    return printed


@pytest.fixture
def default_ports_free():
    busy = [p for p in (4317, 4318) if port_open(p)]
    if busy:
        pytest.fail(f"the READMEs' collector runs on the default ports 4317/4318; something holds {busy}")


def test_trace_your_own_agent_runs_as_written(tmp_path, default_ports_free):
    blocks = fenced_blocks(section(ROOT / "README.md", "Trace your own agent"))
    assert [lang for lang, _ in blocks] == ["python", "bash"], (
        f"every block of the section must be run here, and this test runs one app and one command block: "
        f"{[lang for lang, _ in blocks]}")
    (_, app), (_, block) = blocks
    assert 'if __name__ == "__main__":' in app  # a replay imports app.py: the agent must not run again then
    assert "TRACEFIX_REPLAY_KEY" in block  # the app signs what it records
    (tmp_path / "app.py").write_text(app, encoding="utf-8")  # "save this as app.py"
    shell = Shell(tmp_path, reader_env())
    try:
        printed = run_as_written(shell, block, free_port(), steps={"tracefix replay": 120})
        assert 'DONE: {"order_id": 1024, "status": "no such order"}' in printed["python app.py"]
        assert "failure" in printed["tracefix sessions"].splitlines()[1]  # "the session: 2 steps, outcome failure"
        assert re.search(r"\s2\s+failure\s", printed["tracefix sessions"].splitlines()[1])
        assert "verdict: VALIDATED (3/3 replays succeeded)" in printed["tracefix replay"], printed["tracefix replay"]
        # the replays ran the app's function, not the app again: the app's own session is the only root
        assert len(root_sessions()) == 1, root_sessions()
    finally:
        shell.close()


def test_examples_readme_runs_as_written(tmp_path, default_ports_free):
    blocks = fenced_blocks(section(ROOT / "examples" / "README.md", None))
    assert [lang for lang, _ in blocks] == ["bash"], [lang for lang, _ in blocks]
    [(_, block)] = blocks
    assert "TRACEFIX_REPLAY_KEY" in block
    shutil.copytree(ROOT / "examples", tmp_path / "examples",
                    ignore=shutil.ignore_patterns("__pycache__", ".tracefix"))  # "from the checkout's folder"
    shell = Shell(tmp_path, reader_env())
    try:
        printed = run_as_written(shell, block, free_port(), steps={"tracefix feedback": 30})
        assert "failure" in printed["tracefix sessions"].splitlines()[1]
        jobs = printed["tracefix jobs"]
        assert re.search(r"\sdiagnosis\s+done\s", jobs) and re.search(r"\sreplay\s+done\s", jobs), jobs
        report = (tmp_path / "examples" / "report.md").read_text(encoding="utf-8")
        assert re.search(r"^Verdict: \*\*validated\*\*", report, re.M), report[-4000:]
        # `tracefix sessions` in examples/ went to the collector: no empty store made there
        assert not (tmp_path / "examples" / ".tracefix").exists()
    finally:
        shell.close()
