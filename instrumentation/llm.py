"""One intercepted LLM call: numbering, replay decision, span, response recording.

Provider specifics (request shape, response shape, stream chunks, SDK types) live in the
adapters (`openai_chat`, `openai_responses`, `anthropic_messages`); this module is the part
they share, so a chat completion, a Responses call and an Anthropic message are traced,
linked and replayed the same way.
"""
from __future__ import annotations

import functools
import inspect
import typing
import urllib.parse

from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from . import clean_attributes, message_parts, runtime, semconv as sc
from .attributes import canonical_plain_json, dumps, warn_once
from .context import _global_tracked, current_agent, current_session
from .fingerprints import canonical_normalized_json, fingerprint_from_json
from .raw_responses import as_raw_response
from .spans import add_snapshot_event, bounded, common_attributes

# request kwargs that get their own GenAI attribute besides tracefix.request.params
_REQUEST_ATTRIBUTES = {
    "temperature": sc.GEN_AI_REQUEST_TEMPERATURE,
    "max_tokens": sc.GEN_AI_REQUEST_MAX_TOKENS,
    "max_completion_tokens": sc.GEN_AI_REQUEST_MAX_TOKENS,
    "max_output_tokens": sc.GEN_AI_REQUEST_MAX_TOKENS,
    "top_p": sc.GEN_AI_REQUEST_TOP_P,
    "seed": sc.GEN_AI_REQUEST_SEED,
}


@dataclass
class Request:
    """What an adapter reads from the call's kwargs; messages already normalized."""
    model: str | None
    messages: list
    tools: list  # as given or normalized (`fingerprints.canonical_normalized_json` gives the same of both)
    params: dict
    stream: bool = False
    # the leading system message came from a parameter of its own (Anthropic's `system`, a
    # Response's `instructions`): written as gen_ai.system_instructions, not as a message
    separate_system: bool = False


@dataclass
class Summary:
    """What an adapter reads from a response (a raw dict, whatever way it arrived)."""
    response_model: str | None = None
    response_id: str | None = None
    finish_reasons: list[str] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    output_messages: list = field(default_factory=list)
    tool_calls: list[tuple[str, str, Any]] = field(default_factory=list)  # (id, name, arguments as written)


def parsed(result: Any) -> Any:
    """The response model of a call made through `.with_raw_response` (an APIResponse whose
    parse() is cached by the SDK), else the result itself."""
    if not hasattr(result, "model_dump") and callable(getattr(result, "parse", None)):
        return result.parse()
    return result


def rehydrate_model(model_cls: Any, raw: dict) -> Any:
    """`raw` as the SDK's own type: validated when it validates, else built leniently the
    way the SDK builds live responses (a field a newer SDK requires must not break replay)."""
    try:
        return model_cls.model_validate(raw)
    except Exception:
        return model_cls.construct(**raw)


