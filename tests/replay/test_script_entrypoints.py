"""An agent written as a script and run as `python app.py` (the README's way) records an
entrypoint a replay can import again ("app:answer", not "__main__:answer"), and
`tracefix replay` started in the app's folder replays it."""
from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import textwrap
import urllib.request
from contextlib import contextmanager

import procs

from tracefix.collector.access import HttpAccess

APP = textwrap.dedent('''
    import openai
    import tracefix

    tracefix.init(service_name="script-agent")


    @tracefix.session
    def answer(question: str) -> str:
        with tracefix.agent("AccountAgent"):
            reply = openai.OpenAI(max_retries=0).chat.completions.create(
                model="bank-agent", messages=[{"role": "user", "content": question}])
            return reply.choices[0].message.content


    if __name__ == "__main__":
        print(answer("AccountAgent: look up customer Alice Chen."))
''')


@contextmanager
def script_session(tmp_path, source: str, *sim_args: str):
    """`python app.py` (source) run once in its own folder against a scripted LLM server
    (`tracefix sim *sim_args`), exporting to a fresh `tracefix serve`; yields (collector URL,
    app folder, env, session summary). The env, the app's, holds the app's replay key."""
    sim = procs.start_sim(*sim_args)
    serve = procs.start_serve(tmp_path / "store.duckdb", "--diagnose", "off")
    try:
        url = serve.match["http"]
        app_dir = tmp_path / "myapp"
        app_dir.mkdir()
        (app_dir / "app.py").write_text(source)
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("TRACEFIX_LLM_")},
               "OPENAI_BASE_URL": sim.match["base_url"], "OPENAI_API_KEY": "k",
               "OTEL_EXPORTER_OTLP_ENDPOINT": url, "PYTHONPATH": "",
               "TRACEFIX_REPLAY_KEY": secrets.token_hex(32)}  # the app signs, the replay checks
        subprocess.run([sys.executable, "app.py"], cwd=app_dir, env=env, check=True, timeout=120,
                       capture_output=True)
        [summary] = HttpAccess(url).list_sessions()
        yield url, app_dir, env, summary
    finally:
        serve.stop()
        sim.stop()


