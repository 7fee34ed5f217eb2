"""The product's own intervention states the corrective action from the session's evidence
(issue 36 item 3): on failed sessions the instrumented banking app recorded against the
scripted LLM server (real processes, real collector), the template names the tool to call,
the argument, the right value and the step of the session that states it, and that step
really says it. The right value is checked against the fault injector's ground truth, which
the product never reads."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import procs
import pytest

from tracefix.replay import interventions
from tracefix.replay.cassette import tool_definitions
from tracefix.replay.intervention_evidence import output_text

# one fault per task, each corrected by a different kind of action: the orchestrator's
# instruction with a wrong account (the right one is in a worker's report), a worker that says
# the transfer is done without calling it (the values are in its instruction), and a call with
# a wrong account (the right one is in its instruction)
FAULT_PLAN = [{"task": "t05", "step": 0, "kind": "wrong_instruction"},
              {"task": "t03", "step": 0, "kind": "skipped_action"},
              {"task": "t08", "step": 0, "kind": "wrong_argument"}]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    from tracefix.collector.access import connect

    d = tmp_path_factory.mktemp("intervention-evidence")
    plan, truth = d / "plan.json", d / "truth.jsonl"
    plan.write_text(json.dumps(FAULT_PLAN))
    started = []
    try:
        sim = procs.start_sim("--seed", "1", "--faults", str(plan), "--ground-truth", str(truth))
        started.append(sim)
        serve = procs.start_serve(d / "store.duckdb", "--diagnose", "off")
        started.append(serve)
        subprocess.run([sys.executable, "-m", "tracefix.cli", "demo-run", "--base-url", sim.match["base_url"],
                        "--tasks", ",".join(f["task"] for f in FAULT_PLAN), "--otlp-endpoint", serve.match["http"]],
                       check=True, timeout=120, capture_output=True, env=dict(os.environ))
        faults = {}
        for line in truth.read_text().splitlines():
            fault = json.loads(line)
            faults.setdefault(fault["kind"], fault)
        with connect(server=serve.match["http"]) as access:
            yield {kind: (fault, access.get_session(fault["session"]), access.get_spans(fault["session"]))
                   for kind, fault in faults.items()}
    finally:
        for p in reversed(started):
            p.stop()


def fix_of(recorded, kind: str) -> tuple[dict, dict, dict]:
    fault, doc, spans = recorded[kind]
    definitions = tool_definitions(doc, spans)
    iv = interventions.template(doc, {"id": "h", "step": fault["step"], "agent": None, "evidence": {}},
                                definitions.get(fault["step"]), session_definitions=definitions)
    return fault, doc, iv


def said_at(doc: dict, text: str) -> int:
    """The step the intervention names as the source ("... at step N ...")."""
    found = re.search(r"\bat step (\d+)\b", text)
    assert found, f"no source step in: {text}"
    return int(found.group(1))


def test_a_call_with_a_wrong_value_is_fixed_by_the_call_with_the_value_its_instruction_gives(recorded):
    fault, doc, iv = fix_of(recorded, "wrong_argument")
    tool, argument, wrong, right = re.match(r"(\w+) called with (\w+)=(\S+) instead of (\S+)", fault["detail"]).groups()
    assert iv["text"].startswith(f"Call `{tool}` again with {argument} = {right}, as the instruction you were given "
                                 f"at step "), iv["text"]
    assert right in output_text(doc["steps"][said_at(doc, iv["text"])])
    assert f"{argument} was {wrong}, which is wrong" in iv["text"]
    assert iv["expect"] == {"agent": fault["agent"], "action": "call_tool", "tool": tool, "argument": argument}


def test_a_skipped_call_is_fixed_by_the_call_with_every_value_its_instruction_gives(recorded):
    fault, doc, iv = fix_of(recorded, "skipped_action")
    tool = re.search(r"reported (\w+) as done", fault["detail"]).group(1)
    source = doc["steps"][said_at(doc, iv["text"])]
    instruction = output_text(source)
    accounts = re.findall(r"ACC-\d+", instruction)
    amount = re.search(r"\$([\d.]+)", instruction).group(1)
    assert len(accounts) == 2, instruction
    assert iv["text"].startswith(f"Call `{tool}` now with amount = {amount}, from_account = {accounts[0]} and "
                                 f"to_account = {accounts[1]}, as the instruction you were given at step {source['index']}"
                                 " gives them"), iv["text"]
    assert source["agent"] != fault["agent"]  # the orchestrator wrote it, the worker skipped it


def test_a_wrong_instruction_is_fixed_by_the_instruction_with_the_value_a_report_gives(recorded):
    fault, doc, iv = fix_of(recorded, "wrong_instruction")
    worker, wrong, right, tool = re.search(r"instructed (\w+) to use (\S+) instead of (\S+) for (\w+)",
                                           fault["detail"]).groups()
    assert iv["text"].startswith(f"Instruct {worker} to call `{tool}` with "), iv["text"]
    assert re.search(rf"\b\w+ = {right}\b", iv["text"].split(".")[0]), iv["text"]
    source = doc["steps"][said_at(doc, iv["text"])]
    assert source["index"] < fault["step"] and right in json.dumps(source, default=str)
    assert wrong not in iv["text"].split(".")[0]  # the wrong value is never what it asks for
    assert iv["expect"]["action"] == "instruct" and iv["expect"]["tool"] == tool
