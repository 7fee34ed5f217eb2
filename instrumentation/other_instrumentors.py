"""Other GenAI instrumentations of the SDKs tracefix patches: tracefix steps aside for them.

OpenInference and OpenLLMetry trace the same openai/anthropic calls tracefix does; with
both active (``opentelemetry-instrument`` loads every installed instrumentor, or an app
instruments with one and calls ``tracefix.init()`` too) each call would be recorded twice.
So tracefix's wrapper asks, at every call, whether one of them is instrumented right now
(their ``BaseInstrumentor`` singleton's state) and if so only passes the call through: the
other instrumentation records it, once. Asking at call time makes the load order
irrelevant (under ``opentelemetry-instrument`` tracefix's entry point may load first) and
follows an ``uninstrument()`` of the other one.

What is lost when tracefix steps aside: its own LLM spans (steps, request fingerprints,
full responses), so a session with such calls cannot be replayed and is marked so.
``TRACEFIX_DEFER_TO_OTHER_INSTRUMENTORS=0`` makes tracefix record them too (twice, then);
a replay (``TRACEFIX_REPLAY``) always goes through tracefix, which serves its recordings.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

from . import runtime
from .attributes import logger, warn_once

# package tracefix patches -> (module, instrumentor class, who) of the instrumentations
# that trace the same calls; a module not imported yet cannot have instrumented anything
OTHER_GENAI_INSTRUMENTORS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "openai": (("openinference.instrumentation.openai", "OpenAIInstrumentor", "OpenInference"),
               ("opentelemetry.instrumentation.openai", "OpenAIInstrumentor", "OpenLLMetry")),
    "anthropic": (("openinference.instrumentation.anthropic", "AnthropicInstrumentor", "OpenInference"),
                  ("opentelemetry.instrumentation.anthropic", "AnthropicInstrumentor", "OpenLLMetry")),
}
DEFER_ENV = "TRACEFIX_DEFER_TO_OTHER_INSTRUMENTORS"


def active_other_instrumentor(package: str, table: dict | None = None) -> str | None:
    """Who else traces `package`'s calls right now ("OpenInference", "OpenLLMetry"), or None.
    `table`: another {package: instrumentors} table (the framework patches have their own)."""
    for module_name, class_name, who in (OTHER_GENAI_INSTRUMENTORS if table is None else table).get(package, ()):
        module = sys.modules.get(module_name)
        if module is None:
            continue
        cls = getattr(module, class_name, None)
        # BaseInstrumentor is a per-class singleton: its one instance says whether it is on
        instance = vars(cls).get("_instance") if isinstance(cls, type) else None
        if instance is not None and getattr(instance, "_is_instrumented_by_opentelemetry", False):
            return who
    return None


def _steps_aside(package: str) -> bool:
    if runtime.replay is not None:  # a replay needs tracefix to serve its recorded responses
        return False
    who = active_other_instrumentor(package)
    if who is None:
        return False
    warn_once(f"defer:{package}", "tracefix: %s calls are already traced by %s; tracefix leaves them to it "
              "(recorded once; sessions with such calls are not replayable). Set %s=0 to record them with "
              "tracefix too.", package, who, DEFER_ENV)
    from .context import current_session

    session = current_session()
    if session is not None:
        session.replayable = False
    return True


def deferring(package: str, traced: Callable) -> Callable:
    """`traced` (a wrapt wrapper), passing the call straight through while another
    instrumentation traces `package`, unless TRACEFIX_DEFER_TO_OTHER_INSTRUMENTORS=0."""
    if not runtime.env_flag(DEFER_ENV, True):
        return traced

    def tracefix_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        try:
            aside = _steps_aside(package)
        except Exception:  # never let the check break the call: trace it as usual
            logger.debug("tracefix: could not check for other instrumentations", exc_info=True)
            aside = False
        if aside:
            return wrapped(*args, **kwargs)  # a coroutine for async methods: the caller awaits it
        return traced(wrapped, instance, args, kwargs)

    return tracefix_wrapper
