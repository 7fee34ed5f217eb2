"""Test sessions the shipped ranker never saw: a session's content fingerprint, and the
benchmarks' filter that drops any test session whose content equals one the shipped ranker was
trained on (bench/demo_labelled.py writes their fingerprints to analysis/models/ranker_sessions.txt).

The demo draws fresh customers, ids and amounts per seed (demo/variants.py), so a session of
another seed is new content; this check makes that a measured fact rather than an assumption,
and catches what a seed could still repeat (a read-only task whose fault lands on the same words).

    from fresh_sessions import content_fingerprint, drop_trained
    kept = drop_trained(label_rows, docs, "bank seed 4")     # prints how many it dropped
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Iterable

TRAINED_ON = Path(__file__).resolve().parent.parent / "analysis" / "models" / "ranker_sessions.txt"


def _message(message: Any) -> Any:
    """A message's words and calls without its ids (a call id is a hash of its context, not content)."""
    if not isinstance(message, dict):
        return message
    calls = [[(c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments")]
             for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    return [message.get("role"), message.get("content"), calls]


def content_fingerprint(doc: dict) -> str:
    """sha256 of what a session says and does, in order: each step's agent, what it was asked
    (its first step: the task), what it answered, and each tool call's name, arguments, result
    and error; no ids, times, tokens or costs. Equal content, equal fingerprint."""
    steps = doc.get("steps") or []
    content = [[_message(m) for m in (steps[0].get("input_messages") or [])] if steps else []]
    for step in steps:
        content.append([step.get("agent"), step.get("kind"), _message(step.get("output_message")),
                        [[c.get("name"), c.get("arguments"), c.get("result"), c.get("error")]
                         for c in step.get("tool_calls") or []]])
    content.append(doc.get("output"))
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()


def trained_fingerprints(path: Path = TRAINED_ON) -> set[str]:
    if not path.exists():
        print(f"note: {path} is missing: test sessions are not checked against the ranker's training sessions",
              file=sys.stderr)
        return set()
    return {line.strip() for line in path.read_text().splitlines() if line.strip()}


def write_fingerprints(fingerprints: Iterable[str], path: Path = TRAINED_ON) -> None:
    path.write_text("".join(f"{f}\n" for f in sorted(set(fingerprints))))


def drop_trained(labels: list[dict], docs: dict[str, dict], what: str,
                 trained: set[str] | None = None) -> list[dict]:
    """The ground-truth rows whose session's content the ranker was not trained on; prints how
    many were dropped (stderr)."""
    trained = trained_fingerprints() if trained is None else trained
    kept = [row for row in labels if content_fingerprint(docs[row["session"]]) not in trained]
    print(f"{what}: dropped {len(labels) - len(kept)} of {len(labels)} test sessions whose content the shipped "
          f"ranker was trained on", file=sys.stderr, flush=True)
    return kept
