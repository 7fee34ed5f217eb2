"""Presentation rewrites of recorded session documents, for the localization robustness suite.

Each rewrite changes how a session *looks* (agent names, tool names, id spelling, how a
tool reports failure, how a worker words its report, how results are laid out) and never
what happened: same steps, same calls, same order, so the labelled step stays the truth.
A rewrite is applied to a whole document consistently (messages, tool calls and their
arguments and results, input prompts, agent names, task), after recording and before
analysis, as if a different app had logged the same run.

Two rewrites, `retries` and `reported_retries`, add steps instead: the noise of production,
where a call now and then times out or is rate-limited and the agent makes it again, at
once or after reporting it and being handed the request again. The faults and the outcome
stay the same; `original_steps` maps each step of the rewritten session back to the step it
stands for, so the labelled step and the predictions compare as before.

    from perturb import REWRITES, perturb
    doc2 = perturb(doc, ["agents", "ids"], seed=1)

Used by bench/localization.py --perturb (a benchmark helper, not product).
"""
from __future__ import annotations

import copy
import hashlib
import json
import random
import re
import zlib
from typing import Any, Callable

# Fields that identify or time a record rather than present its content: never rewritten.
_IDENTITY_KEYS = {"session_id", "span_id", "parent_session_id", "intervention_id", "started_at",
                  "ended_at", "created_at", "tool_call_id", "id", "model", "models", "service",
                  "entrypoint", "snapshots", "replay_source"}
# Neutral names: none says "planner", "lead", "router" or what the agent does.
_NAMES = ("Kestrel", "Juniper", "Quartz", "Marlow", "Tansy", "Osric", "Wren", "Halcyon", "Basalt",
          "Indigo", "Sorrel", "Vesper", "Alder", "Corvid", "Fennel", "Larkspur")
_TOOL_WORDS = ("zephyr", "marble", "pylon", "cobalt", "thistle", "lantern", "orchid", "saffron",
               "granite", "meadow", "quill", "tundra", "ember", "harbor", "nimbus", "oriel")


def _map_strings(obj: Any, fn: Callable[[str], str], key: str | None = None) -> Any:
    """`obj` with every string value (not dict keys, not identity fields) passed through fn."""
    if key in _IDENTITY_KEYS:
        return obj
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_strings(v, fn, k) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map_strings(v, fn, key) for v in obj]
    return obj


def _session_rng(doc: dict, seed: int, salt: str) -> random.Random:
    """A rewrite's random choices for one session, drawn from what the session says, not from
    its ids: a seed's demo sessions come out the same in every recording, and so do the
    rewrites of them, so a bench figure is the same run after run."""
    digest = hashlib.sha256(f"{seed}:{salt}:{_content_key(doc)}".encode()).hexdigest()
    return random.Random(int(digest[:16], 16))


def _content_key(doc: dict) -> str:
    """The session's task, and each step's agent, output and tool calls, without ids or times."""
    steps = [[s.get("agent"), s.get("output_message"),
              [[t.get("name"), t.get("arguments"), t.get("result"), t.get("error")] for t in s.get("tool_calls") or []]]
             for s in doc.get("steps") or []]
    return json.dumps([doc.get("task"), steps], sort_keys=True, default=str)


def _replace_words(mapping: dict[str, str]) -> Callable[[str], str]:
    if not mapping:
        return lambda s: s
    pattern = re.compile(r"(?<![A-Za-z0-9])(" + "|".join(re.escape(k) for k in
                                                          sorted(mapping, key=len, reverse=True)) + r")(?![A-Za-z0-9])")
    return lambda s: pattern.sub(lambda m: mapping[m.group(1)], s)


# --- (a) agents renamed -----------------------------------------------------------------

def rename_agents(doc: dict, seed: int) -> dict:
    agents = sorted({s.get("agent") for s in doc.get("steps") or [] if s.get("agent")} | set(doc.get("agents") or []))
    names = _session_rng(doc, seed, "agents").sample(_NAMES, len(agents))
    mapping = dict(zip(agents, names))
    doc = _map_strings(doc, _replace_words(mapping))
    return doc


