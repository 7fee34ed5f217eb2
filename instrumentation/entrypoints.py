"""Which recorded entrypoints a replay may import and call.

A session records its entrypoint (``"pkg.mod:function"`` or ``"pkg.mod:Class.method"``)
and JSON inputs in span attributes; anyone who can send spans to the collector can write
them. Replay re-executes that entrypoint, so the name is untrusted input: it is imported
only when an operator allowed its module (``tracefix worker --allow-module PKG``,
``tracefix replay --allow-module PKG``). The checks, in order:

1. the name is well formed: a dotted module path, ``:``, a dotted attribute path, every
   part a Python identifier and no attribute part private (``_x``) or special (``__x__``);
2. the module is one of the allowed modules or inside one of them (``PKG`` allows
   ``PKG`` and ``PKG.sub.mod``, not ``PKGextra``);
3. after import, the object found must be defined in an allowed module (``__module__``):
   ``myapp:system`` where ``myapp`` did ``from os import system`` is refused.

Nothing here imports anything before checks 1 and 2 passed.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable, Iterable

from tracefix.errors import TracefixError


class EntrypointRefused(TracefixError, PermissionError):
    """The entrypoint may not be run here; the message says why and how to allow it."""


def _identifiers(dotted: str) -> list[str] | None:
    parts = dotted.split(".")
    return parts if all(p.isidentifier() for p in parts) else None


def module_of(entrypoint: str) -> str:
    """The module part of a well-formed entrypoint (raises EntrypointRefused otherwise)."""
    if not isinstance(entrypoint, str) or entrypoint.count(":") != 1:
        raise EntrypointRefused(f"entrypoint {entrypoint!r} is not of the form 'pkg.module:function'")
    module, attrs = entrypoint.split(":")
    attr_parts = _identifiers(attrs)
    if _identifiers(module) is None or attr_parts is None:
        raise EntrypointRefused(f"entrypoint {entrypoint!r} is not of the form 'pkg.module:function'")
    if any(p.startswith("_") for p in attr_parts):
        raise EntrypointRefused(f"entrypoint {entrypoint!r} names a private attribute; only public functions "
                                "are replayed")
    return module


def normalize_allowed(allowed: Iterable[str] | None) -> tuple[str, ...]:
    """The allowed module names, stripped, empties and malformed names dropped."""
    out = []
    for name in allowed or ():
        name = (name or "").strip()
        if name and _identifiers(name) is not None:
            out.append(name)
    return tuple(out)


def _inside(module: str, allowed: tuple[str, ...]) -> bool:
    return any(module == a or module.startswith(a + ".") for a in allowed)


def check(entrypoint: str, allowed: Iterable[str] | None) -> str:
    """Refuse (EntrypointRefused) unless the entrypoint's module is allowed; returns the module."""
    module = module_of(entrypoint)
    allowed = normalize_allowed(allowed)
    if not _inside(module, allowed):
        shown = ", ".join(allowed) if allowed else "none"
        raise EntrypointRefused(
            f"entrypoint {entrypoint!r} is outside the modules allowed to run here ({shown}); "
            f"an operator allows it with --allow-module {module.split('.')[0]}")
    return module


def resolve(entrypoint: str, allowed: Iterable[str] | None) -> Callable[..., Any]:
    """Import the allowed entrypoint and return the callable it names."""
    allowed = normalize_allowed(allowed)
    module_name = check(entrypoint, allowed)
    target: Any = importlib.import_module(module_name)
    for part in entrypoint.split(":")[1].split("."):
        target = getattr(target, part)
    defined_in = getattr(getattr(target, "__wrapped__", target), "__module__", None)
    if not isinstance(defined_in, str) or not _inside(defined_in, allowed):
        raise EntrypointRefused(f"entrypoint {entrypoint!r} resolves to an object defined in {defined_in!r}, "
                                "outside the allowed modules")
    if not callable(target):
        raise EntrypointRefused(f"entrypoint {entrypoint!r} is not callable")
    return target
