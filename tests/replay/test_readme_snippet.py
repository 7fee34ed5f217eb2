"""The README's "Trace your own agent" snippet, copied as a new user would into app.py and run
as `python app.py` against `tracefix sim` and `tracefix serve`, ends in a replay with a verdict."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from test_script_entrypoints import script_session

README = Path(__file__).resolve().parents[2] / "README.md"
VERDICTS = {"validated", "partially_validated", "refuted", "inconclusive", "error"}


def readme_snippet() -> str:
    section = README.read_text(encoding="utf-8").split("## Trace your own agent", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_snippet_run_as_a_script_replays_to_a_verdict(tmp_path):
    source = readme_snippet()
    assert "@tracefix.session" in source and "tracefix.init(" in source
    app = source + '\n\nif __name__ == "__main__":\n    print(answer("Where is my order 1042?"))\n'
    # As the README says to try it: the sim answers the snippet's model name with plan-agent.
    with script_session(tmp_path, app, "--default-model", "plan-agent") as (url, app_dir, env, summary):
        assert summary["entrypoint"] == "app:answer" and summary["replayable"], summary
        out = subprocess.run([sys.executable, "-m", "tracefix.cli", "replay", summary["session_id"], "--server", url,
                              "--allow-module", "app", "--step", "0", "--edit",
                              "Look the order up with lookup_order before you answer.", "--json"],
                             cwd=app_dir, env=env, capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
        [tested] = json.loads(out.stdout)["hypotheses"]
        assert tested["verdict"] in VERDICTS - {"error"}, tested
        assert len(tested["runs"]) == 3 and all(run["error"] is None for run in tested["runs"]), tested["runs"]
