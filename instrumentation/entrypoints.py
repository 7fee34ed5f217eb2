"""Which recorded entrypoints a replay may import and call.

A session records its entrypoint (``"pkg.mod:function"`` or ``"pkg.mod:Class.method"``)
and JSON inputs in span attributes; anyone who can send spans to the collector can write
them. Replay re-executes that entrypoint, so the name is untrusted input (the app also
signs it: `tracefix.replay_signing`). It is imported only when an operator allowed it:
its module (``--allow-module PKG``) or the entrypoint itself (``--allow-entrypoint
pkg.mod:function``), given to ``tracefix worker`` and ``tracefix replay``. The checks, in order:

1. the name is well formed: a dotted module path, ``:``, a dotted attribute path, every
   part a Python identifier and no part private (``_x``) or special (``__x__``): neither
   ``pkg.mod:_helper`` nor ``pkg.__main__:x``, ``pkg._internal:x`` or ``pkg.__init__:x``
   (importing a ``__main__`` runs a program);
2. the entrypoint is one the operator listed, or its module is one of the allowed modules
   or inside one of them (``PKG`` allows ``PKG`` and ``PKG.sub.mod``, not ``PKGextra``);
3. after import, an entrypoint allowed through its module must be one the app marked as
   replayable under exactly that name: ``@tracefix.session`` marks the function it
   decorates (a method as ``pkg.mod:Class.method``), ``tracefix.replayable(fn)`` marks a
   function that opens its session with ``with tracefix.session(entrypoint=...)``. So a
   click command's callback, a name the module imported, a class or any other public
   attribute is refused: the mark is read from the object itself (a wrapper that copied a
   marked function's attributes carries that function's name, not its own).

Nothing here imports anything before checks 1 and 2 passed.
"""
from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, Iterable

from tracefix.errors import TracefixError

# Set on a function the app marked as replayable: the entrypoint name it may be replayed under.
MARK = "__tracefix_replayable__"


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
    module_parts, attr_parts = _identifiers(module), _identifiers(attrs)
    if module_parts is None or attr_parts is None:
        raise EntrypointRefused(f"entrypoint {entrypoint!r} is not of the form 'pkg.module:function'")
    if any(p.startswith("_") for p in module_parts):
        raise EntrypointRefused(f"entrypoint {entrypoint!r} names a private or special module ({module}); only "
                                "public modules are imported for a replay")
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


def normalize_entrypoints(allowed: Iterable[str] | None) -> tuple[str, ...]:
    """The entrypoints an operator listed, stripped; a malformed or private one raises
    EntrypointRefused (an operator's typo must not pass silently)."""
    out = []
    for name in allowed or ():
        name = (name or "").strip()
        if name:
            module_of(name)
            out.append(name)
    return tuple(out)


def _inside(module: str, allowed: tuple[str, ...]) -> bool:
    return any(module == a or module.startswith(a + ".") for a in allowed)


def check(entrypoint: str, allowed: Iterable[str] | None, entrypoints: Iterable[str] | None = ()) -> str:
    """Refuse (EntrypointRefused) unless the entrypoint was listed in `entrypoints` or its
    module is allowed; returns the module."""
    module = module_of(entrypoint)
    allowed = normalize_allowed(allowed)
    if entrypoint in normalize_entrypoints(entrypoints) or _inside(module, allowed):
        return module
    shown = ", ".join(allowed) if allowed else "none"
    raise EntrypointRefused(
        f"entrypoint {entrypoint!r} is outside the modules allowed to run here ({shown}); "
        f"an operator allows it with --allow-module {module.split('.')[0]} or --allow-entrypoint {entrypoint}")


def mark(fn: Callable, entrypoint: str) -> None:
    """Mark `fn` as replayable under `entrypoint` (a method: on its function)."""
    setattr(getattr(fn, "__func__", fn), MARK, entrypoint)


def marked_as(target: Any) -> str | None:
    """The entrypoint name `target` was marked replayable under, read without running any
    `__getattr__` of its own and without following `__wrapped__`."""
    fn = target.__func__ if inspect.ismethod(target) else target
    try:
        name = inspect.getattr_static(fn, MARK)
    except AttributeError:
        return None
    return name if isinstance(name, str) else None


def resolve(entrypoint: str, allowed: Iterable[str] | None, entrypoints: Iterable[str] | None = ()) -> Callable[..., Any]:
    """Import the allowed entrypoint and return the callable it names."""
    allowed = normalize_allowed(allowed)
    listed = entrypoint in normalize_entrypoints(entrypoints)
    module_name = check(entrypoint, allowed, entrypoints)
    target: Any = importlib.import_module(module_name)
    for part in entrypoint.split(":")[1].split("."):
        target = getattr(target, part)
    if not callable(target):
        raise EntrypointRefused(f"entrypoint {entrypoint!r} is not callable")
    if listed:  # the operator named this very entrypoint
        return target
    defined_in = getattr(getattr(target, "__wrapped__", target), "__module__", None)
    if not isinstance(defined_in, str) or not _inside(defined_in, allowed):
        raise EntrypointRefused(f"entrypoint {entrypoint!r} resolves to an object defined in {defined_in!r}, "
                                "outside the allowed modules")
    if marked_as(target) != entrypoint:
        raise EntrypointRefused(
            f"entrypoint {entrypoint!r} is not marked replayable by the app: only a function decorated with "
            "@tracefix.session, or registered with tracefix.replayable(fn), is replayed through its module; an "
            f"operator allows it with --allow-entrypoint {entrypoint}")
    return target
