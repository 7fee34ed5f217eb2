"""Semantic step features: the embedding model ships in a wheel, loads with no network, sees
meaning where the lexical similarity sees no shared word, and its absence is flagged."""
from __future__ import annotations

import json
import subprocess
import sys

from tracefix.analysis.semantic import SEMANTIC_NAMES, load_embedder, model_files, semantic_columns
from tracefix.analysis.step_signals import SIGNAL_NAMES, step_signal_matrix
from tracefix.analysis.units import build_units
from tracefix.collector.imports import conversation_to_document

TASK = "How many automobiles were sold by the dealership last year?"
PARAPHRASE = "The car shop moved roughly four hundred vehicles in the previous twelve months."
UNRELATED = "I enjoy swimming at the beach on warm afternoons."


def _session(*texts: str) -> tuple[dict, list]:
    history = [{"role": "user", "name": "user", "content": TASK}]
    history += [{"role": "assistant", "name": f"Agent{k % 2}", "content": t} for k, t in enumerate(texts)]
    doc = conversation_to_document({"question": TASK, "history": history})
    return doc, build_units(doc)


def _column(names, rows, name):
    return [row[names.index(name)] for row in rows]


def test_semantic_similarity_sees_a_paraphrase_that_shares_no_word_with_the_task():
    doc, units = _session(PARAPHRASE, UNRELATED, "Final answer: four hundred vehicles.")
    names, rows = semantic_columns(doc, units)
    assert names == SEMANTIC_NAMES and len(rows) == len(units) == 4
    assert _column(names, rows, "semantic_available") == [1.0] * 4
    task_sim = _column(names, rows, "sem_task_similarity")
    assert task_sim[1] > 0.3 > 0.1 > task_sim[2], task_sim
    lexical = [row[SIGNAL_NAMES.index("task_similarity")] for row in step_signal_matrix(doc, units)]
    assert lexical[1] == lexical[2] == 0.0, lexical  # what the TF-IDF column cannot tell apart
    final_sim = _column(names, rows, "sem_final_similarity")
    assert final_sim[3] == 1.0 and final_sim[1] > final_sim[2], final_sim


def test_repetition_and_echo_columns_follow_the_conversation():
    doc, units = _session(PARAPHRASE, UNRELATED, PARAPHRASE)
    names, rows = semantic_columns(doc, units)
    prior = _column(names, rows, "sem_max_prior_similarity")
    assert prior[0] == 0.0 and abs(prior[3] - 1.0) < 1e-4 and prior[2] < 0.5, prior
    echo = _column(names, rows, "sem_later_echo")
    assert echo[-1] == 0.0 and echo[1] > echo[2], echo  # the paraphrase is said again later
    prev, nxt = _column(names, rows, "sem_prev_similarity"), _column(names, rows, "sem_next_similarity")
    assert prev[0] == 0.0 and nxt[-1] == 0.0 and prev[1:] == nxt[:-1]


def test_without_the_model_every_column_is_zero_and_the_flag_says_so():
    doc, units = _session(PARAPHRASE, UNRELATED)
    names, rows = semantic_columns(doc, units, embedder=None)
    assert names == SEMANTIC_NAMES and rows == [[0.0] * len(SEMANTIC_NAMES)] * 3
    assert load_embedder("tracefix_no_such_model_package") is None
    assert semantic_columns({}, [], embedder=None) == (SEMANTIC_NAMES, [])


def test_model_loads_from_the_wheel_with_no_network_and_leaves_logging_alone(tmp_path):
    assert model_files() is not None, "the analysis extra's wordllama package is not installed"
    script = f"""
import json, logging, socket, sys
class NoNetwork(socket.socket):
    def connect(self, *a, **k):
        raise OSError("network used at run time")
socket.socket = NoNetwork
from tracefix.analysis.semantic import load_embedder
embedder = load_embedder()
vectors = embedder.embed([{TASK!r}, {PARAPHRASE!r}, ""])
print(json.dumps({{"dim": embedder.dim, "cos": float(vectors[0] @ vectors[1]), "empty": float(abs(vectors[2]).sum()),
                  "imported": "wordllama" in sys.modules, "root_handlers": len(logging.getLogger().handlers)}}))
"""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", "XDG_CACHE_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["dim"] == 256 and out["cos"] > 0.3 and out["empty"] == 0.0
    # The package is read, not imported: its __init__ would configure the host's root logger.
    assert out["imported"] is False and out["root_handlers"] == 0