# --- one agent does it all ------------------------------------------------------------------

def single_agent(doc: dict, seed: int) -> dict:
    """Every agent's name becomes one: a single agent that writes itself a plan and each
    instruction, acts on it and reports (the commonest shape of an app), with the same steps
    and the same faults. Nothing is left of a team's structure: no coordinator, no hand-over
    between agents."""
    agents = sorted({s.get("agent") for s in doc.get("steps") or [] if s.get("agent")} | set(doc.get("agents") or []))
    name = _session_rng(doc, seed, "single_agent").choice(_NAMES)
    doc = _map_strings(doc, _replace_words(dict.fromkeys(agents, name)))
    if doc.get("agents"):
        doc["agents"] = [name]
    return doc


# --- transient failures, retried (adds steps) ------------------------------------------------

_TRANSIENT_ERRORS = ("TimeoutError: no answer within 30 s", "ServiceUnavailable: 503, try again later",
                     "ConnectionResetError: connection reset by peer",
                     "RateLimited: 429 Too Many Requests, retry after 1 s")
_RETRIED_SHARE = 0.3
# An added step's span id -> the span id of the recorded step it stands for (original_steps).
_STANDS_FOR: dict[str, str] = {}


def _new_id(value: Any) -> str:
    return hashlib.sha256(f"retry:{value}".encode()).hexdigest()[:16]


def _added(step: dict, role: str, stands_for: dict | None = None) -> dict:
    """A copy of `step` with ids of its own, to be put into the session as a new step that
    stands for `stands_for` (default: `step`) when predictions are scored."""
    new = copy.deepcopy(step)
    new["span_id"] = _new_id(f"{role}:{step.get('span_id')}")
    _STANDS_FOR[new["span_id"]] = (stands_for or step).get("span_id")
    return new


def _failed_attempt(step: dict, error: str) -> dict:
    """`step`'s calls, the same arguments, failing with `error`: the attempt before a retry."""
    attempt = _added(step, "attempt")
    renamed = {}
    for call in attempt["tool_calls"]:
        renamed[call.get("id")] = _new_id(call.get("id"))
        call.update(result=None, error=error, id=renamed[call.get("id")], span_id=_new_id(call.get("span_id")))
    for call in (attempt.get("output_message") or {}).get("tool_calls") or []:
        call["id"] = renamed.get(call.get("id"), call.get("id"))
    return attempt


def _reindexed(doc: dict, steps: list[dict]) -> dict:
    for k, step in enumerate(steps):
        step["index"] = k
    doc["steps"] = steps
    return doc


def _ordered(doc: dict) -> list[dict]:
    return sorted(doc.get("steps") or [], key=lambda s: s.get("index", 0))


def transient_retries(doc: dict, seed: int) -> dict:
    """About a third of the steps whose calls all worked were, in this telling, tried once
    before and failed with a transient error (a timeout, a 503, a reset connection, a rate
    limit): a failed attempt, the same calls with the same arguments, is put right before
    each of them, as the agent's retry loop would have logged it. Nothing else changes."""
    doc = copy.deepcopy(doc)
    rng = _session_rng(doc, seed, "retries")
    steps = []
    for step in _ordered(doc):
        calls = step.get("tool_calls") or []
        if calls and all(c.get("error") is None for c in calls) and rng.random() < _RETRIED_SHARE:
            steps.append(_failed_attempt(step, rng.choice(_TRANSIENT_ERRORS)))
        steps.append(step)
    return _reindexed(doc, steps)


def reported_retries(doc: dict, seed: int) -> dict:
    """The same transient failures one turn later: about a third of the first calls made
    right after a hand-over from another agent failed, the agent replied with the error as
    it got it, the hand-over was said again word for word, and then the calls worked as
    recorded. Three steps are added before each such call (the attempt, the reply, the
    hand-over again); the reply's input holds the failed call and its error, as an
    instrumented model's input would."""
    return _handed_again(doc, seed, "reported_retries", to_another=False)


