"""A labelled corpus of demo sessions (the banking team, or with domain="warehouse" the
warehouse crew), recorded the way a user records them.

The scripted LLM server runs in-process with fault plans; the demo app runs in-process
under tracefix's instrumentation, exporting OTLP/HTTP to a real `tracefix serve` (a
subprocess on loopback) whose store the analysis then reads through the access layer.
Each injected fault comes back from the sim's ground truth with its session and step.

    with DemoCorpus(workdir) as corpus:
        ok = corpus.run_clean(["t01", "t02"])                       # successful sessions
        bad = corpus.run_faulted([("t03", "wrong_argument", 2)])    # (task, kind, from step)
        docs = corpus.documents(ok + [b["session"] for b in bad])
        clean_ids, truth, docs, seconds = corpus.record_seed(4, per_kind=3)   # a seed's whole corpus

Used by bench/localization.py, bench/demo_labelled.py and tests/analysis (a test and benchmark helper, not product).
"""
from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import procs  # noqa: E402  (the tests' process harness, as bench/replay.py and bench/ingest.py use it)


class DemoCorpus:
    def __init__(self, workdir: str | Path, sim_seed: int = 1, diagnose: str = "off", domain: str = "bank"):
        from tracefix.demo.domains import get_domain

        self.domain = get_domain(domain)  # bank (t01..) or warehouse (w01..): which app records
        self.workdir = Path(workdir)
        self.diagnose = diagnose
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.sim_seed = sim_seed
        self.serve: procs.Proc | None = None
        self.server_url: str | None = None
        self.access = None

    def __enter__(self) -> "DemoCorpus":
        from tracefix.collector.access import connect

        # No diagnosis jobs by default: the benchmark analyzes on its own.
        self.serve = procs.start_serve(self.workdir / "store" / "corpus.duckdb", "--diagnose", self.diagnose)
        self.server_url = self.serve.match["http"]
        self.access = connect(server=self.server_url)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.serve is not None:
            self.serve.stop(timeout=20)

    def _run(self, tasks: list[str], config: Any, seed: int) -> tuple[list[str], list[dict]]:
        import tracefix
        from tracefix.demo.sim import SimConfig, SimServer

        server = SimServer(SimConfig(seed=self.sim_seed, faults=config))
        base_url = server.start()
        sessions: list[str] = []
        # Traced only while recording: shutdown flushes every span to the collector and
        # restores the SDK, so code running later in this process is not traced by us.
        handle = tracefix.init(endpoint=self.server_url, service_name=self.domain.service)
        run_task = self.domain.app().run_task  # after init: the app's openai client is traced
        try:
            for task_id in tasks:
                seen = set(self._session_ids_from(server))
                run_task(task_id, base_url=base_url, seed=seed)
                new = [s for s in self._session_ids_from(server) if s not in seen]
                sessions += new
        finally:
            handle.shutdown()
            injected = list(server.injector.injected)
            server.stop()
        return sessions, injected

    @staticmethod
    def _session_ids_from(server: Any) -> list[str]:
        return list(server.stats()["by_session"])  # the X-Demo-Session header = tracefix session id

    def run_clean(self, tasks: list[str], seed: int = 0) -> list[str]:
        from tracefix.demo.faults import FaultConfig

        sessions, _ = self._run(tasks, FaultConfig(seed=self.sim_seed), seed)
        return sessions

    def run_faulted(self, plan: list[tuple[str, str, int]], seed: int = 0) -> list[dict]:
        """Run each (task, kind, from_step) once with that one fault; returns the ground-truth
        records of the faults actually injected ({"session", "task", "step", "agent", "kind", ...})."""
        from tracefix.demo.faults import FaultConfig

        truth: list[dict] = []
        for task_id, kind, step in plan:
            config = FaultConfig(seed=self.sim_seed, plan=[{"task": task_id, "step": step, "kind": kind}])
            _, injected = self._run([task_id], config, seed)
            truth += injected
        return truth

    def record_seed(self, seed: int, per_kind: int) -> tuple[list[str], list[dict], dict[str, dict], float]:
        """Every task on this seed's world (t03@SEED: demo/variants.py) fault-free, then `per_kind`
        faulted tasks per fault kind, each fault injected from a random step: (clean ids, truth,
        docs, seconds)."""
        fault_free_steps, KINDS = self.domain.fault_free_steps, self.domain.kinds

        from tracefix.demo.variants import variant_id

        rng = random.Random(seed)
        tasks = [variant_id(t, seed) for t in self.domain.tasks]  # the seed's own customers, ids and amounts
        t0 = time.perf_counter()
        clean_ids = self.run_clean(tasks, seed=seed)
        plan = []
        for kind in KINDS:
            hosts = [t for t in tasks if any(kind in s.hosts for s in fault_free_steps(t))]
            for task_id in rng.sample(hosts, min(per_kind, len(hosts))):
                plan.append((task_id, kind, rng.randrange(len(fault_free_steps(task_id)))))
        truth = self.run_faulted(plan, seed=seed)
        docs = self.documents(clean_ids + [t["session"] for t in truth])
        return clean_ids, truth, docs, time.perf_counter() - t0

    def documents(self, session_ids: list[str], timeout: float = 60.0) -> dict[str, dict]:
        """The stored session documents, once each has its outcome (its root span arrived)."""
        deadline = time.monotonic() + timeout
        docs: dict[str, dict] = {}
        pending = list(dict.fromkeys(session_ids))
        while pending:
            still = []
            for sid in pending:
                doc = self.access.get_session(sid)
                if doc and doc.get("outcome") is not None and doc.get("steps"):
                    docs[sid] = doc
                else:
                    still.append(sid)
            pending = still
            if pending:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{len(pending)} session(s) never fully arrived: {pending[:3]}")
                time.sleep(0.1)
        return docs
