"""Rewrites of how a session names and words things (bench/perturb.py): agents and tools
renamed or made one agent, tool errors as plain text, ids spelled otherwise (no separator,
colons, capitals, Markdown code), reports without failure words, grouped numbers, stamped
messages, narrated calls, a task's clauses joined. Same steps, same calls, same values (a
benchmark helper, not product).
"""
from __future__ import annotations

import copy
import re
import zlib
from typing import Any

from perturb_base import json_or_none, map_agent_words, map_strings, replace_words, session_rng


# Neutral names: none says "planner", "lead", "router" or what the agent does.
_NAMES = ("Kestrel", "Juniper", "Quartz", "Marlow", "Tansy", "Osric", "Wren", "Halcyon", "Basalt",
          "Indigo", "Sorrel", "Vesper", "Alder", "Corvid", "Fennel", "Larkspur")


_TOOL_WORDS = ("zephyr", "marble", "pylon", "cobalt", "thistle", "lantern", "orchid", "saffron",
               "granite", "meadow", "quill", "tundra", "ember", "harbor", "nimbus", "oriel")


def rename_agents(doc: dict, seed: int) -> dict:
    agents = sorted({s.get("agent") for s in doc.get("steps") or [] if s.get("agent")} | set(doc.get("agents") or []))
    names = session_rng(doc, seed, "agents").sample(_NAMES, len(agents))
    mapping = dict(zip(agents, names))
    doc = map_strings(doc, replace_words(mapping))
    return doc


def single_agent(doc: dict, seed: int) -> dict:
    """Every agent's name becomes one: a single agent that writes itself a plan and each
    instruction, acts on it and reports (the commonest shape of an app), with the same steps
    and the same faults. Nothing is left of a team's structure: no coordinator, no hand-over
    between agents."""
    agents = sorted({s.get("agent") for s in doc.get("steps") or [] if s.get("agent")} | set(doc.get("agents") or []))
    name = session_rng(doc, seed, "single_agent").choice(_NAMES)
    doc = map_strings(doc, replace_words(dict.fromkeys(agents, name)))
    if doc.get("agents"):
        doc["agents"] = [name]
    return doc


def _tool_names(doc: dict) -> set[str]:
    names = set()
    for step in doc.get("steps") or []:
        names |= {tc.get("name") for tc in step.get("tool_calls") or []}
        for msg in [step.get("output_message") or {}] + list(step.get("input_messages") or []):
            names |= {(tc.get("function") or {}).get("name") for tc in msg.get("tool_calls") or []}
    return {n for n in names if n}


def rename_tools(doc: dict, seed: int) -> dict:
    """Tools renamed to neutral words, wherever a name is spelled out (call records, the
    assistant's tool calls, prompts); a one-word name inside prose stays (it is English)."""
    names = sorted(_tool_names(doc))
    rng = session_rng(doc, seed, "tools")
    mapping = dict(zip(names, (f"{w}_{rng.randrange(10, 99)}" for w in rng.sample(_TOOL_WORDS, len(names)))))
    prose = replace_words({k: v for k, v in mapping.items() if "_" in k})

    def rename_calls(msg: dict) -> None:
        for tc in msg.get("tool_calls") or []:
            fn = tc.get("function")
            if isinstance(fn, dict) and fn.get("name") in mapping:
                fn["name"] = mapping[fn["name"]]
            if tc.get("name") in mapping:
                tc["name"] = mapping[tc["name"]]

    doc = map_strings(doc, prose)
    for step in doc.get("steps") or []:
        rename_calls(step)
        for msg in [step.get("output_message") or {}] + list(step.get("input_messages") or []):
            rename_calls(msg)
        for tool in step.get("tools") or []:
            fn = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(fn, dict) and fn.get("name") in mapping:
                fn["name"] = mapping[fn["name"]]
    return doc


_EXCEPTION_PREFIX = re.compile(r"^\s*[A-Za-z_.]*(?:Error|Exception|[A-Z][a-z]+[A-Z]\w*)\s*:\s*")


def _plain(error: str) -> str:
    return _EXCEPTION_PREFIX.sub("", str(error), count=1)