def rerouted_retries(doc: dict, seed: int) -> dict:
    """As `reported_retries`, but the failed attempt and the reply come from a second
    instance of the worker (a pool of like agents, "<name>-2"): the request is then handed
    again and the recorded agent makes the calls. The session's agent list gains the
    second instances."""
    return _handed_again(doc, seed, "rerouted_retries", to_another=True)


def _handed_again(doc: dict, seed: int, name: str, to_another: bool) -> dict:
    doc = copy.deepcopy(doc)
    rng = _session_rng(doc, seed, name)
    recorded = _ordered(doc)
    steps = []
    for k, step in enumerate(recorded):
        calls = step.get("tool_calls") or []
        handover = recorded[k - 1] if k else None
        handed = (handover is not None and handover.get("agent") != step.get("agent")
                  and not handover.get("tool_calls") and (handover.get("output_message") or {}).get("content"))
        if calls and handed and all(c.get("error") is None for c in calls) and rng.random() < _RETRIED_SHARE:
            error = rng.choice(_TRANSIENT_ERRORS)
            attempt = _failed_attempt(step, error)
            reply = _added(step, "reply")
            reply.update(tool_calls=[], finish_reason="stop", output_message={"role": "assistant", "content": error})
            reply["input_messages"] = [*(step.get("input_messages") or []),
                                       {"role": "assistant", "content": None,
                                        "tool_calls": (attempt.get("output_message") or {}).get("tool_calls") or []},
                                       *({"role": "tool", "tool_call_id": c["id"], "content": error}
                                         for c in attempt["tool_calls"])]
            if to_another:
                attempt["agent"] = reply["agent"] = f"{step.get('agent')}-2"
                if doc.get("agents") and attempt["agent"] not in doc["agents"]:
                    doc["agents"] = [*doc["agents"], attempt["agent"]]
            steps += [attempt, reply, _added(handover, "again")]
        steps.append(step)
    return _reindexed(doc, steps)


def original_steps(before: dict, after: dict) -> list[int]:
    """For each step of `after` (`before` rewritten), the index of the step of `before` it
    stands for: a kept step is itself (matched by span id, which no rewrite changes); an added
    failed attempt and the reply to it stand for the step that made the call again, a
    hand-over said again for the hand-over."""
    position = {s.get("span_id"): k for k, s in enumerate(_ordered(before))}
    out = []
    for step in _ordered(after):
        span = step.get("span_id")
        while span not in position:  # an added step, perhaps a copy of another added step
            span = _STANDS_FOR[span]
        out.append(position[span])
    return out


# --- (b) tool errors returned as plain text ----------------------------------------------

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
                parsed = _json_or_none(msg["content"])
                if isinstance(parsed, dict) and set(parsed) == {"error"}:
                    msg["content"] = _plain(parsed["error"])
    return doc


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return None


# --- (c) ids without a separator ---------------------------------------------------------

# Any id, separated or not (ACC-1007, ord_7f3a2, sku:88-b, acc1007): what upper_ids capitalizes.
_ID_TOKEN = re.compile(r"(?<![\w:-])(?=[\w:-]*[A-Za-z])(?=[\w:-]*\d)[A-Za-z0-9]+(?:[-_:][A-Za-z0-9]+)*(?![\w-])")
# Any token of letter/digit runs joined by '-' or '_' that has a letter and a digit:
# ACC-1007, CHK_2201, inv-2024-07-a1. Dates (no letter) and snake_case names (no digit) stay.
_SEPARATED_ID = re.compile(r"(?<![\w-])(?=[\w-]*[A-Za-z])(?=[\w-]*\d)[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)+(?![\w-])")


def squash_ids(doc: dict, seed: int) -> dict:
    return _map_strings(doc, lambda s: _SEPARATED_ID.sub(lambda m: re.sub(r"[-_]", "", m.group(0)).lower(), s))


def colon_ids(doc: dict, seed: int) -> dict:
    """Ids namespaced with colons, as many stores write them (`ACC-1007` -> `acc:1007`)."""
    return _map_strings(doc, lambda s: _SEPARATED_ID.sub(lambda m: re.sub(r"[-_]", ":", m.group(0)).lower(), s))


