"""Session in, analysis result out (docs/contracts.md section 3), and model training.

    analyze_document(doc, model)           plain session document -> result dict
    analyze_session(access, session_id)    read from the store, analyze, save_analysis, return
    train_model(access, criterion=...)     fit the HGT on the store's successful sessions, save it

The diagnosis job of `tracefix serve` (analysis/diagnosis.py) calls analyze_session. Models live in
$TRACEFIX_MODEL_DIR, else `<db folder>/models/` (the db being the access layer's file, else
$TRACEFIX_DB, else the store's default `.tracefix/tracefix.duckdb`); the newest `hgt-*.pt`
there is the one used.
"""
from __future__ import annotations

import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from tracefix.collector.cycles import cycle_collection_paused
from tracefix.collector.document import session_task
from tracefix.errors import UnknownSession

from .contracts import AnalysisResult
from .detectors import HGTDetector, HGTConfig, IsolationForestDetector
from .evidence import REGISTRY, EvidenceDetector, findings
from .features import FEATURE_NAMES, feature_matrix
from .frontier import frontiers
from .graph import build_graph
from .hypotheses import DEFAULT_WEIGHTS, EvidenceWeights, evidence_packet, rank_hypotheses, rerank_hypotheses
from .marks import apply_marks
from .ranker import StepRanker, load_rankers, ranker_inputs, session_kind, shipped_rankers
from .units import build_units

NO_MODEL_NOTE = "no trained model found: run-local detector only (train one with `tracefix train`)"


def default_model_dir(db: str | Path | None = None) -> Path:
    env = os.environ.get("TRACEFIX_MODEL_DIR")
    if env:
        return Path(env)
    if not db or str(db) == ":memory:":
        # Same default as the store's, so `tracefix train --server` and `tracefix serve`
        # started in one folder agree without configuration.
        from tracefix.collector import db_path

        db = db_path()
    return Path(db).expanduser().resolve().parent / "models"


def model_dir_for(access: Any) -> Path:
    """The model folder for an access object: it knows its DuckDB file when it opened one."""
    for attr in ("db_path", "path", "db"):
        db = getattr(access, attr, None)
        if isinstance(db, (str, Path)) and str(db):
            return default_model_dir(db)
    store = getattr(access, "store", None)
    if store is not None and isinstance(getattr(store, "path", None), (str, Path)):
        return default_model_dir(store.path)
    store_path = getattr(access, "store_path", None)  # HttpAccess: the collector names its file
    if callable(store_path) and not os.environ.get("TRACEFIX_MODEL_DIR"):
        db = store_path()  # share the collector's models folder
        if db:
            return default_model_dir(db)
    return default_model_dir(None)


def latest_model_path(model_dir: str | Path) -> Path | None:
    folder = Path(model_dir)
    if folder.is_file():
        return folder
    if not folder.is_dir():
        return None
    models = sorted(folder.glob("hgt-*.pt"), key=lambda p: (p.stat().st_mtime, p.name))
    return models[-1] if models else None


_model_cache: dict[tuple[str, float], HGTDetector] = {}
_model_lock = threading.Lock()


def load_model(model_dir: str | Path, device: str | None = None) -> HGTDetector | None:
    """The newest model in `model_dir` (cached per file and mtime), or None if there is none."""
    path = latest_model_path(model_dir)
    if path is None:
        return None
    key = (str(path), path.stat().st_mtime)
    with _model_lock:
        if key not in _model_cache:
            _model_cache.clear()
            _model_cache[key] = HGTDetector.load(path, device=device)
        return _model_cache[key]


def session_failed(doc: dict) -> bool:
    """A session counts as failed unless it succeeded or got only positive feedback."""
    if doc.get("outcome") == "success":
        return False
    feedback = doc.get("feedback") or []
    if doc.get("outcome") is None and feedback and all((f.get("score") or 0) > 0 for f in feedback):
        return False
    return True


SHIPPED = "shipped"


