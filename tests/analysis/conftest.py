"""A small labelled corpus of real demo sessions, recorded once per test run: the banking
app under tracefix instrumentation, the scripted LLM server in-process with fault plans,
OTLP to a real `tracefix serve` (diagnosis jobs on, analysis only)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # the corpus helper
sys.path.insert(0, str(Path(__file__).resolve().parent))  # analysis_handmade sessions

CLEAN_TASKS = ["t01", "t02", "t03", "t04", "t05", "t06", "t07", "t08", "t09", "t10"]
# (task, kind, from step): one fault of each kind; the sim moves it to the first step that can host it
FAULTS = [("t03", "wrong_argument", 0), ("t04", "missing_argument", 0), ("t02", "skipped_action", 0),
          ("t05", "vague_instruction", 0), ("t09", "misread_tool_result", 0), ("t01", "early_final_answer", 0),
          ("t06", "missing_argument", 4)]


@pytest.fixture(scope="session")
def demo_corpus(tmp_path_factory):
    from demo_corpus import DemoCorpus

    corpus = DemoCorpus(tmp_path_factory.mktemp("demo-corpus"), diagnose="analysis")
    with corpus:
        clean = corpus.run_clean(CLEAN_TASKS)
        truth = corpus.run_faulted(FAULTS)
        docs = corpus.documents(clean + [t["session"] for t in truth])
        corpus.clean_ids = clean
        corpus.truth = truth
        corpus.docs = docs
        yield corpus


@pytest.fixture(scope="session")
def demo_model(demo_corpus):
    """A small HGT trained on the corpus's successful sessions, saved where the collector's
    diagnosis worker looks (<db folder>/models)."""
    from tracefix.analysis.pipeline import train_model

    model, path = train_model(demo_corpus.access, epochs=8)
    return model
