"""Python's cycle collector paused while a read or an analysis makes many objects at once.

A read that makes hundreds of thousands of short-lived, acyclic objects (a 10,000-step
session's outline, one session's scoring) sets off collections that walk every object of the
process, and free none of them: reference counting frees them. Paused, the garbage cycles
they do make are freed by the first collection after.
"""
from __future__ import annotations

import functools
import gc
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_pauses_lock = threading.Lock()
_pauses = 0
_collector_was_enabled = False


@contextmanager
def cycle_collection_paused() -> Iterator[None]:
    """Python's cycle collector off inside (re-entrant, thread-safe).

    Scoring a 1,000-step session allocates enough objects to set off a full (generation 2)
    collection in about every other analysis, and a full collection walks every object of
    the process: with torch and scikit-learn loaded that is about 400,000 objects and 0.2 s
    (bench/analysis_latency.py times both ways). The cyclic garbage scoring makes (about
    50,000 objects there) is freed by the first collection after it; reference counting
    frees everything else as usual, and an application that turned the collector off
    itself keeps it off."""
    global _pauses, _collector_was_enabled
    with _pauses_lock:
        if _pauses == 0:
            _collector_was_enabled = gc.isenabled()
            gc.disable()
        _pauses += 1
    try:
        yield
    finally:
        with _pauses_lock:
            _pauses -= 1
            if _pauses == 0 and _collector_was_enabled:
                gc.enable()


def with_cycle_collection_paused(fn: Callable[P, R]) -> Callable[P, R]:
    """`fn` run with the cycle collector paused (`cycle_collection_paused`): what it makes and
    drops is freed by reference counting before the collector runs again, so a collection
    does not walk it in passing (nor promote it, to be walked again by a full collection)."""
    @functools.wraps(fn)
    def paused(*args: P.args, **kwargs: P.kwargs) -> R:
        with cycle_collection_paused():
            return fn(*args, **kwargs)
    return paused
