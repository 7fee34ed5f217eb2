"""tracefix's public API as the banking app uses it, with no-op stand-ins for names the
instrumentation does not provide yet (it is written in parallel). Remove a stand-in once the
real name has landed; the app itself only ever calls the real API through this module.
"""
from __future__ import annotations

import contextlib
import os
from typing import Any, Callable

try:
    import tracefix as _tf
except Exception:  # instrumentation mid-edit: the demo must still run untraced
    _tf = None


def _real(name: str) -> Any:
    return getattr(_tf, name, None) if _tf is not None else None


def _identity_decorator(fn: Callable | None = None, **_: Any):
    if fn is None:
        return lambda f: f
    return fn


session = _real("session") or _identity_decorator
tool = _real("tool") or _identity_decorator
agent = _real("agent") or (lambda name: contextlib.nullcontext())
track = _real("track") or (lambda key, obj: obj)
evaluator = _real("evaluator") or (lambda entrypoint: (lambda fn: fn))
current_session_id = _real("current_session_id") or (lambda: None)
replay_active = _real("replay_active") or (lambda: bool(os.environ.get("TRACEFIX_REPLAY")))
init = _real("init")
