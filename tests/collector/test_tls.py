"""`tracefix serve --tls-cert/--tls-key [--tls-client-ca]`: TLS (and mutual TLS) on the
OTLP/HTTP + API port and the OTLP/gRPC port, with real OTLP exporters (Python's, and the
OpenTelemetry JS SDK's on Node.js: marked `js`, skipped without node and npm) and a CA made here."""
from __future__ import annotations

import datetime
import ipaddress
import json
import os
import ssl
import subprocess
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult

import procs
from collector_support import TOKEN

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path  # signed by `ca`: accepted under --tls-client-ca
    client_key: Path

    def context(self, with_client_cert: bool = False) -> ssl.SSLContext:
        """A client context that trusts only the test CA."""
        context = ssl.create_default_context(cafile=str(self.ca))
        if with_client_cert:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context

    def grpc_credentials(self, with_client_cert: bool = False) -> grpc.ChannelCredentials:
        client = {"private_key": self.client_key.read_bytes(),
                  "certificate_chain": self.client_cert.read_bytes()} if with_client_cert else {}
        return grpc.ssl_channel_credentials(root_certificates=self.ca.read_bytes(), **client)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    out = tmp_path_factory.mktemp("pki")
    now = datetime.datetime.now(datetime.timezone.utc)

    def name(common_name: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    def write(stem: str, cert: x509.Certificate, key) -> tuple[Path, Path]:
        cert_path, key_path = out / f"{stem}.pem", out / f"{stem}-key.pem"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return cert_path, key_path

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder().subject_name(name("tracefix test CA")).issuer_name(name("tracefix test CA"))
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False, decipher_only=False),
                              critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
               .sign(ca_key, hashes.SHA256()))
    ca_path, _ = write("ca", ca_cert, ca_key)

    def issue(common_name: str, usage, sans: list) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(name(common_name)).issuer_name(ca_cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                                  critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return write(common_name, builder.sign(ca_key, hashes.SHA256()), key)

    server_cert, server_key = issue("server", ExtendedKeyUsageOID.SERVER_AUTH,
                                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    client_cert, client_key = issue("client", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    return Pki(ca_path, server_cert, server_key, client_cert, client_key)


@pytest.fixture(autouse=True)
def exporter_uses_its_certificate_file(monkeypatch):
    """requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override a session's CA bundle, which is
    how the HTTP exporter applies `certificate_file`: without this, a machine that sets them
    would verify the test server against the system CAs (and fail)."""
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)


def start_tls_serve(tmp_path_factory, pki: Pki, *, mutual: bool) -> procs.Proc:
    db = tmp_path_factory.mktemp("tls") / "tracefix.duckdb"
    client_ca = ["--tls-client-ca", str(pki.ca)] if mutual else []
    return procs.start_serve(db, "--token", TOKEN, "--diagnose", "off",
                             "--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key), *client_ca,
                             env={"TRACEFIX_TOKEN": ""}, health_tls=pki.context(with_client_cert=mutual))


@pytest.fixture(scope="module")
def tls_serve(tmp_path_factory, pki):
    p = start_tls_serve(tmp_path_factory, pki, mutual=False)
    yield p
    p.stop()


@pytest.fixture(scope="module")
def mtls_serve(tmp_path_factory, pki):
    p = start_tls_serve(tmp_path_factory, pki, mutual=True)
    yield p
    p.stop()


def export_one_span(exporter) -> tuple[str, SpanExportResult]:
    """Export one span of a new session through `exporter`; (session id, export result)."""
    session_id = f"tls-{uuid.uuid4().hex[:12]}"
    results: list[SpanExportResult] = []

    class Recording(SimpleSpanProcessor):
        def on_end(self, span) -> None:
            results.append(exporter.export([span]))

    provider = TracerProvider(resource=Resource.create({"service.name": "tls-agent"}))
    provider.add_span_processor(Recording(exporter))
    with provider.get_tracer("test").start_as_current_span(
            f"session {session_id}", attributes={"tracefix.session.id": session_id, "tracefix.session.root": True}):
        pass
    provider.shutdown()
    return session_id, results[0]


def http_exporter(serve: procs.Proc, pki: Pki, *, with_client_cert: bool = False):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    client = {"client_certificate_file": str(pki.client_cert),
              "client_key_file": str(pki.client_key)} if with_client_cert else {}
    return OTLPSpanExporter(endpoint=serve.match["http"] + "/v1/traces", certificate_file=str(pki.ca),
                            headers={"authorization": f"Bearer {TOKEN}"}, timeout=5, **client)


def grpc_exporter(serve: procs.Proc, pki: Pki, *, with_client_cert: bool = False):
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=serve.match["grpc"], credentials=pki.grpc_credentials(with_client_cert),
                            headers=(("authorization", f"Bearer {TOKEN}"),), timeout=5)


def read_session(serve: procs.Proc, session_id: str, context: ssl.SSLContext) -> dict:
    req = urllib.request.Request(f"{serve.match['http']}/api/v1/sessions/{session_id}",
                                 headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10, context=context) as resp:
        return json.loads(resp.read())


def grpc_export_status(serve: procs.Proc, channel_credentials: grpc.ChannelCredentials | None) -> grpc.StatusCode:
    """Status of one empty Export call over a plain (None) or TLS channel."""
    target = serve.match["grpc"]
    with (grpc.secure_channel(target, channel_credentials) if channel_credentials
          else grpc.insecure_channel(target)) as channel:
        export = channel.unary_unary(EXPORT_METHOD, request_serializer=None, response_deserializer=None)
        try:
            export(b"", metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=10)
        except grpc.RpcError as exc:
            return exc.code()
        return grpc.StatusCode.OK


@pytest.mark.parametrize("make_exporter", [http_exporter, grpc_exporter], ids=["http", "grpc"])
def test_spans_exported_over_tls_are_stored_and_read_back_over_https(tls_serve, pki, make_exporter):
    assert tls_serve.match["http"].startswith("https://")
    session_id, result = export_one_span(make_exporter(tls_serve, pki))
    assert result == SpanExportResult.SUCCESS
    assert read_session(tls_serve, session_id, pki.context())["session_id"] == session_id


@pytest.mark.js
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf", "http/json"])
def test_the_js_exporters_send_over_tls_trusting_the_ca_they_are_given(tls_serve, pki, protocol):
    from node_packages import node_modules, run_burst
    from test_js_exporters import endpoint

    run = f"tls-js-{protocol.replace('/', '-')}-{uuid.uuid4().hex[:6]}"
    summary = run_burst(node_modules(), protocol, endpoint(tls_serve, protocol), spans=20, sessions=1, run=run,
                        ca=pki.ca, token=TOKEN)
    assert (summary["exported"], summary["failed"], summary["errors"]) == (20, 0, {})
    session = read_session(tls_serve, f"{run}-s0", pki.context())
    assert len(session["steps"]) == 19 and session["steps"][0]["model"] == "js-model-1"


def test_plain_http_and_plain_grpc_clients_are_refused(tls_serve):
    plain_url = tls_serve.match["http"].replace("https://", "http://", 1) + "/healthz"
    with pytest.raises(OSError):  # the TLS port drops a request that is not a TLS handshake
        urllib.request.urlopen(plain_url, timeout=10).close()
    assert grpc_export_status(tls_serve, None) == grpc.StatusCode.UNAVAILABLE


def test_a_client_that_does_not_trust_the_ca_refuses_the_server(tls_serve):
    with pytest.raises(urllib.error.URLError) as refused:
        urllib.request.urlopen(tls_serve.match["http"] + "/healthz", timeout=10,
                               context=ssl.create_default_context()).close()
    assert isinstance(refused.value.reason, ssl.SSLCertVerificationError)


def test_mutual_tls_refuses_clients_without_a_certificate_on_both_ports(mtls_serve, pki):
    with pytest.raises(OSError):  # handshake refused: ssl.SSLError or a reset, depending on timing
        urllib.request.urlopen(mtls_serve.match["http"] + "/healthz", timeout=10, context=pki.context()).read()
    assert grpc_export_status(mtls_serve, pki.grpc_credentials(with_client_cert=False)) == grpc.StatusCode.UNAVAILABLE


@pytest.mark.parametrize("make_exporter", [http_exporter, grpc_exporter], ids=["http", "grpc"])
def test_mutual_tls_stores_spans_of_clients_with_a_certificate(mtls_serve, pki, make_exporter):
    assert mtls_serve.match["http"].startswith("https://")
    session_id, result = export_one_span(make_exporter(mtls_serve, pki, with_client_cert=True))
    assert result == SpanExportResult.SUCCESS
    assert read_session(mtls_serve, session_id, pki.context(with_client_cert=True))["session_id"] == session_id


@pytest.mark.parametrize("args, message", [
    (["--tls-cert", "{server_cert}"], "--tls-cert needs --tls-key"),
    (["--tls-key", "{server_key}"], "need --tls-cert"),
    (["--tls-cert", "{server_cert}", "--tls-key", "{missing}"], "cannot use --tls-cert"),
    (["--tls-cert", "{server_key}", "--tls-key", "{server_key}"], "cannot use --tls-cert"),
    (["--tls-cert", "{server_cert}", "--tls-key", "{server_key}", "--tls-client-ca", "{missing}"],
     "cannot use --tls-client-ca"),
], ids=["cert-without-key", "key-without-cert", "missing-key", "key-as-cert", "missing-client-ca"])
def test_unusable_tls_options_are_a_usage_error_at_start(tmp_path, pki, args, message):
    paths = {"server_cert": pki.server_cert, "server_key": pki.server_key, "missing": tmp_path / "missing.pem"}
    done = subprocess.run([*procs.TRACEFIX, "serve", "--db", str(tmp_path / "t.duckdb"), "--http-port", "0",
                           "--grpc-port", "0", *(a.format(**paths) for a in args)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TRACEFIX_TLS_CERT": "", "TRACEFIX_TLS_KEY": "",
                               "TRACEFIX_TLS_CLIENT_CA": ""})
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert not (tmp_path / "t.duckdb").exists()  # refused before opening the store


def test_a_temporary_collector_ignores_tls_settings_in_the_environment(tmp_path, pki, monkeypatch):
    """`tracefix replay --db` runs its own collector for its children; TRACEFIX_TLS_* meant for
    the shared `tracefix serve` must not turn it into a TLS server they cannot verify."""
    from tracefix.collector.launcher import temporary_collector

    monkeypatch.setenv("TRACEFIX_TLS_CERT", str(pki.server_cert))
    monkeypatch.setenv("TRACEFIX_TLS_KEY", str(pki.server_key))
    monkeypatch.setenv("TRACEFIX_TLS_CLIENT_CA", str(pki.ca))
    with temporary_collector(tmp_path / "replay.duckdb") as url:
        assert url.startswith("http://")


def test_cli_verbs_trust_the_collector_through_ssl_cert_file(tls_serve, pki, tmp_path):
    """What the README tells users of the CLI verbs and `tracefix worker` (urllib's default context)."""
    assert tls_serve.match["http"].startswith("https://")
    env = {**os.environ, "TRACEFIX_TOKEN": TOKEN, "TRACEFIX_SERVER": tls_serve.match["http"]}

    def sessions(**extra_env) -> subprocess.CompletedProcess:
        # a verb that cannot reach the server says so, naming it (no fall back to a file)
        return subprocess.run([*procs.TRACEFIX, "sessions", "--json"], capture_output=True, text=True, timeout=60,
                              env={**env, **extra_env}, cwd=tmp_path)

    trusted = sessions(SSL_CERT_FILE=str(pki.ca))
    assert trusted.returncode == 0 and "no tracefix serve answers" not in trusted.stderr, trusted.stderr
    assert "no tracefix serve answers" in sessions().stderr


def test_cli_verbs_the_worker_and_feedback_present_the_client_certificate_they_are_given(mtls_serve, pki, tmp_path,
                                                                                      monkeypatch):
    """Under mutual TLS the CLI verbs, `tracefix worker` and `tracefix.feedback` reach the collector
    with TRACEFIX_TLS_CLIENT_CERT / _KEY, and cannot without them."""
    import tracefix
    from tracefix.feedback import FeedbackError

    env = {**os.environ, "TRACEFIX_TOKEN": TOKEN, "TRACEFIX_SERVER": mtls_serve.match["http"],
           "SSL_CERT_FILE": str(pki.ca)}
    client = {"TRACEFIX_TLS_CLIENT_CERT": str(pki.client_cert), "TRACEFIX_TLS_CLIENT_KEY": str(pki.client_key)}

    def run(*args: str, **extra_env: str) -> subprocess.CompletedProcess:
        # a verb that cannot reach the server says so, naming it (no fall back to a file)
        return subprocess.run([*procs.TRACEFIX, *args], capture_output=True, text=True, timeout=60,
                              env={**env, **extra_env}, cwd=tmp_path)

    listed = run("sessions", "--json", **client)
    assert listed.returncode == 0 and "no tracefix serve answers" not in listed.stderr, listed.stderr
    assert "no tracefix serve answers" in run("sessions", "--json").stderr
    worked = run("worker", "--jobs", "diagnosis", "--once", **client)
    assert worked.returncode == 0 and "stopped after 0 job(s)" in worked.stdout, worked.stderr
    refused = run("worker", "--jobs", "diagnosis", "--once")
    assert refused.returncode == 1 and "cannot reach tracefix serve" in refused.stderr, refused.stderr
    assert "set TRACEFIX_TLS_CLIENT_CERT" in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
    half = run("sessions", "--json", TRACEFIX_TLS_CLIENT_CERT=str(pki.client_cert))
    assert half.returncode == 1 and "go together" in half.stderr and "Traceback" not in half.stderr

    monkeypatch.setenv("SSL_CERT_FILE", str(pki.ca))
    with pytest.raises(FeedbackError, match="cannot reach the collector.*set TRACEFIX_TLS_CLIENT_CERT"):
        tracefix.feedback("no-such-session", -1, server=mtls_serve.match["http"], token=TOKEN)
    for name, value in client.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(FeedbackError, match="HTTP 404"):  # through the handshake, to the API's answer
        tracefix.feedback("no-such-session", -1, server=mtls_serve.match["http"], token=TOKEN)
