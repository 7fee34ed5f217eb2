"""The optional LLM analyst (AgentTether section III-C3): given the failed run's outcome and
the compact evidence packets of the top hypotheses, it confirms the turning point, states
the root cause and gives recovery hints. It uses the product's LLM client
(`tracefix.analysis.llm.ProductLLM`, TRACEFIX_LLM_*); without one, or when the reply is
unusable, the detectors' ranking stands and the result says so.
"""
from __future__ import annotations

import json
from typing import Any

# First line names the stage, the convention of the product's prompts (tracefix.replay.prompts),
# so a scripted stand-in model can tell the stages apart.
SYSTEM = (
    "tracefix-stage: analysis\n"
    "You are a failure analyst for multi-agent LLM systems. You get the task, how the run "
    "ended, and evidence packets for candidate steps flagged by anomaly detectors. Each packet "
    "shows one-line summaries of the candidate step, its neighbours and the dependency path "
    "from the symptom back to it. Root causes usually come before the symptom: find the "
    "turning point, the first step after which the run could no longer succeed. Answer with "
    "one JSON object: {\"turning_point\": <step number from the packets>, \"root_cause\": "
    "\"one sentence\", \"recovery_hints\": [\"short hint\", ...]}."
)


def analyst_from_env() -> Any:
    """The configured product LLM, or None (no endpoint, or the replay extra is missing)."""
    try:
        from tracefix.analysis.llm import ProductLLM
    except ImportError:
        return None
    return ProductLLM.from_env()


def confirm_turning_point(llm: Any, task: str | None, outcome: dict, packets: list[dict]) -> dict:
    """Ask the analyst; returns {"turning_point", "root_cause", "recovery_hints"}. Raises the
    client's error (or ValueError) when the answer cannot be used."""
    user = json.dumps({"task": task, "outcome": outcome, "candidates": packets}, default=str, indent=1)
    answer = llm.complete_json("analysis", SYSTEM, user)
    allowed = {p["step"] for p in packets} | {s for p in packets for s in p.get("path", [])}
    try:
        step = int(answer.get("turning_point"))
    except (TypeError, ValueError):
        raise ValueError(f"analyst gave no usable turning_point: {answer!r:.200}") from None
    if step not in allowed:
        raise ValueError(f"analyst chose step {step}, which is not in the evidence packets")
    hints = answer.get("recovery_hints") or []
    return {"turning_point": step, "root_cause": str(answer.get("root_cause") or "")[:500],
            "recovery_hints": [str(h)[:300] for h in (hints if isinstance(hints, list) else [hints])][:5]}
