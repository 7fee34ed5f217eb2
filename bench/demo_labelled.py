"""Labelled demo sessions for the learned ranker: each failed faulted session with the step
the sim injected its fault at, as JSONL of {"session": <session document>, "mistake_step": k,
"kind", "domain", "hgt": [per-step surprise]}.

    .venv/bin/python bench/demo_labelled.py OUT.jsonl [--domains bank,warehouse] [--seeds 1,2]
                                            [--per-kind 4] [--epochs 30] [--fingerprints PATH]

Per domain and seed it records what bench/localization.py records (every task fault-free, then
`--per-kind` faulted tasks per fault kind), trains the HGT on that seed's successful sessions as
a user's `tracefix train` would, and stores its surprise for each failed session's steps, so the
ranker learns what the HGT adds beside the other inputs. `tracefix train --ranker --labelled
OUT.jsonl` trains on these beside labelled message logs. Use other seeds for the benchmarks: each
seed draws its own customers, ids and amounts (demo/variants.py), and the benchmarks drop any
test session whose content fingerprint is one of these (bench/fresh_sessions.py), which this
writes to --fingerprints (default analysis/models/ranker_sessions.txt, shipped beside the
ranker trained on OUT.jsonl).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from demo_corpus import DemoCorpus  # noqa: E402
from fresh_sessions import TRAINED_ON, content_fingerprint, write_fingerprints  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--domains", default="bank,warehouse")
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--per-kind", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--fingerprints", type=Path, default=TRAINED_ON,
                    help="where the content fingerprints of the labelled sessions go")
    args = ap.parse_args()
    from tracefix.analysis.graph import build_graph
    from tracefix.analysis.pipeline import train_on_documents
    from tracefix.analysis.units import build_units

    written, fingerprints = 0, []
    with tempfile.TemporaryDirectory(prefix="demo-labelled-") as tmp, args.out.open("w") as out:
        for domain in args.domains.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                with DemoCorpus(Path(tmp) / f"{domain}-{seed}", sim_seed=seed, domain=domain) as corpus:
                    clean_ids, truth, docs, _ = corpus.record_seed(seed, args.per_kind)
                    clean = [docs[s] for s in clean_ids if docs[s].get("outcome") == "success"]
                    model, _ = train_on_documents(clean, epochs=args.epochs, out=Path(tmp) / f"model-{domain}-{seed}")
                    for label in truth:
                        doc = docs[label["session"]]
                        if doc.get("outcome") != "failure":
                            continue  # the fault did not make the task fail: nothing to localize
                        hgt = [round(float(v), 6) for v in model.score(build_graph(build_units(doc)))]
                        out.write(json.dumps({"session": doc, "mistake_step": label["step"], "kind": label["kind"],
                                              "domain": domain, "hgt": hgt}, default=str) + "\n")
                        written += 1
                        fingerprints.append(content_fingerprint(doc))
                print(f"{domain} seed {seed}: {len(clean)} successful sessions trained the HGT; "
                      f"{written} labelled failed sessions so far", file=sys.stderr, flush=True)
    write_fingerprints(fingerprints, args.fingerprints)
    print(f"wrote {written} labelled failed sessions to {args.out} ({len(set(fingerprints))} distinct contents, "
          f"fingerprints in {args.fingerprints})")


if __name__ == "__main__":
    main()
