"""What the session shows about the corrective action itself: which value each argument of a
tool takes and where the session states it, the plan item an instruction carries out, the
worker and tool an instruction is for, and the fields a report got wrong.

- `parameters`: a tool's parameters and the shape of their values (the tool's schema: its
  type, the example its description gives; else the values the session passed);
- `arguments_in`: the values a text (an instruction, a plan item) gives for those parameters;
- `said_at`: the step whose output a text is (where an instruction came from);
- `plan_item`: the item of the acting agent's latest plan or checklist that its k-th message
  after it carries out; `instructed`: the worker, tool and recorded call an instruction led to;
- `reported_value`: the one value of a shape that the reports and results give for what a plan
  item describes ("Grace's savings" -> the account whose line says savings);
- `misreported`: the fields of a tool's result that the agent's report states otherwise.

Readers only, as intervention_evidence.py: interventions.py writes the text.
"""
from __future__ import annotations

import json
import re

from tracefix.analysis.roles import hub_agents, is_coordinator
from tracefix.replay.intervention_evidence import VALUE, output_text, value_shape, values_in

NUMBER = "number"  # the shape of a numeric parameter's values
LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*\u2022])\s+(.+?)\s*$", re.M)
_WORD = re.compile(r"[a-z]{3,}")
_COMMON = {"the", "and", "for", "with", "their", "into", "from", "this", "that", "what", "your", "account", "accounts",
           "customer", "balance", "open", "each"}


def coordinates(doc: dict, agent: str | None) -> bool:
    """The agent plans and instructs the others: named so, or the session's hub."""
    return is_coordinator(agent) or agent in hub_agents([s.get("agent") for s in doc.get("steps") or []])


def _schemas(tool: str | None, definitions: list[dict] | None) -> dict[str, dict]:
    for d in definitions or []:
        fn = d.get("function", d)
        if fn.get("name") == tool:
            return dict(((fn.get("parameters") or {}).get("properties") or {}))
    return {}


def _shape_of(schema: dict | None) -> str:
    """A parameter's shape from its schema: numeric, or the shape of its description's example."""
    example = values_in(str((schema or {}).get("description") or ""))
    return NUMBER if (schema or {}).get("type") in ("number", "integer") else value_shape(example[-1]) if example else ""


def parameters(tool: str | None, definitions: list[dict] | None, doc: dict) -> dict[str, str]:
    """Each parameter of `tool` with the shape of its values ("" when unknown): from its schema,
    else from the values the session passed to a parameter of that name, else from the other
    parameters that share a word of its name (from_account: account_id's ACC-)."""
    known: dict[str, str] = {}
    params: dict[str, str] = {}
    for s in doc.get("steps") or []:
        for c in s.get("tool_calls") or []:
            for name, value in (c.get("arguments") or {}).items() if isinstance(c.get("arguments"), dict) else ():
                if c.get("name") == tool:
                    params.setdefault(name, "")
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    known.setdefault(name, NUMBER)
                elif isinstance(value, str) and values_in(value) == [value]:
                    known.setdefault(name, value_shape(value))
    for d in definitions or []:
        fn = d.get("function", d)
        for name, schema in (((fn.get("parameters") or {}).get("properties") or {})).items():
            shape = _shape_of(schema)
            if shape:
                known.setdefault(name, shape)
            if fn.get("name") == tool:
                params[name] = shape
    for name, shape in params.items():
        words = {w for w in name.lower().split("_") if len(w) > 2}
        kin = {s for other, s in known.items() if other != name and s and words & set(other.lower().split("_"))}
        params[name] = shape or known.get(name) or (kin.pop() if len(kin) == 1 else "")
    return params


def arguments_in(text: str | None, tool: str | None, definitions: list[dict] | None, doc: dict) -> dict[str, str]:
    """The values `text` gives for `tool`'s parameters: a value goes to the one parameter of its
    shape; between several, to the one whose name the words before it say ("from account X")."""
    params = parameters(tool, definitions, doc)
    found: dict[str, str] = {}
    for m in VALUE.finditer(str(text or "")):
        value = m.group(0).lstrip("$").rstrip(".,")
        shape = value_shape(value) or NUMBER
        before = set(re.findall(r"[a-z]+", str(text)[max(0, m.start() - 30):m.start()].lower())[-3:])
        open_ = [p for p, s in params.items() if s == shape and p not in found]
        if not open_:  # a parameter of unknown shape that the words before the value name
            open_ = [p for p, s in params.items() if not s and p not in found and set(p.lower().split("_")) & before]
        if len(open_) > 1:
            scored = sorted(((len(set(p.lower().split("_")) & before), p) for p in open_), reverse=True)
            open_ = [scored[0][1]] if scored[0][0] > scored[1][0] else []
        if len(open_) == 1:
            found[open_[0]] = value
    return found


def said_at(doc: dict, text: str | None, before: int) -> int | None:
    """The latest step before `before` whose output is `text` (or holds it)."""
    wanted = " ".join(str(text or "").split())
    for s in reversed(doc.get("steps") or []):
        said = " ".join(output_text(s).split())
        if s["index"] < before and wanted and said and (said == wanted or wanted in said):
            return s["index"]
    return None


def addressee(item: str | None) -> str | None:
    """The worker a plan item names first ("PaymentsAgent: deposit ..." -> PaymentsAgent)."""
    named = re.match(r"\W*([A-Za-z][\w-]*):", item or "")
    return named.group(1) if named else None


def receiver(doc: dict, step: dict) -> str | None:
    """The agent that acted next after `step`, when another one: who an instruction went to."""
    return next((s.get("agent") for s in doc.get("steps") or []
                 if s["index"] > step["index"] and s.get("agent") != step.get("agent")), None)


