"""The learned step ranker: which step of a failed session started the failure.

A linear listwise model (softmax over a session's steps, the labelled step as the target,
L2-regularized, fitted with L-BFGS) over per-step inputs that know no domain:

- the generic signals of `step_signals` (position, structure, content, information flow,
  similarity to the task and to the final answer);
- the detectors' per-step scores (IsolationForest, and the HGT's surprise when a model is
  loaded), raw and as within-session rank;
- within-session z-scores of the continuous inputs, and every input above scaled by
  log(session length), so one linear model can weigh a 10-step and a 100-step session
  differently;
- one input per evidence detector of evidence/ (`evidence_<name>`: 1 at the step of its
  first finding, 1/2 at its second, ...), each with a weight of its own, so what each rule
  is worth on labelled data shows (bench/whowhen.py, bench/localization.py print it). A
  detector the training leaves out (`left_out`) has weight 0; a detector registered after
  the model was fitted counts 0 until it is fitted again.

Why linear and listwise: the labelled corpora are small (tens to a few hundred sessions), a
session has exactly one labelled step, and the model file must be data, not code: it is a
JSON list of weights (no pickle is ever loaded). Fitted by `fit_ranker` from labelled
sessions (`tracefix train --ranker`); the shipped model is `models/ranker.json`.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from .evidence import NAMES as EVIDENCE_DETECTORS
from .evidence import Evidence
from .features import zscores
from .step_signals import SIGNAL_NAMES, SIGNAL_WORDS, step_signal_matrix
from .transition_unit import TransitionUnit

DETECTOR_INPUTS = ("isolation_forest", "isolation_forest_rank", "hgt", "hgt_rank")
BASE_INPUTS = SIGNAL_NAMES + DETECTOR_INPUTS
# Inputs whose size depends on the session: also given as within-session z-scores.
RELATIVE_INPUTS = ("log_length", "hedging", "new_values", "task_similarity", "final_similarity",
                   "novelty", "speaker_share", "agent_turn", "isolation_forest", "hgt")
EVIDENCE_PREFIX = "evidence_"
# One input per registered evidence detector, and only one (no z-score, no length-scaled
# copy): its weight is what that detector is worth to the ranker.
EVIDENCE_INPUTS = tuple(EVIDENCE_PREFIX + name for name in EVIDENCE_DETECTORS)
FEATURE_NAMES = (BASE_INPUTS + tuple(f"{name}_z" for name in RELATIVE_INPUTS)
                 + tuple(f"{name}_x_log_n" for name in BASE_INPUTS) + EVIDENCE_INPUTS)
INPUT_WORDS = {**SIGNAL_WORDS,
               "isolation_forest": ("anomalous to the IsolationForest", None),
               "isolation_forest_rank": ("among the IsolationForest's most anomalous steps", None),
               "hgt": ("surprising to the HGT trained on successful sessions", None),
               "hgt_rank": ("among the HGT's most surprising steps", None),
               **{EVIDENCE_PREFIX + name: (f"named by the {name.replace('_', ' ')} evidence detector", None)
                  for name in EVIDENCE_DETECTORS}}
SHIPPED_MODEL = Path(__file__).resolve().parent / "models" / "ranker.json"
FORMAT = "tracefix-step-ranker/1"


def _rank01(values: Sequence[float]) -> list[float]:
    """1.0 for the highest value of the session, 0.0 for the lowest (ties share the better rank)."""
    n = len(values)
    if n < 2:
        return [1.0] * n
    order = sorted(range(n), key=lambda i: (-values[i], i))
    out = [0.0] * n
    for position, i in enumerate(order):
        out[i] = 1.0 - position / (n - 1)
    return out


def evidence_column(found: Iterable[Evidence], n: int) -> list[float]:
    """One detector's findings as a per-step input: 1 at the step of its first finding, 1/2
    at the step of its second, and so on (the first place a failure shows is likelier its
    origin, as the graph heuristics' weights of a first and later symptom say); 0 elsewhere."""
    column = [0.0] * n
    order = list(dict.fromkeys(e.step for e in found if 0 <= e.step < n))
    for position, step in enumerate(order):
        column[step] = 1.0 / (position + 1)
    return column


def ranker_inputs(doc: dict, units: list[TransitionUnit], scores: dict[str, Sequence[float]],
                  found_by: dict[str, list[Evidence]]) -> list[list[float]]:
    """The (steps x FEATURE_NAMES) input matrix for one session, as nested lists. `found_by`
    is the evidence detectors' findings (evidence.findings); a detector not in it (left out
    for an ablation) gives a column of zeros."""
    n = len(units)
    if n == 0:
        return []
    signals = step_signal_matrix(doc, units)
    detector_columns: dict[str, list[float]] = {}
    for name in ("isolation_forest", "hgt"):
        values = [float(v) for v in scores[name]] if name in scores else [0.0] * n
        detector_columns[name] = values
        detector_columns[f"{name}_rank"] = _rank01(values) if name in scores else [0.0] * n
    evidence = [evidence_column(found_by.get(name, ()), n) for name in EVIDENCE_DETECTORS]
    base = [list(signals[k]) + [detector_columns[name][k] for name in DETECTOR_INPUTS] for k in range(n)]
    relative = [zscores([row[BASE_INPUTS.index(name)] for row in base]) for name in RELATIVE_INPUTS]
    scale = math.log(n) / 4.0  # log(n)/4 is about 1 for a 50-step session
    return [base[k] + [column[k] for column in relative] + [v * scale for v in base[k]]
            + [column[k] for column in evidence] for k in range(n)]


@dataclass
class StepRanker:
    """A fitted linear listwise ranker: standardize the inputs, then one weight per input."""

    feature_names: tuple[str, ...]
    mean: list[float]
    scale: list[float]
    weights: list[float]
    l2: float = 0.3
    trained_on: dict[str, Any] = field(default_factory=dict)
    version: str = ""

    def scores(self, inputs: Sequence[Sequence[float]]) -> list[float]:
        return [sum(w * (x - m) / s for w, x, m, s in zip(self.weights, row, self.mean, self.scale))
                for row in inputs]

    def contributions(self, row: Sequence[float], k: int = 4) -> dict[str, float]:
        """The inputs that pushed this step up most: why the ranker put it there."""
        parts = [(name, w * (x - m) / s) for name, w, x, m, s
                 in zip(self.feature_names, self.weights, row, self.mean, self.scale)]
        top = sorted((p for p in parts if p[1] > 0), key=lambda p: -p[1])[:k]
        return {name: round(value, 3) for name, value in top}

    def reasons(self, row: Sequence[float], k: int = 3) -> list[str]:
        """The same in plain words: an input's raw value, its within-session z-score and its
        length-scaled copy are one signal, so their pushes are summed; whether the signal was
        high or low for this step picks the words (a low value that says nothing is left out)."""
        push: dict[str, float] = {}
        for name, w, x, m, s in zip(self.feature_names, self.weights, row, self.mean, self.scale):
            base = name.removesuffix("_x_log_n").removesuffix("_z")
            push[base] = push.get(base, 0.0) + w * (x - m) / s
        out = []
        for base, value in sorted(push.items(), key=lambda item: -item[1]):
            if value <= 0 or len(out) == k:
                break
            i = self.feature_names.index(base)
            high, low = INPUT_WORDS.get(base, (base, None))
            words = high if row[i] > self.mean[i] else low
            if words:
                out.append(words)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"version": self.version, "l2": self.l2, "trained_on": self.trained_on,
                "features": [{"name": n, "mean": m, "scale": s, "weight": w}
                             for n, m, s, w in zip(self.feature_names, self.mean, self.scale, self.weights)]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "StepRanker":
        """A model file's ranker. An evidence detector registered after the model was fitted
        has no weight in it: it counts 0 (mean 0, scale 1, weight 0) until the ranker is
        fitted again; any other input the file lacks or this version does not compute is refused."""
        by_name = {f["name"]: f for f in data["features"]}
        missing = [name for name in FEATURE_NAMES if name not in by_name]
        if set(by_name) - set(FEATURE_NAMES) or any(not name.startswith(EVIDENCE_PREFIX) for name in missing):
            raise ValueError("the ranker was trained on other inputs than this version computes; retrain it "
                             "with `tracefix train --ranker`")
        features = [by_name.get(name, {"mean": 0.0, "scale": 1.0, "weight": 0.0}) for name in FEATURE_NAMES]
        return cls(feature_names=FEATURE_NAMES, mean=[float(f["mean"]) for f in features],
                   scale=[float(f["scale"]) for f in features], weights=[float(f["weight"]) for f in features],
                   l2=float(data.get("l2", 0.3)), trained_on=dict(data.get("trained_on") or {}),
                   version=str(data.get("version") or ""))

    def weight_of(self, name: str) -> float:
        """The weight of one input, per standard deviation of it in the training data."""
        return self.weights[self.feature_names.index(name)]


def session_kind(doc: dict) -> str:
    """"message" for a conversation in words only, "llm" for a session whose tool calls and
    results are recorded (an instrumented session, or an imported log that carries them).

    The two carry different evidence (a plain message log has no tool calls, results or
    state; the others do), so each kind has a ranker of its own: a log in the OpenAI format
    with `tool_calls` looks like an instrumented session to the analysis, not like a chat."""
    steps = doc.get("steps") or []
    words_only = all(s.get("kind") == "message" and not (s.get("output_message") or {}).get("tool_calls")
                     for s in steps)
    return "message" if steps and words_only else "llm"


def save_rankers(rankers: dict[str, "StepRanker"], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"format": FORMAT, "models": {kind: r.to_json() for kind, r in sorted(rankers.items())}}
    path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return path


def load_rankers(path: str | Path) -> dict[str, "StepRanker"]:
    """Session kind -> ranker, from a model file (JSON weights only: nothing in it is executed)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} file")
    return {str(kind): StepRanker.from_json(model) for kind, model in (data.get("models") or {}).items()}


def fit_ranker(sessions: Sequence[tuple[Sequence[Sequence[float]], int]], l2: float = 0.3,
               trained_on: dict[str, Any] | None = None, left_out: Sequence[str] = ()) -> StepRanker:
    """Fit on (inputs, labelled step) pairs: maximize the softmax probability of the labelled
    step among its session's steps, with an L2 penalty on the standardized weights. Inputs
    named in `left_out` are zeroed before fitting, so their weight is 0 (the model does not
    use them; trained_on records them)."""
    import numpy as np
    from scipy.optimize import minimize

    unknown = sorted(set(left_out) - set(FEATURE_NAMES))
    if unknown:
        raise ValueError(f"no ranker input {', '.join(unknown)}")
    keep = np.array([name not in left_out for name in FEATURE_NAMES], dtype=float)
    usable = [(np.asarray(X, dtype=float) * keep, int(y)) for X, y in sessions if len(X) > 1 and 0 <= int(y) < len(X)]
    if not usable:
        raise ValueError("no labelled session with at least two steps to learn from")
    if left_out:
        trained_on = {**(trained_on or {}), "left_out": sorted(left_out)}
    stacked = np.vstack([X for X, _ in usable])
    mean = stacked.mean(axis=0)
    scale = stacked.std(axis=0)
    scale = np.where(scale < 1e-9, 1.0, scale)
    Z = (stacked - mean) / scale
    # Sessions as segments of the stacked rows: one vectorized softmax per segment.
    sizes = np.array([len(X) for X, _ in usable])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    segment = np.repeat(np.arange(len(usable)), sizes)
    labelled = starts + np.array([y for _, y in usable])
    Z_labelled_sum = Z[labelled].sum(axis=0)
    m = len(usable)

    def loss(w: Any) -> tuple[float, Any]:
        s = Z @ w
        peak = np.maximum.reduceat(s, starts)
        e = np.exp(s - peak[segment])
        total = np.add.reduceat(e, starts)
        lse = peak + np.log(total)
        p = e / total[segment]
        value = float(lse.sum() - s[labelled].sum()) / m + l2 * float(w @ w) / 2
        grad = (Z.T @ p - Z_labelled_sum) / m + l2 * w
        return value, grad

    w = minimize(loss, np.zeros(stacked.shape[1]), jac=True, method="L-BFGS-B").x
    ranker = StepRanker(feature_names=FEATURE_NAMES, mean=mean.tolist(), scale=scale.tolist(),
                        weights=w.tolist(), l2=l2, trained_on=dict(trained_on or {}))
    ranker.version = "ranker-" + hashlib.sha256(json.dumps(ranker.to_json(), sort_keys=True).encode()).hexdigest()[:12]
    return ranker


def order_by(scores: Sequence[float]) -> list[int]:
    """Steps from most to least suspect (ties: the earlier step first)."""
    return sorted(range(len(scores)), key=lambda k: (-scores[k], k))


_shipped: dict[str, StepRanker] | None = None


def shipped_rankers() -> dict[str, StepRanker]:
    """The models that come with the package, by session kind (empty if missing or outdated)."""
    global _shipped
    if _shipped is None:
        try:
            _shipped = load_rankers(SHIPPED_MODEL) if SHIPPED_MODEL.is_file() else {}
        except (ValueError, KeyError, TypeError, json.JSONDecodeError):
            _shipped = {}
    return _shipped
