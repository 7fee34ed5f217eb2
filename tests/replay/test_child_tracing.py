"""A forked replay child's tracing (tracefix.replay.child_tracing): no thread of its own, the
resource tracefix.init() would have made (its own instance id per child), the global provider,
and redaction in front of the file the runner delivers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource

from tracefix.replay import span_handoff

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="replay children fork")

SECRET = "sk-proj-" + "Q7f2Lx9Pz" * 5  # an OpenAI-shaped key, as an agent might log one

# what a zygote does (prepare, then fork) and what each forked child does with its tracing
ZYGOTE = textwrap.dedent("""
    import json, os, sys, threading
    from tracefix.replay import child_tracing
    child_tracing.prepare()
    assert threading.active_count() == 1, threading.enumerate()  # the zygote may fork
    folder, secret, seen = sys.argv[1], sys.argv[2], []
    for i in range(2):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            from opentelemetry import trace
            handle = child_tracing.init(f"{folder}/spans-{i}.otlp", "svc-replayed", endpoint="http://127.0.0.1:9")
            with trace.get_tracer("agent").start_as_current_span("agent-span") as span:  # the global API's
                span.set_attribute("note", "token " + secret)
            threads = [t.name for t in threading.enumerate()]
            # a thread started from here on calls the trace hook first
            threading.settrace(lambda *args: threads.append(threading.current_thread().name))
            handle.shutdown(on_this_thread=True)  # as replay.child does
            threading.settrace(None)
            os.write(write, json.dumps(threads).encode())
            os._exit(0)
        os.close(write)
        seen.append(json.loads(os.read(read, 65536)))
        os.waitpid(pid, 0)
    print(json.dumps(seen))
""")


def _exported(path) -> list:
    return [ExportTraceServiceRequest.FromString(body) for body in span_handoff.batches(path)]


def test_a_forked_child_traces_without_a_thread_to_its_file_with_its_own_resource(tmp_path):
    done = subprocess.run([sys.executable, "-c", ZYGOTE, str(tmp_path), SECRET], capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["MainThread"], ["MainThread"]]  # no exporter, detector or shutdown thread
    expected = dict(Resource.create({"service.name": "svc-replayed"}).attributes)
    instance_ids = []
    for i in range(2):
        raw = (tmp_path / f"spans-{i}.otlp").read_bytes()
        assert SECRET.encode() not in raw  # redaction stays in front of the file
        (request,) = _exported(tmp_path / f"spans-{i}.otlp")
        (resource_spans,) = request.resource_spans
        spans = [span.name for scope in resource_spans.scope_spans for span in scope.spans]
        assert spans == ["agent-span"]
        attributes = {a.key: a.value.string_value or a.value.int_value for a in resource_spans.resource.attributes}
        instance_ids.append(attributes.pop("service.instance.id", None))
        assert attributes == {k: v for k, v in expected.items() if k != "service.instance.id"}
    if "service.instance.id" in expected:  # an SDK that sets one renews it per process
        assert None not in instance_ids and len(set(instance_ids)) == 2
