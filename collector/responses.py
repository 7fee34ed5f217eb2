"""What every HTTP answer of the collector carries: JSON that never fails on a stored
value.

`JSONResponse` is Starlette's, written by `jsonsafe.dumps`: a NaN or infinite number in
the store comes out as null instead of turning the route into an error for good.
"""
from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse as _StarletteJSONResponse

from tracefix.collector import jsonsafe


class JSONResponse(_StarletteJSONResponse):
    def render(self, content: Any) -> bytes:
        return jsonsafe.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
