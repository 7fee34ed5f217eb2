"""`TracefixInstrumentor`: patches the LLM SDKs with wrapt, and puts them back.

`_instrument` and `_uninstrument` walk the same table, so what one wraps the other
unwraps. SDKs that are not installed are skipped. This is also the
``opentelemetry_instrumentor`` entry point: ``opentelemetry-instrument python app.py``
traces the app's OpenAI/Anthropic calls with no code change. Calls that OpenInference or
OpenLLMetry trace too are left to them (`tracefix.other_instrumentors`). Agent frameworks
(openai-agents, LangGraph/LangChain, AG2) get their agents and tools traced the same way,
each when it is imported (`tracefix.frameworks`).
"""
from __future__ import annotations

import importlib
import sys
from typing import Any, Collection

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

from .attributes import logger

# (module, "Class.method", adapter "module:Class", wrapper factory "module:function")
_SYNC, _ASYNC = "llm:wrap_sync", "llm:wrap_async"
_TARGETS: tuple[tuple[str, str, str, str], ...] = (
    ("openai.resources.chat.completions", "Completions.create", "openai_chat:OpenAIChat", _SYNC),
    ("openai.resources.chat.completions", "AsyncCompletions.create", "openai_chat:OpenAIChat", _ASYNC),
    ("openai.resources.chat.completions", "Completions.parse", "openai_chat:OpenAIChatParse", _SYNC),
    ("openai.resources.chat.completions", "AsyncCompletions.parse", "openai_chat:OpenAIChatParse", _ASYNC),
    ("openai.resources.responses", "Responses.create", "openai_responses:OpenAIResponses", _SYNC),
    ("openai.resources.responses", "AsyncResponses.create", "openai_responses:OpenAIResponses", _ASYNC),
    ("anthropic.resources.messages", "Messages.create", "anthropic_messages:AnthropicMessages", _SYNC),
    ("anthropic.resources.messages", "AsyncMessages.create", "anthropic_messages:AnthropicMessages", _ASYNC),
    # the stream helper posts on its own, not through create (tracefix.anthropic_message_stream)
    ("anthropic.resources.messages", "Messages.stream", "anthropic_messages:AnthropicMessages",
     "anthropic_message_stream:wrap_message_stream"),
    ("anthropic.resources.messages", "AsyncMessages.stream", "anthropic_messages:AnthropicMessages",
     "anthropic_message_stream:wrap_async_message_stream"),
)


def hooked_modules() -> list[tuple[str, str]]:
    """(library module, tracefix module that patches it) for every SDK and framework traced
    here: what a replay zygote (tracefix.replay.zygote) imports ahead for an agent using it."""
    from .frameworks import FRAMEWORKS

    targets = [(module, part) for module, _, adapter, factory in _TARGETS for part in (adapter, factory)]
    targets += list(FRAMEWORKS.items())
    return sorted({(module, f"tracefix.{target.split(':')[0]}") for module, target in targets})


def resolve_patch_targets() -> int:
    """Look up every SDK attribute the patches wrap, in the SDK modules already imported, so
    that what an SDK loads lazily on first access (openai's ``Responses``) is loaded now: a
    replay zygote does this once before it forks. Patches nothing; the number found."""
    found = 0
    for module_name, path, *_ in _TARGETS:
        if module_name in sys.modules and _owner(module_name, path) is not None:
            found += 1
    return found


def _adapter(target: str) -> Any:
    module_name, cls = target.split(":")
    return getattr(importlib.import_module(f"tracefix.{module_name}"), cls)()


def _adapter_function(target: str) -> Any:
    module_name, name = target.split(":")
    return getattr(importlib.import_module(f"tracefix.{module_name}"), name)


def _owner(module_name: str, path: str) -> tuple[Any, str] | None:
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError:
        return None
    *parents, attr = path.split(".")
    for name in parents:
        obj = getattr(obj, name, None)
        if obj is None:
            return None
    return (obj, attr) if hasattr(obj, attr) else None


def _sdk_provider_configured() -> bool:
    from opentelemetry import trace

    return type(trace.get_tracer_provider()).__name__ != "ProxyTracerProvider"


