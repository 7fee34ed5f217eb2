"""An exact set of signed 64-bit keys at about 8 bytes per key: which messages are stored.

The messages table is content-addressed by a 64-bit key. DuckDB 1.5 rewrites a table's
whole primary-key index (ART) at every checkpoint: with 3M stored messages each checkpoint
took 0.6 s, against 2 ms without the index, and a busy collector checkpoints every 16 MB of
WAL. So the writer keeps the stored keys itself: a sorted numpy array, plus a Python set of
keys added since, folded into the array when it grows. A Python set of all keys would cost
~70 bytes per key instead of 8.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

FOLD_AT = 1 << 16  # recent keys kept in the set before they join the sorted array


class KeySet:
    def __init__(self, keys: np.ndarray | None = None):
        self._sorted = np.unique(np.asarray(keys if keys is not None else [], dtype=np.int64))
        self._recent: set[int] = set()

    def __len__(self) -> int:
        return len(self._sorted) + len(self._recent)

    def __contains__(self, key: int) -> bool:
        return not self.missing([key])

    def missing(self, keys: list[int]) -> list[int]:
        """The keys (in their order) not in the set."""
        if not keys:
            return []
        if len(self._sorted):
            wanted = np.fromiter(keys, dtype=np.int64, count=len(keys))
            at = np.searchsorted(self._sorted, wanted)
            at[at == len(self._sorted)] = 0  # past the end: compare with any element, it differs
            stored = self._sorted[at] == wanted
            return [k for k, hit in zip(keys, stored.tolist()) if not hit and k not in self._recent]
        return [k for k in keys if k not in self._recent]

    def add(self, keys: Iterable[int]) -> None:
        self._recent.update(keys)
        if len(self._recent) >= FOLD_AT:
            recent = np.fromiter(self._recent, dtype=np.int64, count=len(self._recent))
            self._sorted = np.union1d(self._sorted, recent)
            self._recent.clear()