def analyze_document(doc: dict, model: HGTDetector | None = None, llm: Any = None,
                     notes: list[str] | None = None, isolation_forest: bool = True,
                     weights: EvidenceWeights = DEFAULT_WEIGHTS,
                     ranker: StepRanker | str | None = SHIPPED,
                     evidence: Sequence[EvidenceDetector] = REGISTRY) -> dict[str, Any]:
    """Score every step of one session document and rank failure hypotheses.

    The learned ranker (`ranker`, the shipped model by default) orders the hypotheses from
    the detectors' scores, each evidence detector's findings and the generic step signals; `ranker=None`
    keeps the graph heuristics' own order. `isolation_forest=False`, `weights`, `ranker=None`
    and `evidence` (the evidence detectors the heuristics read: evidence.without(name) leaves
    one out) are for ablations (bench/whowhen.py, bench/localization.py); the defaults are
    the product's."""
    notes = list(notes or [])
    with cycle_collection_paused():
        units = build_units(doc)
        graph = build_graph(units)
        task = session_task(doc)
        X = feature_matrix(graph)
        scores: dict[str, Any] = {}
        if isolation_forest and len(units):
            scores["isolation_forest"] = IsolationForestDetector().fit_score(X)
        if model is not None and len(units):
            scores["hgt"] = model.score(graph)
        elif model is None:
            notes.append(NO_MODEL_NOTE)
        detectors = (["isolation_forest"] if isolation_forest else []) + (["hgt"] if model is not None else [])
        frontier = frontiers(scores)
        failed = session_failed(doc)
        found_by = findings(graph, evidence)  # read once: the heuristics weigh it, the ranker reads it
        hypotheses = rank_hypotheses(graph, scores, frontier, X, failed=failed, weights=weights, evidence=evidence,
                                     found_by=found_by)
        if ranker == SHIPPED:
            ranker = shipped_rankers().get(session_kind(doc))
        ranker_scores = None
        if isinstance(ranker, StepRanker) and len(units) > 1 and failed:
            inputs = ranker_inputs(doc, units, scores, found_by)
            ranker_scores = ranker.scores(inputs)
            hypotheses = rerank_hypotheses(graph, hypotheses, ranker, inputs, ranker_scores, scores)
        if model is not None and hypotheses:
            for h in hypotheses[:3]:  # what the normal-behaviour model expected there
                h["evidence"]["hgt_expected"] = model.explain(graph, h["step"])

    llm_used = False
    if llm is not None and hypotheses:
        llm_used = _apply_analyst(llm, graph, doc, task, hypotheses, notes)
    elif hypotheses and ranker_scores is not None:
        notes.append(f"hypotheses ordered by the learned step ranker {ranker.version} over the detectors' "
                     f"scores, the dependency evidence and the step signals (no LLM analyst configured)")
    elif hypotheses:
        notes.append("hypotheses ranked by detectors and dependency paths (no LLM analyst configured)")
    hypotheses = apply_marks(doc, graph, hypotheses, notes)  # a person's mark outranks every model

    rows = []
    for u in units:
        row: dict[str, Any] = {"step": u.index}
        for name in detectors:
            row[name] = round(float(scores[name][u.index]), 4)
        if ranker_scores is not None:
            row["ranker"] = round(float(ranker_scores[u.index]), 4)
        row.update({"phase": u.phase, "agent": u.agent, "status": u.status, "tool": u.tool})
        if u.recovered_by is not None:  # an error the run got past: shown apart from the failures
            row["recovered_by"] = u.recovered_by
        rows.append(row)
    return {
        "session_id": doc.get("session_id"),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "model_version": model.version if model is not None else None,
        "ranker_version": ranker.version if ranker_scores is not None else None,
        "detectors": detectors,
        "notes": notes,
        "llm_used": llm_used,
        "failed": failed,
        "feature_names": list(FEATURE_NAMES),
        "scores": rows,
        "frontier": {name: [int(s) for s in steps] for name, steps in frontier.items()},
        "graph": graph.to_dict(),
        "hypotheses": hypotheses,
    }


