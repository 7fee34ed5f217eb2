"""The framework patches: installed when the framework is imported, undone by shutdown(),
and stepping aside for another instrumentation of the same framework (real packages)."""
from __future__ import annotations

import importlib

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracefix
from tracefix import frameworks

pytest.importorskip("agents")
pytest.importorskip("langgraph")
pytest.importorskip("autogen")


def _targets():
    for target in frameworks.FRAMEWORKS.values():
        module_name, fn = target.split(":")
        for module, path, _ in getattr(importlib.import_module(f"tracefix.{module_name}"), fn)():
            owner = importlib.import_module(module)
            *parents, attr = path.split(".")
            for name in parents:
                owner = getattr(owner, name)
            yield path, owner, attr


def _is_wrapped(owner, attr) -> bool:
    return hasattr(vars(owner).get(attr), "__wrapped__")


def test_every_framework_patch_is_applied_at_init_and_undone_at_shutdown():
    import agents  # noqa: F401
    import autogen  # noqa: F401
    import langchain_core.tools  # noqa: F401
    import langgraph.pregel  # noqa: F401

    targets = list(_targets())
    assert len(targets) == 16 and not any(_is_wrapped(o, a) for _, o, a in targets)
    handle = tracefix.init(span_processor=SimpleSpanProcessor(InMemorySpanExporter()))
    try:
        assert [p for p, o, a in targets if not _is_wrapped(o, a)] == []
    finally:
        handle.shutdown()
    assert [p for p, o, a in targets if _is_wrapped(o, a)] == []


def test_a_langchain_tool_run_is_an_execute_tool_span_unless_openinference_traces_langchain(spans, monkeypatch):
    from langchain_core.tools import tool

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    assert add.invoke({"a": 1, "b": 2}) == 3
    [span] = [s for s in spans.get_finished_spans() if s.name == "execute_tool add"]
    assert span.attributes["gen_ai.tool.call.arguments"] == '{"a":1,"b":2}'
    assert span.attributes["gen_ai.tool.call.result"] == "3" and span.attributes["tracefix.framework"] == "langchain"

    # another instrumentation of LangChain is on: it records the tool, tracefix does not
    monkeypatch.setitem(frameworks.OTHER_FRAMEWORK_INSTRUMENTORS, "langgraph",
                        (("tests_fake_openinference", "LangChainInstrumentor", "OpenInference"),))
    import sys
    import types

    module = types.ModuleType("tests_fake_openinference")

    class LangChainInstrumentor:
        _is_instrumented_by_opentelemetry = True

    LangChainInstrumentor._instance = LangChainInstrumentor()
    module.LangChainInstrumentor = LangChainInstrumentor
    monkeypatch.setitem(sys.modules, "tests_fake_openinference", module)
    spans.clear()
    assert add.invoke({"a": 2, "b": 2}) == 4
    assert [s.name for s in spans.get_finished_spans()] == []