def plain_errors(doc: dict, seed: int) -> dict:
    """A failing tool returns its message as an ordinary string result: no error field, no
    exception type, no {"error": ...} wrapper in the next prompt."""
    doc = copy.deepcopy(doc)
    for step in doc.get("steps") or []:
        for tc in step.get("tool_calls") or []:
            if tc.get("error"):
                tc["result"], tc["error"] = _plain(tc["error"]), None
            elif isinstance(tc.get("result"), dict) and set(tc["result"]) == {"error"}:
                tc["result"] = _plain(tc["result"]["error"])
        for msg in step.get("input_messages") or []:
            if msg.get("role") == "tool" and isinstance(msg.get("content"), str):
                parsed = json_or_none(msg["content"])
                if isinstance(parsed, dict) and set(parsed) == {"error"}:
                    msg["content"] = _plain(parsed["error"])
    return doc


# Any id, separated or not (ACC-1007, ord_7f3a2, sku:88-b, acc1007): what upper_ids capitalizes.
_ID_TOKEN = re.compile(r"(?<![\w:-])(?=[\w:-]*[A-Za-z])(?=[\w:-]*\d)[A-Za-z0-9]+(?:[-_:][A-Za-z0-9]+)*(?![\w-])")


# Any token of letter/digit runs joined by '-' or '_' that has a letter and a digit:
# ACC-1007, CHK_2201, inv-2024-07-a1. Dates (no letter) and snake_case names (no digit) stay.
_SEPARATED_ID = re.compile(r"(?<![\w-])(?=[\w-]*[A-Za-z])(?=[\w-]*\d)[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+(?![\w-])")


def squash_ids(doc: dict, seed: int) -> dict:
    return map_strings(doc, lambda s: _SEPARATED_ID.sub(lambda m: re.sub(r"[-_]", "", m.group(0)).lower(), s))


def colon_ids(doc: dict, seed: int) -> dict:
    """Ids namespaced with colons, as many stores write them (`ACC-1007` -> `acc:1007`)."""
    return map_strings(doc, lambda s: _SEPARATED_ID.sub(lambda m: re.sub(r"[-_]", ":", m.group(0)).lower(), s))


_PARAPHRASES = [
    (r"\bFAILED\b\.?", "Outcome: incomplete."),
    (r"\bfailed twice\b", "went wrong twice"),
    (r"\bfailed\b", "went wrong"),
    (r"\bfailures?\b", "setback"),
    (r"\bfail\b", "go wrong"),
    (r"\bcould not\b", "did not manage to"),
    (r"\bcouldn't\b", "didn't manage to"),
    (r"\bcannot\b|\bcan't\b", "am not able to"),
    (r"\bunable to\b", "not able to"),
    (r"\berrors\b", "problems"),
    (r"\berror\b", "problem"),
    (r"\bnot found\b", "missing"),
    (r"\binvalid\b", "unusable"),
]


_PARAPHRASE = [(re.compile(p, re.I), r) for p, r in _PARAPHRASES]


def _paraphrase(text: str) -> str:
    if isinstance(json_or_none(text), (dict, list)):
        return text  # a tool's JSON output is the tool's wording, not the agent's
    for pattern, repl in _PARAPHRASE:
        text = pattern.sub(repl, text)
    return text


def paraphrase_reports(doc: dict, seed: int) -> dict:
    """Agents' messages (reports, plans, answers) reworded without failure words; tool
    errors keep their own text (that is rewrite (b)'s business)."""
    doc = copy.deepcopy(doc)
    for step in doc.get("steps") or []:
        errors = [(tc, tc.get("error"), tc.get("result")) for tc in step.get("tool_calls") or []]
        step.update(map_strings({k: v for k, v in step.items() if k not in ("tool_calls",)}, _paraphrase))
        for tc, error, result in errors:  # a delegation's result is the worker's report
            if isinstance(result, str):
                tc["result"] = _paraphrase(result)
    for key in ("output", "task"):
        if doc.get(key) is not None:
            doc[key] = map_strings(doc[key], _paraphrase)
    return doc


# Whole numbers of four digits or more in an agent's own words, not inside an id or a date.
_LONG_NUMBER = re.compile(r"(?<![\w.:,-])(\d{4,})(\.\d+)?(?![\w:-]|[.,]\d)")