@functools.lru_cache(maxsize=None)
def _type_adapter(union: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(union)


def rehydrate_union(union: Any, raw: dict) -> Any:
    """`raw` as the member of the SDK's discriminated union (a stream event) it names; built
    leniently when it does not validate, as `rehydrate_model` does."""
    try:
        return _type_adapter(union).validate_python(raw)
    except Exception:
        from pydantic import BaseModel

        for member in typing.get_args(typing.get_args(union)[0] if typing.get_origin(union) is typing.Annotated
                                      else union):
            field = getattr(member, "model_fields", {}).get("type")
            if isinstance(member, type) and issubclass(member, BaseModel) and field is not None \
                    and raw.get("type") in typing.get_args(field.annotation):
                return member.construct(**raw)
        raise


def is_given(value: Any) -> bool:
    return value is not None and type(value).__name__ not in ("NotGiven", "Omit")


def request_params(kwargs: dict, consumed: tuple[str, ...]) -> dict:
    """The remaining request kwargs (temperature, tool_choice, ...) as JSON-able values."""
    return {k: v for k, v in kwargs.items() if k not in consumed and is_given(v)}


class LLMCall:
    def __init__(self, adapter: Any, kwargs: dict, client: Any = None):
        self.adapter = adapter
        self.kwargs = kwargs
        self.session = session = current_session()
        self.agent = agent = current_agent()
        self.ended = False
        request = adapter.parse_request(kwargs)
        self.request = request
        capture = runtime.settings.capture_content
        # the normalized messages are plain JSON: orjson writes their canonical text where it can
        messages_json = canonical_plain_json(request.messages)
        tools_json = canonical_normalized_json(request.tools)
        self.fingerprint = fingerprint_from_json(request.model, messages_json, tools_json)
        self.step = session.begin_step() if session is not None else None
        self.decision = None
        controller = runtime.replay
        if controller is not None and session is not None and controller.owns(session):
            self.decision = controller.on_llm_call(session, self.step, self.fingerprint, agent, request.messages)
            if self.decision.extra_messages:
                self.kwargs = adapter.add_messages(kwargs, self.decision.extra_messages)
                request = self.request = adapter.parse_request(self.kwargs)
        # every value is set (no None), so the span takes the dict as it is (spans.bounded)
        attrs: dict[str, Any] = common_attributes(session, agent, self.step)
        attrs[sc.GEN_AI_OPERATION_NAME] = adapter.operation
        attrs[sc.GEN_AI_PROVIDER_NAME] = adapter.provider
        if request.model is not None:
            attrs[sc.GEN_AI_REQUEST_MODEL] = request.model
        if session is not None:
            attrs[sc.CALL_SEQ] = session.next_seq()
        attrs[sc.REQUEST_FINGERPRINT] = self.fingerprint
        if request.stream:
            attrs[sc.STREAM] = True
        params = request.params
        if params:
            for key, name in _REQUEST_ATTRIBUTES.items():
                value = params.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    attrs[name] = value
        server = server_of(client)
        if server is not None:
            attrs[sc.SERVER_ADDRESS], attrs[sc.SERVER_PORT] = server
        if capture:
            system, messages = message_parts.input_messages(request.messages, request.separate_system)
            attrs[sc.GEN_AI_INPUT_MESSAGES] = dumps(messages)
            if system:
                attrs[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = dumps(system)
            if request.tools:
                attrs[sc.GEN_AI_TOOL_DEFINITIONS] = tools_json
            if params:
                attrs[sc.REQUEST_PARAMS] = dumps(params)
        if self.decision is not None:
            attrs[sc.REPLAY_SOURCE] = self.decision.source
            if self.decision.divergence is not None:
                attrs[sc.DIVERGENCE] = dumps(self.decision.divergence)
        self.span = span = clean_attributes.start_span(runtime.tracer(), f"{adapter.operation} {request.model}",
                                                       SpanKind.CLIENT, bounded(attrs, session))
        if session is not None and (session.tracked or _global_tracked):
            try:
                for key, value, digest in session.changed_snapshots():
                    add_snapshot_event(span, key, value, digest, self.step, session)
            except Exception:
                warn_once("step-snapshot", "tracefix: a tracked object failed to snapshot", exc_info=True)

    # --- replay ------------------------------------------------------------------------
    @property
    def serves(self) -> bool:
        return self.decision is not None and self.decision.serves

    def serve(self, is_async: bool) -> Any:
        """The recorded (or intervention) response as the SDK's own type; no network."""
        decision = self.decision
        raw = decision.response if decision.response is not None else \
            self.adapter.synthesize(decision.text, self.request.model)
        recorded = decision.stream if decision.response is not None else None
        self.finish_raw(raw, stream=recorded)
        if self.request.stream:
            result = self.adapter.fake_stream(raw, self.kwargs, is_async, recorded)
        else:
            result = self.adapter.rehydrate(raw, self.kwargs)
        return as_raw_response(result, raw, self.kwargs, is_async)  # .with_raw_response callers

    # --- live --------------------------------------------------------------------------
    def activate(self) -> object:
        return otel_context.attach(trace.set_span_in_context(self.span))

    @staticmethod
    def deactivate(token: object) -> None:
        otel_context.detach(token)

    def finish_raw(self, raw: dict | None, error: BaseException | None = None, abandoned: bool = False,
                   stream: list[dict] | str | None = None) -> None:
        """Record the response (raw provider JSON) and, for a stream, its events as they came
        (`stream`: a list, or already its JSON text), then end the span; runs once."""
        if self.ended:
            return
        self.ended = True
        span = self.span
        try:
            if raw is not None:
                summary = self.adapter.summarize(raw)
                if self.session is not None and summary.tool_calls and self.step is not None:
                    self.session.add_tool_calls(self.step, summary.tool_calls, self.agent)
                attrs: dict[str, Any] = {}
                for key, value in ((sc.GEN_AI_RESPONSE_MODEL, summary.response_model),
                                   (sc.GEN_AI_RESPONSE_ID, summary.response_id),
                                   (sc.GEN_AI_USAGE_INPUT_TOKENS, summary.input_tokens),
                                   (sc.GEN_AI_USAGE_OUTPUT_TOKENS, summary.output_tokens)):
                    if value is not None:
                        attrs[key] = value
                reasons = [r for r in summary.finish_reasons if r]
                if reasons:
                    attrs[sc.GEN_AI_RESPONSE_FINISH_REASONS] = reasons
                if runtime.settings.capture_content:
                    attrs[sc.GEN_AI_OUTPUT_MESSAGES] = dumps(message_parts.output_messages(
                        summary.output_messages, summary.finish_reasons))
                    attrs[sc.RESPONSE_RAW] = dumps(raw)
                    events = _within_payload_limit(stream)
                    if events is not None:
                        attrs[sc.RESPONSE_STREAM] = events
                clean_attributes.set_attributes(span, bounded(attrs, self.session))
            if abandoned:
                span.set_attribute(sc.STREAM_ABANDONED, True)
            if error is not None:
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
                span.set_attribute(sc.ERROR_TYPE, type(error).__qualname__)
        except Exception:
            warn_once(f"finish:{self.adapter.operation}", "tracefix: could not record an LLM response", exc_info=True)
        finally:
            span.end()

    def fail(self, exc: BaseException) -> None:
        self.finish_raw(None, error=exc)

    def on_result(self, result: Any, is_async: bool, parsed_result: Any = None) -> Any:
        """A live call returned: wrap its stream, or record the response (`parsed_result`
        when the caller already parsed it). Never raises."""
        try:
            if self.request.stream and self.adapter.is_stream(result):
                from .streaming import AsyncStreamProxy, SyncStreamProxy

                proxy = AsyncStreamProxy if is_async else SyncStreamProxy
                return proxy(result, self)
            if self.request.stream and callable(getattr(result, "parse", None)):
                # .with_raw_response / .with_streaming_response: the stream comes out of parse()
                from .streaming import AsyncRawStreamResponseProxy, RawStreamResponseProxy

                proxy = AsyncRawStreamResponseProxy if inspect.iscoroutinefunction(result.parse) \
                    else RawStreamResponseProxy
                return proxy(result, self)
            self.finish_raw(self.adapter.response_raw(parsed_result if parsed_result is not None else result))
        except Exception:
            warn_once(f"result:{self.adapter.operation}", "tracefix: could not record an LLM result", exc_info=True)
            if not self.ended:
                self.ended = True
                self.span.end()
        return result


def _within_payload_limit(stream: list[dict] | str | None) -> str | None:
    """The events' JSON when it fits TRACEFIX_MAX_PAYLOAD_BYTES, else None: cut, it could not
    be streamed again, and the session stays replayable without it (a replay then streams
    the recorded response in its own chunks)."""
    if not stream or stream == "[]":
        return None
    text = stream if isinstance(stream, str) else dumps(stream)
    limit = runtime.settings.max_payload_bytes
    if limit and len(text.encode("utf-8")) > limit:
        warn_once("stream-events-size", "tracefix: a stream's events exceed TRACEFIX_MAX_PAYLOAD_BYTES and are "
                  "not recorded; a replay streams the response in its own chunks")
        return None
    return text


@functools.lru_cache(maxsize=64)
def _server(base_url: str) -> tuple[str, int] | None:
    try:
        parts = urllib.parse.urlsplit(base_url)
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:  # a port out of range: the call still runs, traced without it
        return None
    return (parts.hostname, port) if parts.hostname and port else None


# [(the last call's URL object, its server)]: one client is the common case; one tuple, swapped
# whole, so threads with other clients never pair a URL with another's server
_last_server: list[tuple[Any, Any]] = [(None, None)]


def server_of(client: Any) -> tuple[str, int] | None:
    """(server.address, server.port) of the SDK client behind a resource (`instance._client`
    of the wrapped method: OpenAI's and Anthropic's both keep their base URL there)."""
    base_url = getattr(getattr(client, "_client", None), "base_url", None)
    if base_url is None:
        return None
    last = _last_server[0]
    if last[0] is not base_url:  # else the same URL object as the last call's: no text to read again
        last = _last_server[0] = (base_url, _server(str(base_url)))
    return last[1]


def begin(adapter: Any, kwargs: dict, client: Any = None) -> LLMCall | None:
    try:
        return LLMCall(adapter, kwargs, client)
    except Exception:
        warn_once(f"begin:{adapter.operation}", "tracefix: could not trace an LLM call; it runs untraced",
                  exc_info=True)
        return None


def wrap_sync(adapter: Any):
    """A wrapt wrapper for a synchronous SDK method."""
    def tracefix_sync_wrapper(wrapped, instance, args, kwargs):
        call = begin(adapter, kwargs, instance)
        if call is None:
            return wrapped(*args, **kwargs)
        if call.serves:
            try:
                return call.serve(is_async=False)
            except Exception:  # a cassette entry the SDK rejects: better live than broken
                warn_once("serve", "tracefix: could not serve a recorded response; calling live", exc_info=True)
        token = call.activate()
        try:
            result = wrapped(*args, **call.kwargs)
        except BaseException as exc:
            call.deactivate(token)
            call.fail(exc)
            raise
        call.deactivate(token)
        return call.on_result(result, is_async=False)
    return tracefix_sync_wrapper


def wrap_async(adapter: Any):
    """A wrapt wrapper for an `async def` SDK method."""
    async def tracefix_async_wrapper(wrapped, instance, args, kwargs):
        call = begin(adapter, kwargs, instance)
        if call is None:
            return await wrapped(*args, **kwargs)
        if call.serves:
            try:
                return call.serve(is_async=True)
            except Exception:  # a cassette entry the SDK rejects: better live than broken
                warn_once("serve", "tracefix: could not serve a recorded response; calling live", exc_info=True)
        token = call.activate()
        try:
            result = await wrapped(*args, **call.kwargs)
        except BaseException as exc:
            call.deactivate(token)
            call.fail(exc)
            raise
        call.deactivate(token)
        return call.on_result(result, is_async=True, parsed_result=await _parsed_async(result, call))
    return tracefix_async_wrapper


async def _parsed_async(result: Any, call: LLMCall) -> Any:
    """The model inside an async client's `.with_streaming_response` answer, whose parse() is
    a coroutine: read here so it can be recorded (the SDK caches it for the caller's own
    parse()). None for every other result."""
    parse = getattr(result, "parse", None)
    if call.request.stream or not inspect.iscoroutinefunction(parse):
        return None
    try:
        return await parse()
    except Exception:  # the caller's own parse() will raise it where it belongs
        return None
