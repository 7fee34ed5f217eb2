"""In-process scripted LLM servers for the demo tests (one per fault configuration)."""
from __future__ import annotations

import contextlib

from tracefix.demo.faults import FaultConfig
from tracefix.demo.sim import SimConfig, SimServer


@contextlib.contextmanager
def running_sim(**faults):
    """A started SimServer with transcripts on; `faults` are FaultConfig fields."""
    server = SimServer(SimConfig(seed=faults.pop("seed", 0), faults=FaultConfig(**faults),
                                 record_transcripts=True))
    server.start()
    try:
        yield server
    finally:
        server.stop()
