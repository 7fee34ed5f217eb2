"""Generic per-step signals for ranking failure origins on any agent's session.

Nothing here knows a domain, an id format or an agent name. A step is described by:

- where it sits: its relative position, how many agent turns came before it, whether it is
  its speaker's first turn, whether its speaker is the first agent to speak (in a
  conversation the first agent to answer the task is the one that frames it — the planner —
  whatever it is called);
- who does the work: the coordinating speaker, read from the conversation's shape (the one
  whose turn comes right before nearly every other agent's turn), and for everyone else how
  many worker turns came before this one (a coordinated team usually goes wrong the first
  time a worker acts on the world, not the tenth);
- what it says: its length, code, hedging ("assume", "probably"), claims of success or
  failure, whether it or the step after it errors (an error the agent got past by making the
  same calls again, a timeout or a rate limit, does not count), and whether it is the session's first
  step to do so (the first program written, the first guess, the first "done", the first
  error: what the rest of the session builds on or stumbles over starts there), and whether
  it says again, word for word, what an earlier step said (a retried call, a loop: the
  first of the copies is where it went wrong, not the copies);
- how information flows: values (numbers, quoted strings, identifiers) the step introduces
  that neither the task nor earlier steps showed, and how many of the final answer's values
  were first introduced here (a wrong final answer is usually carried from the step that
  first said it);
- how it relates to the task and the outcome: lexical similarity (TF-IDF cosine) of the
  step to the task and to the final answer, and its novelty against the steps before it.

`step_signal_matrix(doc, units)` returns one row per step in `SIGNAL_NAMES` order, as plain
lists (numpy only where the caller wants an array): the learned ranker's inputs beside the
detectors' scores.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, Sequence

from tracefix.collector.document import session_task

from .roles import HUMAN_ROLES, coordinating_speaker, is_agent_turn, is_tool_output, speaker_of
from .transition_unit import TransitionUnit
from .values import extract_artifacts

SIGNAL_NAMES = (
    "rel_position", "agent_turn", "first_agent_turn", "speaker_first_turn", "speaker_is_opener",
    "speaker_share", "is_human", "is_tool_output", "is_last",
    "speaker_is_hub", "is_worker", "worker_turn", "early_worker_turn",
    "phase_plan", "phase_instruct", "phase_act", "phase_answer",
    "log_length", "has_code", "hedging", "claims_success", "claims_failure",
    "errors", "next_errors", "errors_before",
    "first_code", "first_hedging", "first_success_claim", "first_error", "first_failure_claim",
    "repeats_earlier",
    "new_values", "final_values_introduced", "first_final_introducer",
    "task_similarity", "final_similarity", "novelty",
)

# What each signal says about a step in plain words, when it is high and when it is low
# (None: being low says nothing worth telling a reader): how the ranker explains itself.
SIGNAL_WORDS: dict[str, tuple[str | None, str | None]] = {
    "rel_position": ("late in the session", "early in the session"),
    "agent_turn": ("after many agent turns", "among the first agent turns"),
    "first_agent_turn": ("the first agent turn", None),
    "speaker_first_turn": ("its speaker's first turn", None),
    "speaker_is_opener": ("spoken by the agent that answered the task first", None),
    "speaker_share": ("spoken by an agent with many turns", "spoken by an agent with few turns"),
    "is_human": ("a human turn", None),
    "is_tool_output": ("a tool's output", None),
    "is_last": ("the last step", None),
    "speaker_is_hub": ("spoken by the coordinating agent", None),
    "is_worker": ("a worker's turn (an agent the coordinator hands work to)", None),
    "worker_turn": ("after many worker turns", "among the first worker turns"),
    "early_worker_turn": ("one of the first two worker turns", None),
    "phase_plan": ("a planning step", None),
    "phase_instruct": ("an instruction to another agent", None),
    "phase_act": ("an action on a tool", None),
    "phase_answer": ("an answer", None),
    "log_length": ("a long message", "a short message"),
    "has_code": ("contains code", None),
    "hedging": ("guesses or assumes", None),
    "claims_success": ("claims success", None),
    "claims_failure": ("reports a failure", None),
    "errors": ("ends in an error", None),
    "next_errors": ("the step after it errors", None),
    "errors_before": ("follows earlier errors", "no error before it"),
    "first_code": ("the session's first program", None),
    "first_hedging": ("the session's first guess or assumption", None),
    "first_success_claim": ("the session's first claim of success", None),
    "first_error": ("the session's first error", None),
    "first_failure_claim": ("the session's first report of a failure", None),
    "repeats_earlier": ("repeats an earlier step word for word", "says something new"),
    "new_values": ("introduces values nobody showed before", None),
    "final_values_introduced": ("first said values the final answer repeats", None),
    "first_final_introducer": ("the first step to say a value of the final answer", None),
    "task_similarity": ("close to the task's words", "far from the task's words"),
    "final_similarity": ("close to the final answer's words", "far from the final answer's words"),
    "novelty": ("words the session had not used before", "repeats the session's words"),
}

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_']+")
_CODE = re.compile(r"```|^\s{4}\S", re.M)
# Plain English of an agent guessing instead of checking; no domain in it.
_HEDGING = re.compile(r"\b(?:assum\w*|probabl\w*|likely|perhaps|maybe|approximately|roughly|estimat\w*|"
                      r"i think|i believe|seems?|appears? to|should be|hypothetical\w*|example)\b", re.I)
_STOPWORDS = frozenset(
    "the a an and or of to in on for with is are was were be been it this that these those as at by from "
    "we you i he she they them our your their its not no but if then so do does did have has had can could "
    "will would should may might must there here what which who whom when where why how all any each".split())


def _tokens(text: str) -> list[str]:
    return [w for w in (t.lower() for t in _WORD.findall(text or "")) if w not in _STOPWORDS and len(w) > 2]


class _Tfidf:
    """TF-IDF over the session's own steps (plus the task): similarity without a model."""

    def __init__(self, documents: Sequence[list[str]]):
        df: Counter[str] = Counter()
        for doc in documents:
            df.update(set(doc))
        n = max(len(documents), 1)
        self.idf = {w: math.log((1 + n) / (1 + c)) + 1.0 for w, c in df.items()}

    def vector(self, tokens: list[str]) -> dict[str, float]:
        tf = Counter(tokens)
        vec = {w: (1 + math.log(c)) * self.idf.get(w, 1.0) for w, c in tf.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        return {w: v / norm for w, v in vec.items()}

    @staticmethod
    def cosine(a: dict[str, float], b: dict[str, float]) -> float:
        if len(a) > len(b):
            a, b = b, a
        return sum(v * b.get(w, 0.0) for w, v in a.items())


def text_of(unit: TransitionUnit) -> str:
    parts = [unit.action.get("text") or ""]
    parts += [str(c.get("arguments")) for c in unit.action.get("calls") or []]
    parts += [str(f.get("result")) for f in unit.feedback if f.get("result") is not None]
    return "\n".join(p for p in parts if p)


def step_signal_matrix(doc: dict, units: list[TransitionUnit]) -> list[list[float]]:
    """One row of `SIGNAL_NAMES` per unit (step order)."""
    n = len(units)
    if n == 0:
        return []
    task = session_task(doc) or ""
    texts = [text_of(u) for u in units]
    speakers = [speaker_of(u.agent) for u in units]
    humans = [s in HUMAN_ROLES for s in speakers]
    tool_output = [is_tool_output(u) for u in units]
    is_agent = [is_agent_turn(u) for u in units]
    agent_steps = [k for k in range(n) if is_agent[k]]
    opener = speakers[agent_steps[0]] if agent_steps else None
    counts = Counter(speakers)
    hub = coordinating_speaker(speakers, is_agent)

    # Information flow: the values each step shows for the first time.
    seen = set(extract_artifacts(task))
    introduced: list[set[str]] = []
    for k in range(n):
        values = extract_artifacts(texts[k])
        introduced.append(values - seen)
        seen |= values
    final_k = max((k for k in range(n) if not humans[k]), default=n - 1)
    final_values = extract_artifacts(texts[final_k]) - extract_artifacts(task)
    first_introducer = {}
    for k in range(n):
        for v in introduced[k]:
            first_introducer.setdefault(v, k)
    from_step = Counter(first_introducer[v] for v in final_values if v in first_introducer)
    earliest_final = min(from_step) if from_step else None

    tokens = [_tokens(t) for t in texts]
    task_tokens = _tokens(task)
    tfidf = _Tfidf(tokens + [task_tokens])
    vectors = [tfidf.vector(t) for t in tokens]
    task_vec = tfidf.vector(task_tokens)
    final_vec = vectors[final_k]

    # The first step of each kind of act: a team that goes wrong usually does so the first
    # time it writes a program, guesses, declares success or fails, not on the repeats.
    code = [bool(_CODE.search(t)) for t in texts]
    hedges = [len(_HEDGING.findall(t)) for t in texts]
    firsts = {name: next((k for k in range(n) if flags[k]), None) for name, flags in (
        ("first_code", code), ("first_hedging", hedges),
        ("first_success_claim", [u.claims_success for u in units]),
        ("first_error", [u.failed for u in units]),
        ("first_failure_claim", [u.claims_failure for u in units]))}

    said: set[str] = set()
    repeats = []
    for text in texts:
        said_now = " ".join(text.split()).lower()
        repeats.append(bool(said_now) and said_now in said)
        said.add(said_now)

    rows: list[list[float]] = []
    turn, worker_turns, spoken, errors_before = 0, 0, set(), 0
    previous: Counter[str] = Counter()
    for k, u in enumerate(units):
        text = texts[k]
        own = set(tokens[k])
        novelty = (len(own - set(previous)) / len(own)) if own else 0.0
        worker = hub is not None and is_agent[k] and speakers[k] != hub
        row = {
            "rel_position": k / (n - 1) if n > 1 else 0.0,
            "agent_turn": math.log1p(turn),
            "first_agent_turn": float(bool(agent_steps) and k == agent_steps[0]),
            "speaker_first_turn": float(speakers[k] not in spoken),
            "speaker_is_opener": float(speakers[k] == opener),
            "speaker_share": counts[speakers[k]] / n,
            "is_human": float(humans[k]),
            "is_tool_output": float(tool_output[k]),
            "is_last": float(k == n - 1),
            "speaker_is_hub": float(hub is not None and speakers[k] == hub),
            "is_worker": float(worker),
            "worker_turn": math.log1p(worker_turns) if worker else 0.0,
            "early_worker_turn": float(worker and worker_turns < 2),
            "phase_plan": float(u.phase == "plan"),
            "phase_instruct": float(u.phase == "instruct"),
            "phase_act": float(u.phase == "act"),
            "phase_answer": float(u.phase == "answer"),
            "log_length": math.log1p(len(text)),
            "has_code": float(code[k]),
            "hedging": math.log1p(hedges[k]),
            "claims_success": float(u.claims_success),
            "claims_failure": float(u.claims_failure),
            "errors": float(u.failed),
            "next_errors": float(k + 1 < n and units[k + 1].failed),
            "errors_before": math.log1p(errors_before),
            **{name: float(first == k) for name, first in firsts.items()},
            "repeats_earlier": float(repeats[k]),
            "new_values": math.log1p(len(introduced[k])),
            "final_values_introduced": from_step.get(k, 0) / len(final_values) if final_values else 0.0,
            "first_final_introducer": float(earliest_final == k),
            "task_similarity": tfidf.cosine(vectors[k], task_vec),
            "final_similarity": tfidf.cosine(vectors[k], final_vec) if k != final_k else 1.0,
            "novelty": novelty,
        }
        rows.append([row[name] for name in SIGNAL_NAMES])
        if is_agent[k]:
            turn += 1
        worker_turns += worker
        spoken.add(speakers[k])
        errors_before += u.failed
        previous.update(own)
    return rows


def describe(row: Sequence[float]) -> dict[str, Any]:
    """A signal row as a name -> value dict (for evidence and debugging)."""
    return {name: round(float(v), 4) for name, v in zip(SIGNAL_NAMES, row)}
