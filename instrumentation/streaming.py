"""Stream proxies: the span of a streamed LLM call ends exactly once, however the stream ends.

Chunk accumulation (the adapter's accumulator) is separate from the finalizer
(:meth:`_StreamState.finish`, guarded by a flag). The sync and async proxies share one
base; every way out — exhaustion, an error, ``close()``, leaving a ``with`` block, or the
consumer dropping an unfinished stream (``weakref.finalize``) — goes through the finalizer.
"""
from __future__ import annotations

import weakref
from typing import Any

import wrapt

from . import runtime
from .attributes import dumps, warn_once


class _StreamState:
    """Everything the finalizer needs, kept off the proxy so weakref.finalize can hold it.

    Reading a chunk costs one list append: the items are kept, in order, and only when the
    stream ends are they folded into the response (the adapter's accumulator) and, when the
    adapter can write them back as the provider sent them (`stream_event`) and content is
    captured, written out as the recorded events a replay streams (the folded response alone
    would stream differently)."""
    __slots__ = ("call", "items", "keeps_events", "done")

    def __init__(self, call: Any):
        self.call = call
        self.items: list = []
        self.keeps_events = runtime.settings.capture_content and hasattr(call.adapter, "stream_event")
        self.done = False

    def add(self, item: Any) -> None:
        self.items.append(item)

    def response(self) -> dict | None:
        """The items folded into the response they stand for; a chunk that cannot be read is
        left out (said once), the others still count."""
        accumulator = self.call.adapter.new_accumulator()
        for item in self.items:
            try:
                accumulator.add(item)
            except Exception:
                warn_once("stream-chunk", "tracefix: could not read a stream chunk", exc_info=True)
        return accumulator.raw()

    def recorded_events(self) -> str | None:
        """The stream's events as JSON text, in order; None when not kept or one cannot be written."""
        if not self.keeps_events or not self.items:
            return None
        adapter = self.call.adapter
        try:
            if hasattr(adapter, "stream_events_json"):  # all of them at once, where the adapter can
                return adapter.stream_events_json(self.items)
            events = [adapter.stream_event(item) for item in self.items]
            return dumps([event for event in events if event is not None])
        except Exception:
            warn_once("stream-events", "tracefix: could not record a stream's events; a replay streams "
                      "the response in its own chunks", exc_info=True)
            return None

    def finish(self, error: BaseException | None = None, abandoned: bool = False) -> None:
        if self.done:
            return
        self.done = True
        try:
            raw = self.response()
        except Exception:
            warn_once("stream-raw", "tracefix: could not assemble a streamed response", exc_info=True)
            raw = None
        self.call.finish_raw(raw, error=error, abandoned=abandoned, stream=self.recorded_events())


def _abandoned(state: _StreamState) -> None:
    state.finish(abandoned=True)


class _StreamProxyBase(wrapt.ObjectProxy):
    """Looks like the SDK stream (attributes, isinstance) and reports to the span."""

    def __init__(self, stream: Any, call: Any):
        super().__init__(stream)
        state = _StreamState(call)
        self._self_state = state
        self._self_finalizer = weakref.finalize(self, _abandoned, state)

    def _self_finish(self, error: BaseException | None = None) -> None:
        self._self_finalizer.detach()
        self._self_state.finish(error)


class SyncStreamProxy(_StreamProxyBase):
    def __iter__(self):
        return self

    def __next__(self) -> Any:
        try:
            item = self.__wrapped__.__next__()
        except StopIteration:
            self._self_finish()
            raise
        except BaseException as exc:
            self._self_finish(exc)
            raise
        self._self_state.add(item)
        return item

    def __enter__(self):
        self.__wrapped__.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb):
        # an exception from the consumer's own code in the block is not the LLM call's
        # error (errors from the stream itself were recorded by __next__)
        try:
            return self.__wrapped__.__exit__(exc_type, exc, tb)
        finally:
            self._self_finish()

    def close(self) -> None:
        try:
            self.__wrapped__.close()
        finally:
            self._self_finish()


