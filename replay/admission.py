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
    if doc is None:
        raise UnknownSession(session_id, f"no session {session_id!r} in the store")
    if not doc.get("entrypoint") or doc.get("inputs") is None:
        raise ReplayError(f"session {session_id} did not record its entrypoint and inputs, so it cannot be replayed; "
                          "run the agent inside tracefix.session(entrypoint='pkg.mod:fn', inputs={...})")
    if doc.get("replayable") is False:
        raise ReplayError(f"session {session_id} is not replayable: its recording is incomplete (content capture "
                          "was off: TRACEFIX_CAPTURE_CONTENT or OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT; a "
                          "payload was truncated: raise TRACEFIX_MAX_PAYLOAD_BYTES; another instrumentation traced its "
                          "LLM calls; or its entrypoint cannot be imported again)")
    if not doc.get("steps"):
        raise ReplayError(f"session {session_id} has no steps to replay")
    live = document.unrecorded_tools(doc["steps"])
    if live and not allow_live_tools:
        raise ReplayError(f"session {session_id} is replayable with live tools only: {', '.join(live)} ran without "
                          "@tracefix.tool, so a replay would run them again for real, even before the edited step; "
                          "decorate them with @tracefix.tool and record again, or pass --allow-live-tools")
    return doc
