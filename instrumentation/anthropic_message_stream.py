"""Anthropic's stream helper, ``with client.messages.stream(...) as stream``, traced and
replayed like ``messages.create(stream=True)``.

The SDK's MessageStreamManager posts the request itself instead of calling
`Messages.create`, so the helper is wrapped at its own public seam: `Messages.stream`
returns a :class:`TracedMessageStreamManager`. Entering it begins the call (when the SDK's
manager would send the request) and either

- serves the recorded call: the SDK's own `MessageStream` over the cassette's events, no
  request; or
- enters the SDK's manager and hands back its `MessageStream` inside a
  :class:`SyncMessageStreamProxy`. Every public way of reading a MessageStream (iteration,
  ``text_stream``, ``until_done``, ``get_final_message``, ``get_final_text``) goes through
  the proxy's iteration, so the adapter's accumulator folds each event, exactly as for
  ``create(stream=True)``, and the span ends when the stream does. Leaving the ``with``
  block early closes the stream, which ends the span too.

No private SDK attribute is read or written.
"""
from __future__ import annotations

from typing import Any, Callable

from .attributes import warn_once
from .llm import LLMCall, begin
from .streaming import AsyncStreamProxy, SyncStreamProxy


def _is_text_delta(event: Any) -> bool:
    # the SDK's own filter for `text_stream` (MessageStream.__stream_text__)
    return event.type == "content_block_delta" and event.delta.type == "text_delta"


class SyncMessageStreamProxy(SyncStreamProxy):
    """A live `MessageStream` whose every reader pulls events through this proxy."""

    @property
    def text_stream(self) -> Any:
        # made on first use: a generator over the proxy keeps the proxy alive
        if getattr(self, "_self_text_stream", None) is None:
            self._self_text_stream = (event.delta.text for event in self if _is_text_delta(event))
        return self._self_text_stream

    def until_done(self) -> None:
        for _ in self:
            pass

    def get_final_message(self) -> Any:
        self.until_done()
        return self.__wrapped__.get_final_message()

    def get_final_text(self) -> str:
        self.until_done()
        return self.__wrapped__.get_final_text()


class AsyncMessageStreamProxy(AsyncStreamProxy):
    """A live `AsyncMessageStream` whose every reader pulls events through this proxy."""

    @property
    def text_stream(self) -> Any:
        if getattr(self, "_self_text_stream", None) is None:
            self._self_text_stream = self._self_texts()
        return self._self_text_stream

    async def _self_texts(self) -> Any:
        async for event in self:
            if _is_text_delta(event):
                yield event.delta.text

    async def until_done(self) -> None:
        async for _ in self:
            pass

    async def get_final_message(self) -> Any:
        await self.until_done()
        return await self.__wrapped__.get_final_message()

    async def get_final_text(self) -> str:
        await self.until_done()
        return await self.__wrapped__.get_final_text()


class _TracedManagerBase:
    """What a traced `messages.stream(...)` returns. `open_helper(**kwargs)` is the SDK's own
    `stream` method, called only for a live call (with the kwargs a replay intervention may
    have extended), so a replayed call never builds a request."""

    def __init__(self, adapter: Any, open_helper: Callable[..., Any], kwargs: dict, client: Any = None) -> None:
        self._adapter = adapter
        self._client = client  # the resource whose SDK client says server.address
        self._open_helper = open_helper
        self._kwargs = kwargs
        self._stream: Any = None

    def _begin(self) -> LLMCall | None:
        return begin(self._adapter, {**self._kwargs, "stream": True}, self._client)

    def _replayed(self, call: LLMCall, is_async: bool) -> Any:
        """The SDK's MessageStream over the recorded events; None when they cannot be served."""
        from anthropic import NOT_GIVEN
        from anthropic.lib.streaming import AsyncMessageStream, MessageStream

        try:
            stream_cls = AsyncMessageStream if is_async else MessageStream
            return stream_cls(call.serve(is_async), output_format=self._kwargs.get("output_format", NOT_GIVEN))
        except Exception:  # a cassette entry the SDK rejects: better live than broken
            warn_once("serve", "tracefix: could not serve a recorded response; calling live", exc_info=True)
            return None

    @staticmethod
    def _helper_kwargs(call: LLMCall) -> dict:
        return {k: v for k, v in call.kwargs.items() if k != "stream"}  # stream() takes no `stream`


class TracedMessageStreamManager(_TracedManagerBase):
    def __enter__(self) -> Any:
        call = self._begin()
        if call is None:
            self._stream = self._open_helper(**self._kwargs).__enter__()
            return self._stream
        if call.serves:
            self._stream = self._replayed(call, is_async=False)
            if self._stream is not None:
                return self._stream
        token = call.activate()
        try:
            stream = self._open_helper(**self._helper_kwargs(call)).__enter__()
        except BaseException as exc:
            call.deactivate(token)
            call.fail(exc)
            raise
        call.deactivate(token)
        self._stream = SyncMessageStreamProxy(stream, call)
        return self._stream

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._stream is not None:  # as the SDK's manager does; the proxy ends the span
            self._stream.close()


class AsyncTracedMessageStreamManager(_TracedManagerBase):
    async def __aenter__(self) -> Any:
        call = self._begin()
        if call is None:
            self._stream = await self._open_helper(**self._kwargs).__aenter__()
            return self._stream
        if call.serves:
            self._stream = self._replayed(call, is_async=True)
            if self._stream is not None:
                return self._stream
        token = call.activate()
        try:
            stream = await self._open_helper(**self._helper_kwargs(call)).__aenter__()
        except BaseException as exc:
            call.deactivate(token)
            call.fail(exc)
            raise
        call.deactivate(token)
        self._stream = AsyncMessageStreamProxy(stream, call)
        return self._stream

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._stream is not None:
            await self._stream.close()


def wrap_message_stream(adapter: Any):
    """A wrapt wrapper for `Messages.stream`."""
    def tracefix_message_stream_wrapper(wrapped, instance, args, kwargs):
        return TracedMessageStreamManager(adapter, lambda **kw: wrapped(*args, **kw), kwargs, instance)
    return tracefix_message_stream_wrapper


def wrap_async_message_stream(adapter: Any):
    """A wrapt wrapper for `AsyncMessages.stream` (a plain method returning an async manager)."""
    def tracefix_async_message_stream_wrapper(wrapped, instance, args, kwargs):
        return AsyncTracedMessageStreamManager(adapter, lambda **kw: wrapped(*args, **kw), kwargs, instance)
    return tracefix_async_message_stream_wrapper