def test_a_script_run_as_main_is_recorded_importably_and_replays(tmp_path):
    with script_session(tmp_path, APP) as (url, app_dir, env, summary):
        assert summary["entrypoint"] == "app:answer" and summary["marked_replayable"]
        out = subprocess.run([sys.executable, "-m", "tracefix.cli", "replay", summary["session_id"], "--server", url,
                              "--allow-module", "app", "--step", "0", "--runs", "1", "--json"],
                             cwd=app_dir, env=env, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        run = json.loads(out.stdout)["hypotheses"][0]["runs"][0]
        assert run["error"] is None
        assert HttpAccess(url).get_session(run["child_session_id"])["parent_session_id"] == summary["session_id"]


def test_a_session_of_code_that_cannot_be_imported_again_is_not_replayable():
    code = textwrap.dedent('''
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import tracefix
        exporter = InMemorySpanExporter()
        handle = tracefix.init(span_processor=SimpleSpanProcessor(exporter))

        @tracefix.session
        def answer(question: str) -> str:
            return question

        answer("hi")
        handle.shutdown()
        root = [s for s in exporter.get_finished_spans() if "tracefix.entrypoint" in s.attributes][0]
        print(root.attributes["tracefix.entrypoint"], root.attributes["tracefix.session.replayable"])
    ''')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["__main__:answer", "False"], out.stdout + out.stderr


UNDECORATED_TOOL_APP = textwrap.dedent('''
    import json

    import openai
    import tracefix
    from tracefix.demo.team import system_prompt, tools_for

    tracefix.init(service_name="script-agent")


    def lookup_customer(name: str) -> dict:  # a tool without @tracefix.tool: tracefix never sees it run
        return {"customer_id": "C-1", "name": name, "accounts": ["ACC-1"]}


    @tracefix.session
    def answer(question: str) -> str:
        client = openai.OpenAI(max_retries=0)
        messages = [{"role": "system", "content": system_prompt("AccountAgent")},
                    {"role": "user", "content": question}]
        with tracefix.agent("AccountAgent"):
            first = client.chat.completions.create(model="bank-agent", messages=messages,
                                                   tools=tools_for("AccountAgent"))
            call = first.choices[0].message.tool_calls[0]
            result = lookup_customer(**json.loads(call.function.arguments))
            messages += [first.choices[0].message.model_dump(exclude_none=True),
                         {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}]
            return client.chat.completions.create(model="bank-agent", messages=messages).choices[0].message.content


    if __name__ == "__main__":
        print(answer("AccountAgent: look up customer Alice Chen and get her accounts."))
''')


def test_tools_without_the_decorator_make_a_session_replayable_with_live_tools_only(tmp_path):
    with script_session(tmp_path, UNDECORATED_TOOL_APP) as (url, app_dir, env, summary):
        sid = summary["session_id"]
        # the list carries the app's mark under its own name: no `replayable` there says yes while a replay refuses
        assert summary["marked_replayable"] is True and "replayable" not in summary, summary
        assert HttpAccess(url).get_session(sid)["replayable"] is False
        shown = subprocess.run([sys.executable, "-m", "tracefix.cli", "show", sid, "--server", url],
                               capture_output=True, text=True, timeout=60, env=env)
        assert "replayable with live tools only: lookup_customer" in shown.stdout, shown.stdout + shown.stderr
        with urllib.request.urlopen(f"{url}/api/v1/sessions/{sid}/report?format=md", timeout=120) as resp:
            assert "with live tools only: lookup" in resp.read().decode()  # the facts table (markdown-escaped)

        replay = [sys.executable, "-m", "tracefix.cli", "replay", sid, "--server", url, "--allow-module", "app",
                  "--step", "1", "--runs", "1", "--json"]
        refused = subprocess.run(replay, cwd=app_dir, env=env, capture_output=True, text=True, timeout=120)
        assert refused.returncode != 0 and "live tools only: lookup_customer" in refused.stderr
        assert "--allow-live-tools" in refused.stderr
        allowed = subprocess.run([*replay, "--allow-live-tools"], cwd=app_dir, env=env, capture_output=True,
                                 text=True, timeout=180)
        assert allowed.returncode == 0, allowed.stdout[-2000:] + allowed.stderr[-2000:]
        assert json.loads(allowed.stdout)["hypotheses"][0]["runs"][0]["error"] is None


SPAWNING_APP = textwrap.dedent('''
    import subprocess

    import openai
    import tracefix

    tracefix.init(service_name="script-agent")


    @tracefix.session
    def answer(question: str, pid_file: str = "") -> str:
        if pid_file:  # a helper process the agent starts and would leave behind
            helper = subprocess.Popen(["sleep", "300"])
            with open(pid_file, "w") as f:
                f.write(str(helper.pid))
        reply = openai.OpenAI(max_retries=0, timeout=600).chat.completions.create(
            model="bank-agent", messages=[{"role": "user", "content": question}])
        return reply.choices[0].message.content


    if __name__ == "__main__":
        print(answer("AccountAgent: look up customer Alice Chen."))
''')


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "zombie" not in next(line for line in f if line.startswith("State:"))
    except (FileNotFoundError, StopIteration):
        return False


def test_a_replay_that_times_out_is_killed_with_everything_it_started(tmp_path):
    import socket

    with script_session(tmp_path, SPAWNING_APP) as (url, app_dir, env, summary):
        silent = socket.socket()  # an LLM endpoint that accepts and never answers: the replay hangs live
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        pid_file = tmp_path / "helper.pid"
        try:
            out = subprocess.run([sys.executable, "-m", "tracefix.cli", "replay", summary["session_id"], "--server",
                                  url, "--allow-module", "app", "--step", "0", "--runs", "1", "--timeout", "8",
                                  "--input", f"pid_file={pid_file}", "--json"], cwd=app_dir,
                                 env={**env, "OPENAI_BASE_URL": f"http://127.0.0.1:{silent.getsockname()[1]}/v1"},
                                 capture_output=True, text=True, timeout=120)
        finally:
            silent.close()
        assert "killed after its 8s timeout" in out.stdout + out.stderr, out.stdout[-2000:] + out.stderr[-2000:]
        pid = int(pid_file.read_text())
        assert not _alive(pid), "the agent's helper process outlived the killed replay"
