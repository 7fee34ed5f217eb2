"""When the writer waits for more batches before a transaction (collector/writer.py).

A transaction's fixed cost (~9 ms of CPU: its statements and commit) is 30 us a span when it
holds one 300-span request, and a few us when it holds five. So the writer waits for more, but
only for batches it knows are coming: the receivers (and the spool's drain) count an export
from the moment its body is read until its batch is in the writer's queue (`expecting`), and
while one of them is still decoding the writer waits for it, up to its `linger_s`. Once every
export admitted is in the transaction it commits at once: an export held through a linger
keeps its receiver slot (gRPC's cap), and waiting on a timer for requests that were not under
way (a 50 ms linger) made a burst over the cap run out of retries. For the same reason it does
not wait at all for a while after an export was turned away (at the gRPC cap, or a full
queue): the refused exporters retry into the slots and room that acknowledgements free.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

REFUSED_QUIET_S = 1.0  # no waiting this long after an export was turned away (two retries at the shortest delay)


class Arrivals:
    """`cond`: the writer's condition (its lock guards the count; the writer waits on it)."""

    def __init__(self, cond: threading.Condition):
        self._cond = cond
        self.decoding = 0  # exports admitted whose batches are not in the writer's queue yet
        self._refused_at = -REFUSED_QUIET_S  # time.monotonic() of the last export turned away

    @contextmanager
    def expecting(self) -> Iterator[None]:
        """Around what turns one admitted export into a batch and submits it: while it runs,
        the writer waits for the batch rather than commit without it."""
        with self._cond:
            self.decoding += 1
        try:
            yield
        finally:
            with self._cond:
                self.decoding -= 1
                if not self.decoding:  # the writer may be waiting for this one (it failed, or was spooled)
                    self._cond.notify()

    def refused(self) -> None:
        """An export was turned away, told to retry."""
        self._refused_at = time.monotonic()

    def worth_waiting(self) -> bool:
        """Whether the writer should wait for a batch still decoding (under the writer's lock)."""
        return self.decoding > 0 and time.monotonic() - self._refused_at > REFUSED_QUIET_S
