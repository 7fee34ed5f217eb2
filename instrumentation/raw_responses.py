"""Replayed answers for calls made through `.with_raw_response` / `.with_streaming_response`.

Those SDK shapes (langchain-openai calls `chat.completions.with_raw_response.create(...)
.parse()` for every non-streaming request) reach the patched method with the header
``X-Stainless-Raw-Response`` and expect an HTTP response object back, not the parsed
model. A replay has no HTTP response: it has the recorded provider JSON, already turned
into the SDK's own type. `as_raw_response` wraps that in an object with the surface callers
use: `parse()`, `headers`, `status_code`, `http_response`, `text`, `json()`, `read()`,
`iter_bytes()`, `iter_lines()`, `close()`. The legacy shape (header "true") parses
synchronously; the streamed shape of an async client (header "stream") awaits.
"""
from __future__ import annotations

import json
from typing import Any

RAW_RESPONSE_HEADER = "X-Stainless-Raw-Response"


def raw_response_mode(kwargs: dict) -> str | None:
    """"true" (with_raw_response), "stream" (with_streaming_response) or None."""
    headers = kwargs.get("extra_headers")
    if not isinstance(headers, dict):
        return None
    for key, value in headers.items():
        if isinstance(key, str) and key.lower() == RAW_RESPONSE_HEADER.lower():
            return str(value)
    return None


class RecordedRawResponse:
    """An HTTP-response look-alike around a replayed result (see the module doc)."""

    status_code = 200
    retries_taken = 0
    request_id = None

    def __init__(self, result: Any, raw: dict | None):
        import httpx  # the openai SDK's own dependency: present whenever a call is replayed

        self._result = result
        self.content = json.dumps(raw if raw is not None else {}).encode()
        self.headers = httpx.Headers({"content-type": "application/json", "x-tracefix-replay": "cassette"})
        self.http_response = httpx.Response(200, headers=self.headers, content=self.content,
                                            request=httpx.Request("POST", "http://tracefix-replay.invalid/"))

    @property
    def text(self) -> str:
        return self.content.decode()

    def json(self) -> Any:
        return json.loads(self.content)

    def parse(self, **_: Any) -> Any:
        return self._result

    def read(self) -> bytes:
        return self.content

    def iter_bytes(self, chunk_size: int | None = None):
        yield self.content

    def iter_lines(self):
        yield from self.text.splitlines()

    def close(self) -> None:
        pass


class AsyncRecordedRawResponse(RecordedRawResponse):
    async def parse(self, **_: Any) -> Any:  # type: ignore[override]
        return self._result

    async def read(self) -> bytes:  # type: ignore[override]
        return self.content

    async def iter_bytes(self, chunk_size: int | None = None):  # type: ignore[override]
        yield self.content

    async def iter_lines(self):  # type: ignore[override]
        for line in self.text.splitlines():
            yield line

    async def close(self) -> None:  # type: ignore[override]
        pass


def as_raw_response(result: Any, raw: dict | None, kwargs: dict, is_async: bool) -> Any:
    """`result` as the call shape asked for it: itself, or wrapped like an HTTP response."""
    mode = raw_response_mode(kwargs)
    if mode is None:
        return result
    if mode == "stream" and is_async:
        return AsyncRecordedRawResponse(result, raw)
    return RecordedRawResponse(result, raw)
