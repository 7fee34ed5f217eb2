"""Careless input to the real CLI gets one clear line naming the input and what to do, exit
code 2 (usage) or 1, never a traceback (issue 38, item 5). Every case runs `tracefix` as a
subprocess, as a user would."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import procs

TRACEFIX = [sys.executable, "-m", "tracefix.cli"]


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRACEFIX_SERVER": "", "TRACEFIX_DB": "", "TRACEFIX_TOKEN": ""}
    return subprocess.run(TRACEFIX + list(args), capture_output=True, text=True, timeout=60, cwd=cwd, env=env)


def assert_clear_error(result: subprocess.CompletedProcess, code: int, *named: str) -> str:
    """Exit `code`, no traceback, and an `Error:` line that names every one of `named`."""
    out = result.stdout + result.stderr
    assert result.returncode == code, out
    assert "Traceback" not in out, out
    error = next((line for line in out.splitlines() if line.startswith("Error:")), None)
    assert error is not None, out
    for text in named:
        assert text in error, (text, error)
    return error


def test_import_of_a_file_that_is_not_utf8_says_so(tmp_path):
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes(json.dumps({"messages": [{"role": "user", "content": "café"}]}, ensure_ascii=False).encode("latin-1"))
    error = assert_clear_error(run("import", str(latin1), "--db", str(tmp_path / "s.duckdb")), 1,
                               str(latin1), "UTF-8", "0xe9")
    assert "save it as UTF-8" in error
    assert not (tmp_path / "s.duckdb").exists()


def test_import_errors_say_how_they_count(tmp_path):
    conversations = tmp_path / "two.json"
    conversations.write_text(json.dumps([{"messages": [{"role": "user", "content": "hi"}]},
                                         {"messages": [{"role": "user", "content": "ok"}, {"role": "user"}]}]))
    assert_clear_error(run("import", str(conversations), "--db", str(tmp_path / "s.duckdb")), 1,
                       "conversation 1, message 1", "counting from 0")
    keyless = tmp_path / "keyless.jsonl"
    keyless.write_text('{"messages": []}\n{"turns": []}\n')
    assert_clear_error(run("import", str(keyless), "--db", str(tmp_path / "s.duckdb")), 1,
                       "conversation 1", "counting from 0", "turns")


def _make_read_only(path: Path) -> list[Path]:
    """`path` and its folder made unwritable for this process: by mode for a user, by the
    immutable attribute for root (whom modes do not stop). Returns what to undo."""
    targets = [path, path.parent]
    if os.geteuid() != 0:
        for target in targets:
            target.chmod(0o555 if target.is_dir() else 0o444)
        return []
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", *map(str, targets)]).returncode != 0:
        pytest.skip("running as root on a file system without chattr +i: cannot make a file read-only")
    return targets


def test_a_read_only_store_is_browsed_and_a_write_is_refused_in_words(tmp_path):
    folder = tmp_path / "archive"
    store = folder / "s.duckdb"
    conversation = tmp_path / "one.json"
    conversation.write_text(json.dumps({"messages": [{"role": "user", "content": "archived task"}]}))
    imported = run("import", str(conversation), "--db", str(store))
    assert imported.returncode == 0, imported.stderr
    session_id = imported.stdout.split()[0]
    frozen = _make_read_only(store)
    try:
        listed = run("sessions", "--db", str(store))
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
        assert session_id in listed.stdout and "archived task" in listed.stdout
        shown = run("show", session_id, "--db", str(store))
        assert shown.returncode == 0 and "archived task" in shown.stdout, shown.stderr
        assert_clear_error(run("feedback", session_id, "--score", "0", "--db", str(store)), 1,
                           str(store), "read-only")
    finally:
        if frozen:
            subprocess.run(["chattr", "-i", *map(str, frozen)], check=True)
        else:
            folder.chmod(0o755)
            store.chmod(0o644)


def test_a_port_out_of_range_is_a_usage_error():
    assert_clear_error(run("sim", "--port", "70000"), 2, "--port", "70000", "65535")
    assert_clear_error(run("serve", "--http-port", "70000"), 2, "--http-port", "70000")


def test_a_db_under_a_file_is_a_usage_error(tmp_path):
    a_file = tmp_path / "hostname"
    a_file.write_text("not a folder\n")
    for verb in (["sessions"], ["serve", "--http-port", "0", "--grpc-port", "0"]):
        assert_clear_error(run(*verb, "--db", str(a_file / "x.duckdb")), 2, "--db", str(a_file), "not a folder")


def test_serve_on_a_busy_port_names_it_and_creates_nothing(tmp_path):
    first = procs.start_serve(tmp_path / "first.duckdb")
    try:
        http_port = first.match["http"].rsplit(":", 1)[1]
        grpc_port = first.match["grpc"].rsplit(":", 1)[1]
        second = tmp_path / "second" / "t.duckdb"
        for option, port, other in (("--http-port", http_port, "--grpc-port"), ("--grpc-port", grpc_port, "--http-port")):
            result = run("serve", "--db", str(second), option, port, other, "0")
            assert_clear_error(result, 1, f"127.0.0.1:{port}", option, "in use")
            assert not second.parent.exists()  # no database files for a collector that never listened
    finally:
        first.stop()


def test_serve_never_shares_a_port_a_reuseport_listener_holds(tmp_path):
    """SO_REUSEPORT on both sides would let two listeners share a port: whatever the other
    side set, `serve` refuses."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = str(holder.getsockname()[1])
    try:
        for option, other in (("--http-port", "--grpc-port"), ("--grpc-port", "--http-port")):
            result = run("serve", "--db", str(tmp_path / "t.duckdb"), option, port, other, "0")
            assert_clear_error(result, 1, f"127.0.0.1:{port}", option)
    finally:
        holder.close()


def test_serve_stops_on_sigterm_without_leak_warnings(tmp_path):
    """With a decode worker (the default --decode-workers 1): its pool's semaphores are freed
    before the process leaves, so the resource tracker has nothing to warn about."""
    popen = subprocess.Popen(TRACEFIX + ["serve", "--db", str(tmp_path / "t.duckdb"), "--http-port", "0",
                                         "--grpc-port", "0", "--decode-workers", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    ready = threading.Event()

    def pump() -> None:  # to EOF: the resource tracker (a child) writes to the same pipe
        for line in popen.stdout:
            lines.append(line)
            if "http=" in line:
                ready.set()
        ready.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        assert ready.wait(60) and popen.poll() is None, "".join(lines)
    finally:
        popen.send_signal(signal.SIGTERM)
        assert popen.wait(30) == 0, "".join(lines)
    reader.join(30)
    out = "".join(lines)
    assert "tracefix serve: stopped" in out
    assert "leaked" not in out and "Traceback" not in out, out
