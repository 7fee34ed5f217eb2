"""The API's paged reads: their query parameters (`offset`, `limit`; an empty value is a 422)
and the page itself, `{field: [...], "page": {...}}`, streamed item by item within
PAGE_BUDGET_CHARS of content (tracefix.collector.store)."""
from __future__ import annotations

from starlette.requests import Request
from starlette.responses import StreamingResponse

from tracefix.collector import jsonsafe
from tracefix.collector.store import PAGE_BUDGET_CHARS
from tracefix.collector.url_input import QueryParams

STREAM_CHUNK_BYTES = 64 * 1024  # a streamed page is written in chunks of about this size


def query_params(request: Request) -> QueryParams:
    """The request's query parameters as the API reads them: an empty value (`limit=`) is a 422."""
    return QueryParams(request.query_params, refuse_empty=True)


def page_params(query: QueryParams, default_limit: int) -> tuple[int, int]:
    """`offset` and `limit` of a paged read (every read of a session's contents is paged)."""
    return query.integer("offset", 0, high=1 << 31), query.integer("limit", default_limit, low=1, high=1000)


def streamed_page(field: str, total: int, offset: int, items) -> StreamingResponse:
    """`{field: [...], "page": {...}}` written item by item as `items` yields (position,
    JSON text, size); a page ends after PAGE_BUDGET_CHARS of content (one item at least)."""
    def body():
        # Items go out in chunks of STREAM_CHUNK_BYTES: each chunk of a sync iterator costs
        # the response a hop through the thread pool, which for small rows (a job, a span)
        # cost more than writing them.
        chunk, held = [f'{{"{field}":['.encode()], 0
        end, used = offset, 0
        for n, (position, text, size) in enumerate(items):
            if n and used > PAGE_BUDGET_CHARS:
                break
            data = (b"," if n else b"") + jsonsafe.utf8(text)
            chunk.append(data)
            held += len(data)
            end, used = position + 1, used + size
            if held >= STREAM_CHUNK_BYTES:
                yield b"".join(chunk)
                chunk, held = [], 0
        page = {"offset": offset, "returned": end - offset, "total": total,
                "next_offset": end if end < total else None}
        chunk.append(f'],"page":{jsonsafe.dumps(page)}}}'.encode())
        yield b"".join(chunk)

    return StreamingResponse(body(), media_type="application/json")


def listed(rows: list[dict], offset: int):
    """A page's rows, read already, as `streamed_page` takes them (position, JSON text, size)."""
    for position, row in enumerate(rows, start=offset):
        text = jsonsafe.dumps(row, ensure_ascii=False)
        yield position, text, len(text)