# --- (d) reports without failure words ---------------------------------------------------

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
    if isinstance(_json_or_none(text), (dict, list)):
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
        step.update(_map_strings({k: v for k, v in step.items() if k not in ("tool_calls",)}, _paraphrase))
        for tc, error, result in errors:  # a delegation's result is the worker's report
            if isinstance(result, str):
                tc["result"] = _paraphrase(result)
    for key in ("output", "task"):
        if doc.get(key) is not None:
            doc[key] = _map_strings(doc[key], _paraphrase)
    return doc


# --- extras ------------------------------------------------------------------------------

# Whole numbers of four digits or more in an agent's own words, not inside an id or a date.
_LONG_NUMBER = re.compile(r"(?<![\w.:,-])(\d{4,})(\.\d+)?(?![\w:-]|[.,]\d)")


def _grouped(text: str) -> str:
    if isinstance(_json_or_none(text), (dict, list)):
        return text  # a tool's JSON output keeps the tool's own number format
    return _LONG_NUMBER.sub(lambda m: f"{int(m.group(1)):,}" + (m.group(2) or ""), text)


def _map_agent_words(doc: dict, fn: Callable[[str], str]) -> dict:
    """`doc` with fn applied to what the agents wrote themselves: their messages (as they
    stand and as later prompts quote them), a delegation's string result (the worker's
    report) and the final answer. Tools' results, the user's and the system's words keep
    theirs. A message object a later prompt shares with the step that wrote it (a deep copy
    keeps them shared) is rewritten once."""
    doc = copy.deepcopy(doc)
    done: set[int] = set()
    for step in doc.get("steps") or []:
        messages = [step.get("output_message") or {}]
        messages += [m for m in step.get("input_messages") or [] if m.get("role") == "assistant"]
        for msg in messages:
            if id(msg) not in done and isinstance(msg.get("content"), str):
                msg["content"] = fn(msg["content"])
                done.add(id(msg))
        for tc in step.get("tool_calls") or []:
            if isinstance(tc.get("result"), str):
                tc["result"] = fn(tc["result"])
    output = doc.get("output")
    if isinstance(output, dict) and isinstance(output.get("final_answer"), str):
        output["final_answer"] = fn(output["final_answer"])
    elif isinstance(output, str):
        doc["output"] = fn(output)
    return doc


def group_numbers(doc: dict, seed: int) -> dict:
    """Agents write amounts with thousands separators (1500 -> 1,500) as people do, while the
    tools' results keep the raw number: the same value, spelled two ways."""
    return _map_agent_words(doc, _grouped)


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
    rng = _session_rng(doc, seed, "tools")
    mapping = dict(zip(names, (f"{w}_{rng.randrange(10, 99)}" for w in rng.sample(_TOOL_WORDS, len(names)))))
    prose = _replace_words({k: v for k, v in mapping.items() if "_" in k})

    def rename_calls(msg: dict) -> None:
        for tc in msg.get("tool_calls") or []:
            fn = tc.get("function")
            if isinstance(fn, dict) and fn.get("name") in mapping:
                fn["name"] = mapping[fn["name"]]
            if tc.get("name") in mapping:
                tc["name"] = mapping[tc["name"]]

    doc = _map_strings(doc, prose)
    for step in doc.get("steps") or []:
        rename_calls(step)
        for msg in [step.get("output_message") or {}] + list(step.get("input_messages") or []):
            rename_calls(msg)
        for tool in step.get("tools") or []:
            fn = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(fn, dict) and fn.get("name") in mapping:
                fn["name"] = mapping[fn["name"]]
    return doc


def _as_prose(value: Any) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{str(k).replace('_', ' ')} {_as_prose(v)}" for k, v in value.items())
    if isinstance(value, list):
        return "\n".join(f"- {_as_prose(v)}" for v in value) if value else "nothing"
    return "none" if value is None else str(value)


