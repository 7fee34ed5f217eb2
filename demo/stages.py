"""The stages of `tracefix demo` (:mod:`tracefix.demo.pipeline`), one method of :class:`Demo`
each: start the processes, run the banking tasks, train the model, send the thumbs-down,
wait for the diagnoses, write the reports. What the demo learns of each failed session is a
:class:`FailedSession`; a stage that cannot do its work raises :class:`StageFailed`."""
from __future__ import annotations

import json
import re
import secrets
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from rich.markup import escape

from tracefix.report.content.diagnosis import replay_hypotheses
from tracefix.report.content.values import brief, plural
from tracefix.collector.jobs import FINISHED_JOB_STATES
from tracefix.collector.launcher import SERVE_READY, TracefixProcess
from tracefix.replay.worker import READY as WORKER_READY

from .fault_plan import fault_plan, read_ground_truth
from .webhook import WebhookReceiver

SIM_READY = re.compile(r"serving on (http://127\.0\.0\.1:\d+/v1)")


class StageFailed(RuntimeError):
    """A stage of the demo could not do its work; the message says which and why."""


def complaint(doc: dict) -> str:
    """What the user would say: the first thing they asked for that did not happen."""
    missed = [m.get("name") for m in (doc.get("evaluation") or {}).get("milestones") or [] if not m.get("achieved")]
    return f"not done right: expected {missed[0]}" if missed else "the answer is wrong"


@dataclass
class FailedSession:
    session_id: str
    task_id: str
    doc: dict
    fault: dict | None = None
    job: dict | None = None
    analysis: dict | None = None
    replay: dict | None = None
    report: Path | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def top_step(self) -> int | None:
        hyps = (self.analysis or {}).get("hypotheses") or []
        return hyps[0].get("step") if hyps else None

    @property
    def top3(self) -> list[int]:
        return [h.get("step") for h in ((self.analysis or {}).get("hypotheses") or [])[:3]]

    @property
    def best(self) -> dict | None:
        """The tested hypothesis with the strongest verdict."""
        tested = replay_hypotheses(self.replay)
        return tested[0] if tested else None


