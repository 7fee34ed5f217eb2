"""Rewrites of what the agents and tools say around an action (bench/perturb.py `chatter`,
`reworded_refusals`); their words are written here, from templates of everyday speech, never
from the analysis' word lists (a benchmark helper, not product):

- `chatter`: a worker handed a request first answers with a harmless acknowledgement ("Sure,
  one moment.") and then acts, as chat models often do: one step is added before each action
  that follows a hand-over. The added step stands for no recorded step (`original_steps`
  maps it to -1), so blaming it is a miss;
- `reworded_refusals`: every tool that said no (raised, answered an error or a refusal) says
  so politely instead, with no error word, no failure flag and no exception type ("We are not
  in a position to refund ord_7f3a2 at the moment."); wherever the session repeats the tool's
  words (an agent quoting them) they change alike. Only what the refusal leads to is left to
  read: no record came back, nothing changed, the same request was made again.
"""
from __future__ import annotations

import copy
import json
import re
from typing import Any

from perturb_base import json_or_none, map_strings, ordered, session_rng
from perturb_retries import _added, _reindexed, _STANDS_FOR

ACKNOWLEDGEMENTS = ("Sure, one moment.", "On it.", "Got it, give me a second.", "Okay, looking into that now.",
                    "Right away.", "Happy to help with that.", "Understood, working on it.")

REFUSALS = ("We are not in a position to {act} {thing} at the moment.",
            "{Act} {thing} will have to wait for now.",
            "Thanks for asking; {act} {thing} is something we will leave for another day.",
            "Let's hold off on that: {act} {thing} stays as it is for now.",
            "That request to {act} {thing} has been noted and set aside.")


ABOUT = ("This concerns {values}.", "For reference: {values}.", "(Regarding {values}.)")

# The ids and amounts a tool's words name (a token with a digit in it).
_VALUE = re.compile(r"(?<![\w:#-])[#\w:-]*\d[\w:-]*(?:\.\d+)?(?![\w-])")


def chatter(doc: dict, seed: int) -> dict:
    doc = copy.deepcopy(doc)
    rng = session_rng(doc, seed, "chatter")
    recorded = ordered(doc)
    steps = []
    for k, step in enumerate(recorded):
        before = recorded[k - 1] if k else None
        handed = (before is not None and before.get("agent") != step.get("agent") and not before.get("tool_calls")
                  and (before.get("output_message") or {}).get("content"))
        if handed and step.get("tool_calls"):
            said = {"role": "assistant", "content": rng.choice(ACKNOWLEDGEMENTS)}
            ack = _added(step, "chatter")
            _STANDS_FOR[ack["span_id"]] = None  # stands for no recorded step
            ack.update(tool_calls=[], finish_reason="stop", output_message=said)
            step["input_messages"] = [*(step.get("input_messages") or []), said]
            steps.append(ack)
        steps.append(step)
    return _reindexed(doc, steps)


def _refusal_of(call: dict) -> str | None:
    """The tool's own words of refusal, when it said no: its error, or a result that is one."""
    if call.get("error"):
        return str(call["error"])
    result = call.get("result")
    if isinstance(result, dict) and (result.get("ok") is False or set(result) == {"error"}):
        return json.dumps(result, sort_keys=True)
    if isinstance(result, str) and result.lower().startswith("unable to"):  # the demo till's way to say no
        return result
    return None


def _thing(arguments: Any) -> str:
    values = [v for v in (json_or_none(arguments) if isinstance(arguments, str) else arguments or {}).values()
              if isinstance(v, str)] if isinstance(arguments, (dict, str)) else []
    return f"for {values[0]}" if values else "this"


def reworded_refusals(doc: dict, seed: int) -> dict:
    doc = copy.deepcopy(doc)
    rng = session_rng(doc, seed, "reworded_refusals")
    polite: dict[str, str] = {}  # each way the session spells a refusal -> the polite words
    for step in ordered(doc):
        for call in step.get("tool_calls") or []:
            words = _refusal_of(call)
            if words is None:
                continue
            if words not in polite:
                act = (call.get("name") or "do").replace("_", " ")
                thing = _thing(call.get("arguments"))
                said = rng.choice(REFUSALS).format(act=act, Act=act.capitalize(), thing=thing)
                named = [v for v in dict.fromkeys(_VALUE.findall(words)) if v not in thing]
                if named:  # what the tool's words were about stays said, as a person would say it
                    said += " " + rng.choice(ABOUT).format(values=", ".join(named))
                for spelling in _spellings(words):
                    polite.setdefault(spelling, said)
            call["result"], call["error"] = polite[words], None
    for step in ordered(doc):  # a refusal object, as a later prompt carries it, becomes the words
        for message in step.get("input_messages") or []:
            parsed = json_or_none(message.get("content")) if message.get("role") == "tool" else None
            if isinstance(parsed, dict) and json.dumps(parsed, sort_keys=True) in polite:
                message["content"] = polite[json.dumps(parsed, sort_keys=True)]
    text = {w: p for w, p in polite.items() if not isinstance(json_or_none(w), dict)}
    if not text:
        return doc
    pattern = re.compile("|".join(re.escape(w) for w in sorted(text, key=len, reverse=True)))
    return map_strings(doc, lambda s: pattern.sub(lambda m: text[m.group(0)], s))


def _spellings(words: str) -> list[str]:
    """How a refusal may be repeated: as given, without its exception type, a refusal object's
    reason or error alone, and the object as JSON text."""
    parsed = json_or_none(words)
    if isinstance(parsed, dict):
        inner = [str(parsed[k]) for k in ("reason", "error") if parsed.get(k)]
        return [words, *inner, *(json.dumps({"error": i}) for i in inner)]
    bare = words.split(": ", 1)[1] if ": " in words and words.split(": ", 1)[0].isidentifier() else None
    return [words, *([bare, json.dumps({"error": bare}, sort_keys=True)] if bare and len(bare) > 12 else []),
            json.dumps({"error": words}, sort_keys=True)]
