"""When the writer waits for more batches before a transaction (collector/writer.py).

A transaction's fixed cost (~10 ms of CPU: its statements and commit) is 30 us a span when it
holds one 300-span request, and a few us when it holds five. So under a steady stream of
exports the writer waits for the next batch while one is due: the exports that arrive while
a transaction runs are a stream (and one that met others the time before still is), and the
next is due within twice the usual gap between batches. Once none came that long, the
exporters have nothing more under way (they wait for their own acknowledgements), and waiting
would only delay them. Not thread-safe: the writer calls it under its lock."""
from __future__ import annotations

GAP_WEIGHT = 0.3  # of the latest gap in the moving average: it follows the load within a few batches


class Arrivals:
    """`linger_s`: the longest the writer waits; an idle pause counts as a gap of twice that."""

    def __init__(self, linger_s: float):
        self.linger_s = linger_s
        self._since_take = 0  # batches submitted since the writer last took work
        self._streamed = False  # the last take met other arrivals too
        self._last: float | None = None  # time.monotonic() of the last batch submitted
        self._gap_s: float | None = None  # the usual gap between batches

    def arrived(self, now: float) -> None:
        if self._last is not None:
            gap = min(now - self._last, 2 * self.linger_s)
            self._gap_s = gap if self._gap_s is None else (1 - GAP_WEIGHT) * self._gap_s + GAP_WEIGHT * gap
        self._last = now
        self._since_take += 1

    def streaming(self) -> bool:
        """Told as the writer takes a batch: whether others arrived while the last transaction
        ran, this time or the time before."""
        now = self._since_take > 1
        streaming, self._streamed, self._since_take = self._streamed or now, now, 0
        return streaming

    def next_due(self, otherwise: float) -> float:
        """By when the next batch should have arrived (`otherwise` before two have)."""
        if self._last is None or self._gap_s is None:
            return otherwise
        return self._last + 2 * self._gap_s