def prose_results(doc: dict, seed: int) -> dict:
    """JSON tool results written as prose lines ("account id X; type checking; ...")."""
    doc = copy.deepcopy(doc)
    for step in doc.get("steps") or []:
        for tc in step.get("tool_calls") or []:
            if isinstance(tc.get("result"), (dict, list)):
                tc["result"] = _as_prose(tc["result"])
        for msg in step.get("input_messages") or []:
            if msg.get("role") == "tool" and isinstance(msg.get("content"), str):
                parsed = _json_or_none(msg["content"])
                if isinstance(parsed, (dict, list)):
                    msg["content"] = _as_prose(parsed)
    return doc


def _upper_ids(text: str) -> str:
    if isinstance(_json_or_none(text), (dict, list)):
        return text  # a tool's JSON output keeps the tool's own spelling
    return _ID_TOKEN.sub(lambda m: m.group(0).upper(), text)


def upper_case_ids(doc: dict, seed: int) -> dict:
    """Agents write ids in capitals in their own words (`ord_7f3a2` -> `ORD_7F3A2`) while tools
    and call arguments keep the store's spelling: the same id, written two ways."""
    return _map_agent_words(doc, _upper_ids)


def _stamped(text: str) -> str:
    if not text.strip() or isinstance(_json_or_none(text), (dict, list)):
        return text
    tick = zlib.crc32(text.encode()) % 3600  # the same message gets the same stamp wherever it is quoted
    return f"[2026-03-14 09:{tick // 60:02d}:{tick % 60:02d}] {text}"


def timestamps(doc: dict, seed: int) -> dict:
    """Agents' messages open with the time they were written ("[2026-03-14 09:21:05] ..."),
    as chat logs and many agent frameworks print them: a clock reading in every message,
    which no input showed and no later step uses."""
    return _map_agent_words(doc, _stamped)


_NARRATIONS = ("Let me check with {tool}.", "I'll use {tool} for this.", "Calling {tool} now.",
               "One moment, looking this up with {tool}.")


def narrate_calls(doc: dict, seed: int) -> dict:
    """A step that calls tools also says so in words ("Let me check with order_details."), as
    models usually do beside their tool calls; the words carry no value the call does not."""
    doc = copy.deepcopy(doc)
    rng = _session_rng(doc, seed, "narrate")
    for step in doc.get("steps") or []:
        msg = step.get("output_message")
        calls = step.get("tool_calls") or []
        if calls and isinstance(msg, dict) and not (msg.get("content") or "").strip():
            msg["content"] = rng.choice(_NARRATIONS).format(tool=calls[0].get("name") or "a tool")
    return doc


def _enveloped(value: Any) -> Any:
    return {"status": 200, "data": value} if isinstance(value, (dict, list)) else value


def _map_results(doc: dict, fn: Callable[[Any], Any]) -> dict:
    """`doc` with fn applied to every tool result: call records' and, where a prompt carries
    a result as JSON text, that text's value (written back as JSON)."""
    doc = copy.deepcopy(doc)
    for step in doc.get("steps") or []:
        for tc in step.get("tool_calls") or []:
            tc["result"] = fn(tc.get("result"))
        for msg in step.get("input_messages") or []:
            if msg.get("role") == "tool" and isinstance(msg.get("content"), str):
                parsed = _json_or_none(msg["content"])
                if isinstance(parsed, (dict, list)):
                    msg["content"] = json.dumps(fn(parsed))
    return doc


def envelope_results(doc: dict, seed: int) -> dict:
    """JSON results wrapped as an HTTP API returns them (`{"status": 200, "data": ...}`)."""
    return _map_results(doc, _enveloped)


def _served(value: Any) -> Any:
    if not isinstance(value, dict) or "served_at" in value:
        return value
    tick = zlib.crc32(json.dumps(value, sort_keys=True, default=str).encode()) % 3600
    return {**value, "served_at": f"2026-03-14T09:{tick // 60:02d}:{tick % 60:02d}Z"}


def result_timestamps(doc: dict, seed: int) -> dict:
    """JSON results carry the time they were served (`"served_at": "2026-03-14T09:48:54Z"`), as
    many APIs add: a value in every result that no report relays and no call uses."""
    return _map_results(doc, _served)


