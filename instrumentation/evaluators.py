"""Evaluators: functions that judge a finished session of a given entrypoint (contracts §4).

An evaluator registered for "pkg.mod:function" runs in-process when a session with that
entrypoint ends: ``fn(inputs, output, tracked) -> bool | float | dict``. Its result becomes
the session's outcome and score, and, whole, its evaluation.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

_registry: dict[str, Callable] = {}

SUCCESS_THRESHOLD = 0.5  # a bare float score counts as success from this value up


def entrypoint_of(fn: Callable) -> str:
    """"module:qualname" of `fn`, by a name a replay can import again: a function of the
    script run as `python app.py` (module `__main__`) is "app:fn" (see importable_main_name)."""
    fn = getattr(fn, "__wrapped__", fn)
    module = fn.__module__
    if module == "__main__":
        module = importable_main_name() or module
    return f"{module}:{fn.__qualname__}"


def importable_main_name() -> str | None:
    """The module name under which the program's `__main__` can be imported again: its
    spec's name (`python -m pkg.app`), else its file's stem (`python app.py`: the script's
    folder is then the first entry of sys.path, as the replay's working folder is). None
    for an interactive session or stdin. Importing it again does not run what sits under
    `if __name__ == "__main__":`."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        return spec.name
    path = getattr(main, "__file__", None)
    stem = Path(path).stem if path else ""
    return stem if stem.isidentifier() else None


def evaluator(entrypoint: str | Callable) -> Callable[[Callable], Callable]:
    """Register the decorated function as the evaluator of `entrypoint` ("pkg.mod:function"
    or the entrypoint function itself)."""
    key = entrypoint if isinstance(entrypoint, str) else entrypoint_of(entrypoint)
    if ":" not in key:
        raise ValueError(f"tracefix.evaluator: entrypoint must look like 'pkg.module:function', got {key!r}")

    def register(fn: Callable) -> Callable:
        _registry[key] = fn
        return fn

    return register


def get_evaluator(entrypoint: str | None) -> Callable | None:
    return _registry.get(entrypoint) if entrypoint else None


def normalize_result(result: Any) -> dict:
    """bool / number / dict -> {"success": bool, "score": float, ...} (dict keys kept whole)."""
    if isinstance(result, bool):
        return {"success": result, "score": 1.0 if result else 0.0}
    if isinstance(result, (int, float)):
        return {"success": float(result) >= SUCCESS_THRESHOLD, "score": float(result)}
    if isinstance(result, dict):
        evaluation = dict(result)
        if "success" not in evaluation and "score" in evaluation:
            evaluation["success"] = float(evaluation["score"]) >= SUCCESS_THRESHOLD
        evaluation["success"] = bool(evaluation.get("success"))
        evaluation.setdefault("score", 1.0 if evaluation["success"] else 0.0)
        evaluation["score"] = float(evaluation["score"])
        return evaluation
    raise TypeError(f"an evaluator must return bool, float or dict, got {type(result).__name__}")
