"""The JSON the collector's API reads and writes, as pydantic models (docs/contracts.md).

Request models (`bodies`) validate what a client sends: `bodies.parse_body(Model, data)`
returns the model or raises `InvalidBody` (answered 400 in the error shape, naming each
field at fault). Response models (`answers`) only describe: a route writes its store dicts
as they are (a session page is never round-tripped through pydantic), and
`tracefix.collector.openapi` publishes these models, and the query parameters `queries`
describes, as the schemas of `/openapi.json`. Documents a client may extend (session
metadata, analysis and replay results) allow fields the models do not name.

The documents the parts hand each other are declared once, as the typed dicts of
`tracefix.collector.contracts`; the models of those documents (the session document, its
steps, tool calls and feedback, the analysis and replay results) are derived from them by
`derive.derived_model`, adding only what the API itself answers (a page's cut marks).

Every 4xx/5xx answer of the API is an `answers.ErrorBody`: `{"error": "what went wrong",
"code": "machine_readable", ...}` plus the optional fields named there.
"""
