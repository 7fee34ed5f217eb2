"""The replay tests' shared processes, as one object, and a look at the sim's counters."""
from __future__ import annotations

import json
import os
import urllib.request
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Lab:
    serve_url: str
    follow_url: str  # sim whose model always follows a CORRECTION naming the fault's target
    ignore_url: str  # same fault plan, never follows
    session_id: str  # the recorded failed session
    fault_step: int  # from the sim's ground-truth file (the product never reads it)
    ground_truth: Path
    workdir: Path
    replay_key: str  # the app signed the session with it (tracefix.replay_signing)

    @property
    def env(self) -> dict:
        """The environment of a `tracefix replay` or worker that holds the app's replay key."""
        return {**os.environ, "TRACEFIX_REPLAY_KEY": self.replay_key}

    def access(self):
        from tracefix.collector.access import connect

        return connect(server=self.serve_url)


def sim_requests(base_url: str, session: str) -> int:
    root = base_url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(root + "/_sim/stats", timeout=5) as r:
        return json.load(r)["by_session"].get(session, 0)