def _code_ids(text: str) -> str:
    if isinstance(_json_or_none(text), (dict, list)):
        return text
    return _ID_TOKEN.sub(lambda m: f"`{m.group(0)}`", text)


def markdown_ids(doc: dict, seed: int) -> dict:
    """Agents write ids as Markdown code (`acc-1007` -> `` `acc-1007` ``), as chat models do."""
    return _map_agent_words(doc, _code_ids)


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


def jitter_timing(doc: dict, seed: int) -> dict:
    """Every step and tool call took between 0.3 and 4 times as long, at random, as a loaded
    machine or a slow network records them: the same session, other durations. Only timing
    changes; no word or value does."""
    doc = copy.deepcopy(doc)
    rng = _session_rng(doc, seed, "timing")
    for step in doc.get("steps") or []:
        for record in [step, *(step.get("tool_calls") or [])]:
            if isinstance(record.get("duration_ms"), (int, float)):
                record["duration_ms"] = record["duration_ms"] * rng.uniform(0.3, 4.0)
    return doc


def _reverse_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reverse_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reverse_keys(v) for v in value]
    return value


def _camel(value: Any) -> Any:
    if isinstance(value, dict):
        return {re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), str(k)): _camel(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel(v) for v in value]
    return value


def camel_keys(doc: dict, seed: int) -> dict:
    """Results' keys in camelCase (`order_ref` -> `orderRef`), as a JavaScript API writes them,
    while the calls' arguments keep snake_case: one field, named two ways."""
    return _map_results(doc, _camel)


def reorder_keys(doc: dict, seed: int) -> dict:
    """Results' keys in reverse order (records and their JSON text in prompts alike)."""
    return _map_results(doc, _reverse_keys)


REWRITES: dict[str, Callable[[dict, int], dict]] = {
    "agents": rename_agents,          # (a)
    "retries": transient_retries,
    "reported_retries": reported_retries,
    "rerouted_retries": rerouted_retries,
    "single_agent": single_agent,
    "plain_errors": plain_errors,     # (b)
    "ids": squash_ids,                # (c)
    "colon_ids": colon_ids,
    "paraphrase": paraphrase_reports,  # (d)
    "tools": rename_tools,
    "prose_results": prose_results,
    "key_order": reorder_keys,
    "grouped_numbers": group_numbers,
    "upper_ids": upper_case_ids,
    "envelope": envelope_results,
    "camel_keys": camel_keys,
    "narrated_calls": narrate_calls,
    "timestamps": timestamps,
    "served_at": result_timestamps,
    "markdown_ids": markdown_ids,
    "timing": jitter_timing,
    "joined_clauses": joined_clauses,
}
# The four rewrites together, every presentation rewrite together (prose last: it
# reads JSON; colon ids are another spelling of (c), so (c) stands for both), all of that as
# one agent, and all of it with both kinds of retries first (their failures are raised, and
# plain_errors turns them into text like any other failure).
_EVERY = ["agents", "plain_errors", "ids", "paraphrase", "tools", "narrated_calls", "key_order",
          "grouped_numbers", "upper_ids", "envelope", "camel_keys", "timestamps", "served_at",
          "markdown_ids", "timing", "joined_clauses", "prose_results"]
COMBINED = {"all4": ["agents", "plain_errors", "ids", "paraphrase"],
            "all": _EVERY,
            "all_one_agent": [*_EVERY, "single_agent"],
            "all_with_retries": ["retries", "reported_retries", *_EVERY]}


def perturb(doc: dict, names: list[str], seed: int = 0) -> dict:
    for name in names:
        doc = REWRITES[name](doc, seed)
    return doc


def expand(spec: str) -> dict[str, list[str]]:
    """'all' -> every single rewrite and the combinations; 'a,b' -> those, by name."""
    if spec == "all":
        return {**{name: [name] for name in REWRITES}, **COMBINED}
    out = {}
    for name in spec.split(","):
        if name in COMBINED:
            out[name] = COMBINED[name]
        elif name in REWRITES:
            out[name] = [name]
        else:
            raise SystemExit(f"unknown rewrite {name!r}: one of {', '.join([*REWRITES, *COMBINED])}")
    return out