def _grouped(text: str) -> str:
    if isinstance(json_or_none(text), (dict, list)):
        return text  # a tool's JSON output keeps the tool's own number format
    return _LONG_NUMBER.sub(lambda m: f"{int(m.group(1)):,}" + (m.group(2) or ""), text)


def group_numbers(doc: dict, seed: int) -> dict:
    """Agents write amounts with thousands separators (1500 -> 1,500) as people do, while the
    tools' results keep the raw number: the same value, spelled two ways."""
    return map_agent_words(doc, _grouped)


def _upper_ids(text: str) -> str:
    if isinstance(json_or_none(text), (dict, list)):
        return text  # a tool's JSON output keeps the tool's own spelling
    return _ID_TOKEN.sub(lambda m: m.group(0).upper(), text)


def upper_case_ids(doc: dict, seed: int) -> dict:
    """Agents write ids in capitals in their own words (`ord_7f3a2` -> `ORD_7F3A2`) while tools
    and call arguments keep the store's spelling: the same id, written two ways."""
    return map_agent_words(doc, _upper_ids)


def _stamped(text: str) -> str:
    if not text.strip() or isinstance(json_or_none(text), (dict, list)):
        return text
    tick = zlib.crc32(text.encode()) % 3600  # the same message gets the same stamp wherever it is quoted
    return f"[2026-03-14 09:{tick // 60:02d}:{tick % 60:02d}] {text}"


def timestamps(doc: dict, seed: int) -> dict:
    """Agents' messages open with the time they were written ("[2026-03-14 09:21:05] ..."),
    as chat logs and many agent frameworks print them: a clock reading in every message,
    which no input showed and no later step uses."""
    return map_agent_words(doc, _stamped)


def _code_ids(text: str) -> str:
    if isinstance(json_or_none(text), (dict, list)):
        return text
    return _ID_TOKEN.sub(lambda m: f"`{m.group(0)}`", text)


def markdown_ids(doc: dict, seed: int) -> dict:
    """Agents write ids as Markdown code (`acc-1007` -> `` `acc-1007` ``), as chat models do."""
    return map_agent_words(doc, _code_ids)


_NARRATIONS = ("Let me check with {tool}.", "I'll use {tool} for this.", "Calling {tool} now.",
               "One moment, looking this up with {tool}.")


def narrate_calls(doc: dict, seed: int) -> dict:
    """A step that calls tools also says so in words ("Let me check with order_details."), as
    models usually do beside their tool calls; the words carry no value the call does not."""
    doc = copy.deepcopy(doc)
    rng = session_rng(doc, seed, "narrate")
    for step in doc.get("steps") or []:
        msg = step.get("output_message")
        calls = step.get("tool_calls") or []
        if calls and isinstance(msg, dict) and not (msg.get("content") or "").strip():
            msg["content"] = rng.choice(_NARRATIONS).format(tool=calls[0].get("name") or "a tool")
    return doc


_CLAUSE_BREAK = re.compile(r",\s+(and\s+)?then\s+|;\s+|,\s+(and)\s+|\.\s+Then\s+")


def _joined(text: str) -> str:
    return _CLAUSE_BREAK.sub(lambda m: " and " if m.group(2) else " and then ", text)


def joined_clauses(doc: dict, seed: int) -> dict:
    """The user writes a task's parts joined by "and then", without commas ("deposit the check
    into his checking and then move $500 to his savings"): the task text and every prompt
    that quotes it."""
    doc = copy.deepcopy(doc)
    done: set[int] = set()
    for step in doc.get("steps") or []:
        for msg in step.get("input_messages") or []:
            if msg.get("role") == "user" and isinstance(msg.get("content"), str) and id(msg) not in done:
                msg["content"] = _joined(msg["content"])
                done.add(id(msg))
    if isinstance(doc.get("task"), str):
        doc["task"] = _joined(doc["task"])
    if isinstance(doc.get("inputs"), dict):
        doc["inputs"] = {k: _joined(v) if isinstance(v, str) else v for k, v in doc["inputs"].items()}
    return doc
