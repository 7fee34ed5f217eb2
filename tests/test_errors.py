"""One error hierarchy: every error tracefix raises on purpose is a TracefixError, and an
unknown session is one class wherever it is raised."""
import pickle

import pytest

from tracefix.errors import TracefixError, UnknownSession


def test_unknown_session_is_one_class_with_a_readable_message_and_survives_a_process_hop():
    from tracefix.collector.store import UnknownSession as StoreUnknownSession

    assert StoreUnknownSession is UnknownSession
    exc = UnknownSession("s-1")
    assert isinstance(exc, KeyError) and isinstance(exc, TracefixError)
    assert str(exc) == "unknown session 's-1'" and exc.http_status == 404
    again = pickle.loads(pickle.dumps(UnknownSession("s-2", "no session 's-2' in the store")))
    assert (type(again), again.session_id, str(again)) == (UnknownSession, "s-2", "no session 's-2' in the store")


@pytest.mark.parametrize("where, name, builtin", [
    ("tracefix.entrypoints", "EntrypointRefused", PermissionError),
    ("tracefix.feedback", "FeedbackError", RuntimeError),
    ("tracefix.collector.access", "AccessError", RuntimeError),
    ("tracefix.collector.decoding", "DecodeFailed", RuntimeError),
    ("tracefix.collector.imports", "ImportFormatError", ValueError),
    ("tracefix.collector.launcher", "ProcessDidNotStart", RuntimeError),
    ("tracefix.collector.normalize", "SpanRejected", ValueError),
    ("tracefix.collector.otlp", "OtlpError", Exception),
    ("tracefix.collector.url_input", "InvalidParameter", ValueError),
    ("tracefix.collector.schemas.bodies", "InvalidBody", ValueError),
    ("tracefix.collector.writer", "QueueFull", RuntimeError),
    ("tracefix.collector.writer", "WriterClosed", RuntimeError),
    ("tracefix.replay.cassette", "CassetteError", ValueError),
    ("tracefix.analysis.llm", "LLMError", RuntimeError),
    ("tracefix.replay.admission", "ReplayError", RuntimeError),
    ("tracefix.replay.admission", "UnsignedSession", PermissionError),
])
def test_tracefix_errors_share_the_base_and_keep_their_builtin_one(where, name, builtin):
    import importlib

    cls = getattr(importlib.import_module(where), name)
    assert issubclass(cls, TracefixError) and issubclass(cls, builtin)
    assert 400 <= cls.http_status < 600