def plan_item(doc: dict, step: dict, worker: str | None = None) -> str | None:
    """The item of the agent's latest plan (a list of two or more items it wrote without calling
    a tool) that its k-th message after the plan, counting `step`, carries out; with `worker`,
    the first item for that worker from the k-th on (else the last before it)."""
    items: list[str] = []
    messages = 0
    for s in doc.get("steps") or []:
        if s["index"] > step["index"]:
            break
        if s.get("agent") != step.get("agent") or s.get("tool_calls"):
            continue
        listed = LIST_ITEM.findall(output_text(s))
        if len(listed) >= 2:
            items, messages = listed, 0
        else:
            messages += 1
    if not items or messages == 0:
        return None
    if worker and any(addressee(i) for i in items):
        mine = [i for i, item in enumerate(items) if addressee(item) == worker]
        later = [i for i in mine if i >= messages - 1]
        return items[later[0]] if later else items[mine[-1]] if mine else None
    return items[messages - 1] if messages <= len(items) else None


def instructed(doc: dict, step: dict, item: str | None,
               session_definitions: dict[int, list[dict]] | None) -> tuple[str | None, str | None, dict]:
    """(worker, tool, the arguments it was called with) for an instruction at `step`: the first
    call the instructed worker made after it; without one, the worker the plan item names
    ("PaymentsAgent: ...") and the first of its tools (else of the session's) that the item's
    words name ("look up ... accounts" -> lookup_customer)."""
    prefix = re.match(r"\W*([A-Za-z][\w-]*):", item or "")
    named = receiver(doc, step) or addressee(item)
    for s in doc.get("steps") or []:
        if s["index"] <= step["index"] or s.get("agent") == step.get("agent"):
            continue
        if s.get("agent") != (named or s.get("agent")):
            continue
        if not s.get("tool_calls"):
            named = named or s.get("agent")
            break
        call = s["tool_calls"][0]
        return s.get("agent"), call.get("name"), dict(call.get("arguments") or {})
    by_agent: dict[str | None, set[str]] = {}
    for s in doc.get("steps") or []:
        names = {c.get("name") for c in s.get("tool_calls") or []}
        names |= {(d.get("function", d)).get("name") for d in (session_definitions or {}).get(s["index"]) or []}
        by_agent.setdefault(s.get("agent"), set()).update(n for n in names if n)
    # a worker that never acted in the session: its tools are unknown (no other agent's are guessed)
    tools = by_agent.get(named, set()) if named else set().union(*by_agent.values()) if by_agent else set()
    spoken = re.sub(r"\W", "", (item or "")[prefix.end() if prefix else 0:].lower())
    places = {t: min((spoken.find(p) for p in t.lower().split("_") if len(p) > 3 and p in spoken), default=-1)
              for t in tools}
    said = sorted((at, t) for t, at in places.items() if at >= 0)
    return named, (said[0][1] if said and (len(said) == 1 or said[0][0] < said[1][0]) else None), {}


def _line_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _COMMON}


def reported_value(doc: dict, step: dict, shape: str, item: str | None,
                   avoid: str | None) -> tuple[str, int, str, list[str]] | None:
    """(value, step, what said it, the item's words on its line) for the one value of `shape`
    that a report or tool result before `step` gives on a line sharing the most words with the
    plan item (what the item describes: "Grace's savings" -> the savings account), not `avoid`."""
    wanted = _line_words(re.sub(r"^\W*[\w-]+:", "", item or ""))
    best: dict[str, tuple[int, int, str, list[str]]] = {}
    for s in doc.get("steps") or []:
        if s["index"] >= step["index"]:
            break
        texts = [(f"the report of {s.get('agent')}", output_text(s))]
        texts += [(f"the result of `{c.get('name')}`", json.dumps(c.get("result"), default=str))
                  for c in s.get("tool_calls") or []]
        for who, text in texts:
            for line in re.split(r"\n|\},\s*\{", text):
                shared = sorted(_line_words(line) & wanted)
                for value in values_in(line):
                    if value_shape(value) == shape and value != avoid and len(shared) > best.get(value, (0, 0, "", []))[0]:
                        best[value] = (len(shared), s["index"], who, shared)
    top = sorted(best.items(), key=lambda kv: -kv[1][0])
    if top and (len(top) == 1 or top[0][1][0] > top[1][1][0]):
        value, (_, at, who, shared) = top[0]
        return value, at, who, shared
    return None


def _records(value) -> list[dict]:
    if isinstance(value, dict):
        return [value] + [r for v in value.values() for r in _records(v)]
    if isinstance(value, list):
        return [r for v in value for r in _records(v)]
    return []


def misreported(results: list[tuple[str, str]], said: str) -> list[str]:
    """"field value for id" for each field of a result's record that the lines of `said`
    naming the record's id state otherwise (the value is not on them)."""
    out = []
    for _, content in results:
        try:
            parsed = json.loads(content)
        except (TypeError, ValueError):
            continue
        for record in _records(parsed):
            ids = [v for v in record.values() if isinstance(v, str) and values_in(v) == [v] and value_shape(v)]
            ids.sort(key=lambda v: not re.search(r"[-_:#]$", value_shape(v)))  # ACC-1001 before a bin's A2
            lines = [line for line in re.split(r"\n|(?<=\.)\s", said) for i in ids[:1] if i in line]
            if not lines:
                continue
            for key, value in record.items():
                if isinstance(value, bool) or not isinstance(value, (str, int, float)) or value in ids:
                    continue
                if not any(str(value).lower() in line.lower() for line in lines):
                    out.append(f"{key} {value} for {ids[0]}")
    return out