class TracefixInstrumentor(BaseInstrumentor):
    """Traces openai (chat.completions, responses; sync, async, streams) and anthropic
    (messages) calls as GenAI spans, with tracefix sessions, steps and replay."""

    def instrumentation_dependencies(self) -> Collection[str]:
        return ()  # each SDK is optional; the ones not installed are skipped

    def _instrument(self, **kwargs: Any) -> None:
        import wrapt

        from . import runtime

        provider = kwargs.get("tracer_provider")
        if provider is not None and runtime._tracer is None:
            from .version import __version__

            runtime.set_tracer(provider.get_tracer("tracefix", __version__))
        elif provider is None and runtime._tracer is None and not _sdk_provider_configured():
            # `opentelemetry-instrument` without a distro configures no SDK provider:
            # export the way tracefix.init() would (OTEL_EXPORTER_OTLP_* decide where);
            # no instrumentor given: this one is patching already
            from .configure import start_tracing

            start_tracing()
        elif provider is None and runtime._tracer is None:
            # a distro configured the SDK: secrets still must not leave through its exporters
            from opentelemetry import trace

            from .configure import redact_existing_processors
            from .redaction import RedactionChain

            redact_existing_processors(trace.get_tracer_provider(), RedactionChain())
        self._wrapped: list[tuple[Any, str, Any]] = []
        self._generation = generation = getattr(self, "_generation", 0) + 1
        # Patch each SDK when it is imported (now, if it already is): importing anthropic
        # just to patch it would cost the app a second at init for an SDK it may not use.
        for package in sorted({module.split(".")[0] for module, *_ in _TARGETS}):
            def on_import(_module: Any, package: str = package) -> None:
                if self._generation == generation:
                    self._patch(package)
            wrapt.register_post_import_hook(on_import, package)
        from .frameworks import FRAMEWORKS

        for hook_module, target in FRAMEWORKS.items():
            def on_framework_import(_module: Any, target: str = target) -> None:
                if self._generation == generation:
                    self._patch_framework(target)
            wrapt.register_post_import_hook(on_framework_import, hook_module)

    def _patch_framework(self, target: str) -> None:
        from wrapt import wrap_function_wrapper

        try:
            patches = _adapter_function(target)()
        except Exception:
            logger.warning("tracefix: could not load the framework patches %s", target, exc_info=True)
            return
        for module_name, path, wrapper in patches:
            owner = _owner(module_name, path)
            if owner is None:  # another version of the framework: that part stays untraced
                logger.info("tracefix: %s.%s not found; not traced", module_name, path)
                continue
            if any(o is owner[0] and a == owner[1] for o, a, _ in self._wrapped):
                continue
            try:
                wrap_function_wrapper(owner[0], owner[1], wrapper)
                self._wrapped.append((owner[0], owner[1], wrapper))
            except Exception:
                logger.warning("tracefix: could not patch %s.%s", module_name, path, exc_info=True)

    def _patch(self, package: str) -> None:
        from wrapt import wrap_function_wrapper

        from .other_instrumentors import deferring

        for module_name, path, adapter_target, factory in _TARGETS:
            if module_name.split(".")[0] != package:
                continue
            owner = _owner(module_name, path)
            if owner is None or any(o is owner[0] and a == owner[1] for o, a, _ in self._wrapped):
                continue
            try:
                adapter = _adapter(adapter_target)
                # steps aside while OpenInference/OpenLLMetry trace the same call (no double spans)
                wrapper = deferring(package, _adapter_function(factory)(adapter))
                wrap_function_wrapper(owner[0], owner[1], wrapper)
                self._wrapped.append((owner[0], owner[1], wrapper))
            except Exception:
                logger.warning("tracefix: could not patch %s.%s", module_name, path, exc_info=True)

    def _uninstrument(self, **kwargs: Any) -> None:
        self._generation = getattr(self, "_generation", 0) + 1  # pending import hooks do nothing now
        for obj, attr, wrapper in reversed(getattr(self, "_wrapped", [])):
            current = vars(obj).get(attr)
            if getattr(current, "_self_wrapper", None) is wrapper:
                setattr(obj, attr, current.__wrapped__)
            else:  # someone wrapped on top of us: leave their wrapper in place
                logger.warning("tracefix: %s.%s was re-wrapped by another instrumentation; "
                               "tracefix's wrapper stays inside it", getattr(obj, "__name__", obj), attr)
        self._wrapped = []