class Demo:
    def __init__(self, progress, *, tasks: list[str], fault_rate: float, seed: int, out: Path, work: Path,
                 epochs: int, llm: str, follow_prob: float, deadline_s: float):
        self.progress = progress
        self.tasks = tasks
        self.fault_rate = fault_rate
        self.seed = seed
        self.out = out
        self.work = work
        self.epochs = epochs
        self.llm = llm
        self.follow_prob = follow_prob
        self.deadline = time.monotonic() + deadline_s
        self.problems: list[str] = []
        self.sim_url = ""
        self.serve_url = ""
        self.sessions: dict[str, str] = {}  # session id -> task id
        self.outcomes: dict[str, dict] = {}
        self.failed: list[FailedSession] = []
        self.trained_on = 0
        self.model_version = None
        self.handle = None
        self.replay_key = secrets.token_hex(32)  # the app's and the worker's, never the collector's

    def say(self, text: str) -> None:
        """A progress line (rich markup: escape whatever comes from outside)."""
        self.progress.console.print(text)

    def time_left(self) -> float:
        return max(5.0, self.deadline - time.monotonic())

    # stage 1
    def start(self, stack: ExitStack) -> None:
        receiver = WebhookReceiver()
        stack.callback(receiver.stop)
        self.receiver = receiver
        plan = fault_plan(self.tasks, self.fault_rate, self.seed)
        plan_path = self.work / "fault-plan.json"
        plan_path.write_text(json.dumps(plan, indent=2))
        self.truth_path = self.work / "ground-truth.jsonl"
        sim = TracefixProcess("tracefix sim", ["sim", "--port", "0", "--seed", str(self.seed), "--faults", str(plan_path),
                                     "--follow-prob", str(self.follow_prob), "--ground-truth", str(self.truth_path)],
                    SIM_READY, log=self.work / "sim.log")
        stack.callback(sim.stop)
        self.model_dir = self.work / "models"
        env = {"TRACEFIX_MODEL_DIR": str(self.model_dir)}  # where train() below writes the model
        for key in ("TRACEFIX_SERVER", "TRACEFIX_DB", "TRACEFIX_TOKEN", "TRACEFIX_INGEST_TOKEN",
                    "TRACEFIX_TLS_CERT", "TRACEFIX_TLS_KEY", "TRACEFIX_TLS_CLIENT_CA", "TRACEFIX_REPLAY_KEY"):
            env[key] = ""  # the demo's own collector, whatever the shell has configured
        self.sim_url = sim.address()
        if self.llm == "sim":
            env.update(TRACEFIX_LLM_BASE_URL=self.sim_url, TRACEFIX_LLM_MODEL="sim-analyst",
                       TRACEFIX_LLM_API_KEY="unused")
        elif self.llm == "none":
            env.update(TRACEFIX_LLM_BASE_URL="", TRACEFIX_LLM_MODEL="", TRACEFIX_LLM_API_KEY="")
        serve = TracefixProcess("tracefix serve", ["serve", "--http-port", "0", "--grpc-port", "0",
                                         "--db", str(self.work / "tracefix.duckdb"), "--webhook", receiver.url],
                      SERVE_READY, log=self.work / "serve.log", env=env)
        stack.callback(serve.stop)
        self.serve = serve
        self.serve_url = serve.address()
        # replays run beside the agent's code, in a worker allowed to import the demo's modules only
        # its zygotes import the demo's apps once (their imports start nothing and open nothing)
        worker = TracefixProcess("tracefix worker", ["worker", "--server", self.serve_url, "--allow-module",
                                                     "tracefix.demo", "--preload-module", "tracefix.demo.bank",
                                                     "--preload-module", "tracefix.demo.warehouse", "--poll", "0.5"],
                                 WORKER_READY, log=self.work / "worker.log",
                                 env={**env, "TRACEFIX_REPLAY_KEY": self.replay_key})
        stack.callback(worker.stop)
        self.worker = worker
        worker.address()
        from tracefix.collector.access import connect

        self.access = connect(server=self.serve_url)
        stack.callback(self.access.close)
        faults = ", ".join(f"{p['task']}:{p['kind']}" for p in plan) or "none"
        self.say(f"[green]✓[/] scripted LLM server: {self.sim_url}")
        self.say(f"[green]✓[/] collector (tracefix serve): {self.serve_url}")
        self.say(f"[green]✓[/] web UI (while the demo runs): {self.serve_url}/")
        self.say("[green]✓[/] replay worker (tracefix worker --allow-module tracefix.demo)")
        self.say(f"[green]✓[/] webhook receiver: {receiver.url}")
        self.say(f"  fault plan: {faults}")

    # stage 2
    def run_tasks(self) -> None:
        import tracefix
        from tracefix.demo.bank import run_task

        self.handle = handle = tracefix.init(endpoint=self.serve_url, service_name="bank-demo",
                                             replay_key=self.replay_key)
        bar = self.progress.add_task("running banking tasks", total=len(self.tasks))
        stats_url = self.sim_url.rsplit("/v1", 1)[0] + "/_sim/stats"
        for task_id in self.tasks:
            seen = set(_get_json(stats_url)["by_session"])
            try:
                run_task(task_id, base_url=self.sim_url, seed=self.seed)
            except Exception as exc:  # the app failing loudly is a failed session, not a failed demo
                self.say(f"  [yellow]{task_id} raised {type(exc).__name__}: {escape(str(exc))}[/]")
            for sid in set(_get_json(stats_url)["by_session"]) - seen:
                self.sessions[sid] = task_id
            self.progress.advance(bar)
        handle.force_flush()
        # A session is complete once its root span (with the evaluator's outcome) is stored.
        pending = set(self.sessions)
        deadline = time.monotonic() + 60
        while pending and time.monotonic() < deadline:
            for sid in list(pending):
                doc = self.access.get_session(sid)
                if doc and doc.get("outcome") is not None and doc.get("steps"):
                    self.outcomes[sid] = doc
                    pending.discard(sid)
            if pending:
                time.sleep(0.2)
        if pending:
            raise StageFailed(f"{len(pending)} session(s) never reached the collector: {sorted(pending)[:3]}")
        truth = read_ground_truth(self.truth_path)
        ok = sum(1 for d in self.outcomes.values() if d.get("outcome") == "success")
        for sid, doc in sorted(self.outcomes.items(), key=lambda kv: self.tasks.index(self.sessions[kv[0]])):
            if doc.get("outcome") != "success":
                self.failed.append(FailedSession(sid, self.sessions[sid], doc, truth.get(sid)))
        self.say(f"[green]✓[/] {len(self.outcomes)} sessions recorded: {ok} succeeded, {len(self.failed)} failed")
        unexplained = [f.task_id for f in self.failed if f.fault is None]
        if unexplained:
            self.problems.append(f"tasks failed without an injected fault: {', '.join(unexplained)}")
        if not self.failed and self.fault_rate > 0:
            raise StageFailed("no session failed although faults were planned: see the sim's log "
                              f"({self.work / 'sim.log'}) and the fault plan ({self.work / 'fault-plan.json'})")

    # stage 3
    def train(self) -> None:
        from tracefix.analysis.pipeline import train_model

        if not any(d.get("outcome") == "success" for d in self.outcomes.values()):
            # A new install has no model either; the analysis then says it ran the run-local detector only.
            self.say("[yellow]![/] no session succeeded, so there is nothing to train on: "
                     "the analysis runs with the run-local detector only")
            return
        bar = self.progress.add_task("training the normal-behaviour model (HGT)", total=self.epochs)

        def on_epoch(record: dict) -> None:
            self.progress.update(bar, completed=record.get("epoch", 0), total=record.get("epochs", self.epochs))

        try:
            detector, path = train_model(self.access, epochs=self.epochs, out=self.model_dir, progress=on_epoch)
        except ValueError as exc:
            raise StageFailed(f"training failed: {exc}") from exc
        self.trained_on = getattr(detector, "trained_on", 0)
        self.model_version = getattr(detector, "version", path.stem)
        self.say(f"[green]✓[/] model {self.model_version} trained on {self.trained_on} successful sessions")

    # stage 4
    def thumbs_down(self) -> None:
        import tracefix

        for failed in self.failed:
            answer = tracefix.feedback(failed.session_id, -1.0, comment=complaint(failed.doc), server=self.serve_url)
            if not answer.get("job_id"):
                self.problems.append(f"feedback on {failed.session_id} queued no diagnosis job: {answer}")
        ids = {f.session_id for f in self.failed}
        got = self.receiver.wait_for(ids, timeout=min(60.0, self.time_left()))
        if got != ids:
            self.problems.append(f"no alert reached the webhook for {len(ids - got)} session(s)")
        self.say(f"[green]✓[/] thumbs-down sent on {plural(len(ids), 'session')}; "
                 f"{plural(len(got), 'alert')} received on the webhook")
        if self.receiver.alerts:  # what the team's chat would show
            first = self.receiver.alerts[0]
            self.say(f"  alert: {escape(brief(str(first.get('text', '')).splitlines()[0], 110))}")
            self.say(f"         report: {escape(str(first.get('link')))}")

    # stage 5
    def wait_for_diagnosis(self) -> None:
        """A session's diagnosis is over when its analysis job (in the collector) and the
        replay job it queued (in the worker) have both ended."""
        ids = {f.session_id for f in self.failed}
        bar = self.progress.add_task("diagnosing (analysis, then replay)", total=len(ids))
        done: dict[str, dict] = {}
        while len(done) < len(ids):
            jobs = [j for j in self.access.list_jobs() if j["session_id"] in ids]
            for sid in ids - set(done):
                mine = {j["kind"]: j for j in jobs if j["session_id"] == sid}
                analysis, replay = mine.get("diagnosis"), mine.get("replay")
                if analysis and analysis["state"] in FINISHED_JOB_STATES and (
                        analysis["state"] != "done" or (replay and replay["state"] in FINISHED_JOB_STATES)):
                    done[sid] = replay if analysis["state"] == "done" else analysis
            self.progress.update(bar, completed=len(done))
            if len(done) < len(ids):
                if time.monotonic() > self.deadline:
                    raise StageFailed(f"diagnosis jobs still running after the time limit ({len(ids) - len(done)} left; "
                                      f"see {self.serve.log} and {self.worker.log})")
                for process in (self.serve, self.worker):
                    if process.popen.poll() is not None:
                        raise StageFailed(f"{process.name} exited during the diagnosis:\n{process.tail()}")
                time.sleep(0.5)
        for failed in self.failed:
            failed.job = done[failed.session_id]
            if failed.job.get("state") != "done":
                failed.problems.append(f"{failed.job['kind']} job {failed.job['state']}: {failed.job.get('error')}")
            failed.analysis = self.access.get_analysis(failed.session_id)
            failed.replay = self.access.get_replay(failed.session_id)
            if failed.analysis is None:
                failed.problems.append("no analysis stored")
            if failed.replay is None:
                failed.problems.append("no replay stored")
        ok = sum(1 for f in self.failed if not f.problems)
        self.say(f"[green]✓[/] {ok}/{len(self.failed)} diagnoses complete")

    # stage 6
    def write_reports(self) -> Path:
        from tracefix.report.index import render_index
        from tracefix.report.content.session import task_text
        from tracefix.report.cli import write_report

        self.out.mkdir(parents=True, exist_ok=True)
        entries = []
        for failed in self.failed:
            name = f"{failed.task_id}-{failed.session_id[:12]}.html"
            try:
                failed.report = write_report(self.access, failed.session_id, self.out / name)
            except Exception as exc:
                failed.problems.append(f"report failed: {type(exc).__name__}: {exc}")
            best = failed.best
            fault = failed.fault
            iv = (best or {}).get("intervention") or {}
            fix = f"{iv.get('category') or iv.get('kind')} at step {iv.get('step')}: {iv.get('text')}" if iv else ""
            entries.append({
                "href": name, "session_id": failed.session_id,
                "task": f"{failed.task_id}: {task_text(failed.doc)}", "top_step": failed.top_step,
                "verdict": best.get("verdict") if best else None, "fix": fix, "problems": failed.problems,
                "extra": {"injected fault (ground truth)": f"{fault['kind']} at step {fault['step']}" if fault else "—"},
            })
        ok = sum(1 for d in self.outcomes.values() if d.get("outcome") == "success")
        intro = (f"{len(self.outcomes)} banking tasks ran against the scripted LLM server (seed {self.seed}); "
                 f"{ok} succeeded and {len(self.failed)} failed through injected faults. The HGT model was trained "
                 f"on {self.trained_on} successful sessions; each failed session got a thumbs-down, which raised an "
                 "alert and a diagnosis (analysis, then replay with interventions). The injected fault comes from "
                 "the testbed's ground-truth file, shown here for comparison only.")
        index = self.out / "index.html"
        index.write_text(render_index(entries, title="tracefix demo: root-cause reports", intro=intro),
                         encoding="utf-8")
        return index


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)
