"""What a recorded session must be before a replay runs any of it: signed by the app that
recorded it (`check_signature`, tracefix.replay_signing) and replayable as recorded
(`check_replayable`: entrypoint and inputs, complete content, steps, tools served from the
recording). Each refusal says why and what to do."""
from __future__ import annotations

from tracefix import replay_signing
from tracefix.collector import document
from tracefix.collector.contracts import SessionDocument
from tracefix.entrypoints import EntrypointRefused
from tracefix.errors import TracefixError, UnknownSession


class ReplayError(TracefixError, RuntimeError):
    """A session cannot be diagnosed by replay (the message says why and what to do)."""


class UnsignedSession(EntrypointRefused):
    """The session's entrypoint and inputs are not what the app signed: they are not run."""


def check_signature(doc: SessionDocument, spans: list[dict], replay_key: bytes | None,
                    allow_unsigned: bool = False) -> str | None:
    """Refuse (UnsignedSession) a session whose entrypoint, inputs and id, as stored, are not
    signed with `replay_key` (tracefix.replay_signing); with `allow_unsigned` the refusal
    becomes the note returned. None: signed."""
    why = replay_signing.why_unverified(replay_signing.records(spans), replay_key, doc["session_id"],
                                        doc["entrypoint"], doc["inputs"])
    if why is None:
        return None
    if allow_unsigned:
        return f"replayed without a valid signature (--allow-unsigned): {why}"
    raise UnsignedSession(f"{why}; {replay_signing.ALLOW_HINT}")


def check_replayable(doc: SessionDocument | None, session_id: str, allow_live_tools: bool = False) -> SessionDocument:
    """`doc`, when `tracefix replay` may run it: else ReplayError with the document's own
    reason (`replayable_reason`, collector.document.why_not_replayable); with
    `allow_live_tools` a session whose only reason is tools tracefix never saw run is run."""
    if doc is None:
        raise UnknownSession(session_id, f"no session {session_id!r} in the store")
    steps = doc.get("steps") or []
    if "replayable_reason" in doc:
        reason = doc["replayable_reason"]
    else:  # a document put together by hand: what can be told from it
        reason = document.why_not_replayable(doc.get("entrypoint"), steps,
                                             marked_complete=doc.get("replayable") is not False)
    if reason is None and (not doc.get("entrypoint") or doc.get("inputs") is None):
        reason = document.why_not_replayable(None, steps)
    if reason is None or (allow_live_tools and reason == document.live_tools_reason(document.unrecorded_tools(steps))):
        return doc
    raise ReplayError(f"session {session_id} is not replayable: {reason}")