class AsyncStreamProxy(_StreamProxyBase):
    def __aiter__(self):
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self.__wrapped__.__anext__()
        except StopAsyncIteration:
            self._self_finish()
            raise
        except BaseException as exc:
            self._self_finish(exc)
            raise
        self._self_state.add(item)
        return item

    async def __aenter__(self):
        await self.__wrapped__.__aenter__()
        return self

    async def __aexit__(self, exc_type, exc, tb):
        try:
            return await self.__wrapped__.__aexit__(exc_type, exc, tb)
        finally:
            self._self_finish()

    async def close(self) -> None:
        try:
            await self.__wrapped__.close()
        finally:
            self._self_finish()

    async def aclose(self) -> None:
        await self.close()


def _unparsed(call: Any) -> None:
    call.finish_raw(None, abandoned=True)


class _RawStreamResponseProxy(wrapt.ObjectProxy):
    """The `.with_raw_response` / `.with_streaming_response` answer to a streamed call: its
    parse() hands back the SDK's stream inside a stream proxy, so the call is recorded as the
    app reads it (and the same proxy each time, as the SDK caches the parsed stream). An
    answer dropped unparsed ends the span as abandoned."""

    def __init__(self, response: Any, call: Any):
        super().__init__(response)
        self._self_call = call
        self._self_stream: Any = None
        self._self_finalizer = weakref.finalize(self, _unparsed, call)

    def _self_wrap(self, parsed: Any) -> Any:
        if self._self_stream is None:
            self._self_finalizer.detach()
            call = self._self_call
            if hasattr(parsed, "__anext__"):
                self._self_stream = AsyncStreamProxy(parsed, call)
            elif hasattr(parsed, "__next__"):
                self._self_stream = SyncStreamProxy(parsed, call)
            else:  # parse(to=...) into something else: nothing to read as it streams
                call.finish_raw(None)
                return parsed
        return self._self_stream


class RawStreamResponseProxy(_RawStreamResponseProxy):
    def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_wrap(self.__wrapped__.parse(*args, **kwargs))


class AsyncRawStreamResponseProxy(_RawStreamResponseProxy):
    async def parse(self, *args: Any, **kwargs: Any) -> Any:
        return self._self_wrap(await self.__wrapped__.parse(*args, **kwargs))


class RecordedStream:
    """A replayed stream: yields prepared SDK chunk objects, no network (sync and async use).
    `response` is an HTTP response look-alike: the SDKs' stream helpers (`messages.stream`,
    `chat.completions.stream`, `responses.stream`) read it when they wrap the raw stream."""

    def __init__(self, chunks: list):
        self._chunks = list(chunks)
        self._index = 0
        self._response: Any = None

    @property
    def response(self) -> Any:
        if self._response is None:
            import httpx  # the SDKs' own dependency: present whenever a call is replayed

            self._response = httpx.Response(
                200, headers={"content-type": "text/event-stream", "x-tracefix-replay": "cassette"},
                request=httpx.Request("POST", "http://tracefix-replay.invalid/"))
        return self._response

    def _next(self) -> Any:
        if self._index >= len(self._chunks):
            return None
        item = self._chunks[self._index]
        self._index += 1
        return item

    def __iter__(self):
        return self

    def __next__(self) -> Any:
        item = self._next()
        if item is None:
            raise StopIteration
        return item

    def __aiter__(self):
        return self

    async def __anext__(self) -> Any:
        item = self._next()
        if item is None:
            raise StopAsyncIteration
        return item

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._index = len(self._chunks)


class AsyncRecordedStream(RecordedStream):
    async def close(self) -> None:  # type: ignore[override]
        self._index = len(self._chunks)

    async def aclose(self) -> None:
        await self.close()

    async def __aexit__(self, *exc) -> None:
        await self.close()
