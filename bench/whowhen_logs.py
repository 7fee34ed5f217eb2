"""The Who&When development split's logs (bench/whowhen.py): read from
/work/shared/data/whowhen-dev, imported the product's way (one `tracefix import --db`
subprocess, labels stripped first, in an environment without an LLM, a server or a model of
the caller's), and checked message by message against the stored steps (a benchmark helper,
not product).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

DATA = Path("/work/shared/data/whowhen-dev")
SUBSETS = ("Algorithm-Generated", "Hand-Crafted")
LABEL_KEYS = ("mistake_agent", "mistake_step", "mistake_reason", "mistake_type")


def load_logs(limit: int | None) -> list[dict]:
    """The dev split's logs, in file-number order per subset (`limit`: the first N of each)."""
    logs = []
    for subset in SUBSETS:
        files = sorted((DATA / subset).glob("*.json"), key=lambda p: int(p.stem) if p.stem.isdigit() else p.stem)
        for path in files[:limit]:
            log = json.loads(path.read_text(encoding="utf-8"))
            logs.append({"subset": subset, "file": f"{subset}/{path.name}", "log": log,
                         "mistake_step": int(log["mistake_step"]), "mistake_agent": str(log["mistake_agent"])})
    return logs


def hermetic_env(model_dir: Path) -> dict[str, str]:
    """No LLM analyst, no server or store from the caller's shell, a model folder of our own."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TRACEFIX_LLM_") and k not in ("TRACEFIX_SERVER", "TRACEFIX_DB", "TRACEFIX_TOKEN")}
    env["TRACEFIX_MODEL_DIR"] = str(model_dir)
    return env


def import_logs(logs: list[dict], db: Path, env: dict[str, str]) -> list[str]:
    """`tracefix import FILE --db DB --json` on one JSONL file of all logs, labels removed."""
    jsonl = db.parent / "whowhen-dev.jsonl"
    with jsonl.open("w", encoding="utf-8") as f:
        for item in logs:
            f.write(json.dumps({k: v for k, v in item["log"].items() if k not in LABEL_KEYS}) + "\n")
    proc = subprocess.run([sys.executable, "-m", "tracefix.cli", "import", str(jsonl), "--db", str(db), "--json"],
                          env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"tracefix import failed ({proc.returncode}):\n{proc.stderr}")
    ids = json.loads(proc.stdout)
    if len(ids) != len(logs):
        raise SystemExit(f"tracefix import created {len(ids)} sessions for {len(logs)} logs:\n{proc.stderr}")
    return ids


def step_map(history: list[dict], doc: dict) -> tuple[dict[int, int], list[str]]:
    """Message index -> stored step index, matching speaker and text in order; and what differed."""
    from tracefix.collector.document import content_text

    steps = doc.get("steps") or []
    mapping, problems, j = {}, [], 0
    for k, msg in enumerate(history):
        speaker = str(msg.get("name") or msg.get("role") or "assistant")
        text = content_text(msg.get("content"))
        while j < len(steps) and not (steps[j].get("agent") == speaker and
                                      (steps[j].get("output_message") or {}).get("content") == text):
            problems.append(f"stored step {j} matches no message at {k}")
            j += 1
        if j == len(steps):
            problems.append(f"message {k} ({speaker}) not stored")
            continue
        mapping[k] = j
        if j != k or steps[j].get("index") != k:
            problems.append(f"message {k} stored as step {j} (index {steps[j].get('index')})")
        j += 1
    if len(steps) != len(history):
        problems.append(f"{len(history)} messages, {len(steps)} steps")
    return mapping, problems
