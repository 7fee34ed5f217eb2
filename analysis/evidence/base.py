"""What an evidence detector gives back, and the detector as the registry holds it.

An evidence detector is one module of this folder: its docstring says what generic failure
it detects, and one function, `evidence(graph)`, reads the session's transition units
(`graph.units`, the graph for the walk back along its edges) and returns what it found, per
step. Module constants say how the graph heuristics weigh it (`WEIGHT`, a field of
hypotheses.EvidenceWeights; detectors of one `GROUP` add it once per step) and what the
learned ranker's labelled data showed it worth (an input each: ranker.py's `evidence_<name>`):

- no constant: it earns on real labelled logs (the Who&When dev split: leaving its input out
  of the cross-validated ranker lowers top-1 or hit@3 by more than one session,
  bench/whowhen.py), so both shipped rankers read it;
- `TESTBED_ONLY = True`: it earns only on the bundled testbed (the demo apps' injected faults:
  bench/localization.py's leave-one-detector-out table), so only the ranker of instrumented
  sessions, which the demo's labelled sessions train, reads it; the message-log ranker leaves
  it out;
- `RANKER_INPUT = False`: it earns on neither, so both rankers leave it out. The graph
  heuristics (hypotheses.py) still weigh every registered detector, and its evidence is
  shown in the report.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable

from ..graph import TransitionGraph
from ..symptoms import Symptom


@dataclass(frozen=True)
class Evidence:
    """One finding: the step it points at, and why, in words a report can show. A detector of
    symptoms (a failure that shows) sets `symptom`, walked back: `step` is then its origin."""

    step: int
    reason: str
    symptom: Symptom | None = None


@dataclass(frozen=True)
class EvidenceDetector:
    name: str
    summary: str  # the first line of the module's docstring
    evidence: Callable[[TransitionGraph], list[Evidence]]
    weight: str  # the hypotheses.EvidenceWeights field its evidence adds
    group: str  # detectors of one group add their weight once per step
    reads_symptoms: bool  # its evidence is symptoms walked back to their origin
    testbed_only: bool  # earns only on the bundled testbed: only the instrumented-session ranker reads it
    ranker_input: bool = True  # False: earns on no labelled data, no shipped ranker reads it

    @classmethod
    def of(cls, module: ModuleType) -> "EvidenceDetector":
        name = module.__name__.rpartition(".")[2]
        doc = (module.__doc__ or "").strip()
        return cls(name=name, summary=doc.splitlines()[0] if doc else "", evidence=module.evidence,
                   weight=module.WEIGHT, group=getattr(module, "GROUP", name),
                   reads_symptoms=bool(getattr(module, "SYMPTOMS", False)),
                   testbed_only=bool(getattr(module, "TESTBED_ONLY", False)),
                   ranker_input=bool(getattr(module, "RANKER_INPUT", True)))


def per_unit(graph: TransitionGraph, reason: Callable[..., str | None]) -> list[Evidence]:
    """Evidence for every unit `reason(unit)` has words for, in step order."""
    return [Evidence(u.index, why) for u in graph.units if (why := reason(u))]