def _apply_analyst(llm: Any, graph: Any, doc: dict, task: str | None, hypotheses: list[dict],
                   notes: list[str]) -> bool:
    """Let the LLM analyst confirm the turning point; on any failure keep the detectors' order."""
    from .analyst import confirm_turning_point

    packets = [evidence_packet(graph, h) for h in hypotheses[:3]]
    outcome = {"outcome": doc.get("outcome"), "output": doc.get("output"),
               "feedback": [f.get("comment") for f in doc.get("feedback") or [] if f.get("comment")]}
    try:
        diagnosis = confirm_turning_point(llm, task, outcome, packets)
    except Exception as exc:  # any analyst failure degrades to the deterministic ranking
        notes.append(f"LLM analyst unavailable ({exc}); hypotheses ranked by detectors")
        return False
    step = diagnosis["turning_point"]
    chosen = next((h for h in hypotheses if h["step"] == step), None)
    if chosen is None:
        u = graph.units[step]
        chosen = {"rank": 0, "step": step, "agent": u.agent, "score": hypotheses[0]["score"],
                  "evidence": {"detectors": [], "features": {}, "path": [step], "tool": u.tool,
                               "error": u.error_text, "phase": u.phase}}
        hypotheses.insert(0, chosen)
    hypotheses.remove(chosen)
    hypotheses.insert(0, chosen)
    chosen["source"] = "llm"
    chosen["rationale"] = diagnosis["root_cause"] or chosen.get("rationale", "")
    chosen["evidence"]["recovery_hints"] = diagnosis["recovery_hints"]
    for rank, h in enumerate(hypotheses, start=1):
        h["rank"] = rank
    return True


def analyze_session(access: Any, session_id: str, model_dir: str | Path | None = None, llm: Any = None,
                    model: HGTDetector | None = None, save: bool = True) -> AnalysisResult:
    """Read a session through the store access layer, analyze it, store and return the result.
    `llm=None` uses the TRACEFIX_LLM_* analyst when configured; pass False to skip it."""
    doc = access.get_session(session_id)
    if doc is None:
        raise UnknownSession(session_id, f"no session {session_id!r} in the store")
    notes: list[str] = []
    if model is None:
        folder = Path(model_dir) if model_dir else model_dir_for(access)
        try:
            model = load_model(folder)
        except Exception as exc:  # a corrupt or outdated model file must not stop the analysis
            notes.append(f"model in {folder} could not be loaded ({exc})")
            model = None
    ranker: StepRanker | str | None = SHIPPED
    folder = Path(model_dir) if model_dir else model_dir_for(access)
    user_rankers = (folder.parent if folder.is_file() else folder) / "ranker.json"
    if user_rankers.is_file():  # `tracefix train --ranker` output replaces the shipped model
        try:
            ranker = load_rankers(user_rankers).get(session_kind(doc), SHIPPED)
        except (ValueError, KeyError, TypeError, OSError) as exc:
            notes.append(f"ranker in {user_rankers} could not be loaded ({exc}); the shipped one is used")
    if llm is None:
        from .analyst import analyst_from_env

        llm = analyst_from_env()
    result = analyze_document(doc, model, llm=llm or None, notes=notes, ranker=ranker)
    if save:
        access.save_analysis(session_id, result)
    return result


def train_model(access: Any, criterion: str = "success", epochs: int = HGTConfig.epochs,
                out: str | Path | None = None, device: str | None = None,
                progress: Callable[[dict], None] | None = None, **config: Any) -> tuple[HGTDetector, Path]:
    """Fit the normal-behaviour HGT on the store's training sessions and save it."""
    docs = access.training_sessions(criterion=criterion)
    return train_on_documents(docs, epochs=epochs, out=out or model_dir_for(access), device=device,
                              progress=progress, **config)


def train_on_documents(docs: list[dict], epochs: int = HGTConfig.epochs, out: str | Path | None = None,
                       device: str | None = None, progress: Callable[[dict], None] | None = None,
                       **config: Any) -> tuple[HGTDetector, Path]:
    graphs = [build_graph(build_units(d)) for d in docs if d.get("steps")]
    if not graphs:
        raise ValueError("no training sessions with steps: record successful sessions (or positive "
                         "feedback) first")
    detector = HGTDetector(HGTConfig(epochs=epochs, **config), device=device).fit(graphs, progress=progress)
    path = detector.save(out or default_model_dir())
    return detector, path
