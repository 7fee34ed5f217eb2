"""TLS for tracefix's own HTTP clients: the CLI verbs, `tracefix worker` and `tracefix.feedback`.

They verify a collector's certificate with Python's default trust, which `SSL_CERT_FILE`
points at a private CA. A collector started with `--tls-client-ca` (mutual TLS) also asks
each client for a certificate of its own: these clients present the one that
`TRACEFIX_TLS_CLIENT_CERT` and `TRACEFIX_TLS_CLIENT_KEY` name (PEM files, the key
unencrypted), as OTel exporters present `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE` / `_KEY`.
"""
from __future__ import annotations

import functools
import os
import ssl

from tracefix.errors import TracefixError

CERT_ENV = "TRACEFIX_TLS_CLIENT_CERT"
KEY_ENV = "TRACEFIX_TLS_CLIENT_KEY"


class ClientTlsError(TracefixError, ValueError):
    """The client certificate settings cannot be used (one without the other, an unreadable
    file, a key that does not match); said before any request, not as a failed handshake."""


def client_context() -> ssl.SSLContext | None:
    """The context for urllib's `urlopen(..., context=)`: None (urllib's default) unless a
    client certificate is configured."""
    cert, key = os.environ.get(CERT_ENV) or None, os.environ.get(KEY_ENV) or None
    return _context(cert, key, _modified(cert), _modified(key),
                    os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


def _modified(path: str | None) -> float | None:
    try:
        return os.stat(path).st_mtime if path else None
    except OSError:
        return None  # _context says what is wrong with it


# Loading the default trust store takes milliseconds and a worker polls: one context per
# setting, made again when a file is replaced (a rotated certificate is picked up) or the
# trust changes (create_default_context reads SSL_CERT_FILE / SSL_CERT_DIR when called).
@functools.lru_cache(maxsize=4)
def _context(cert: str | None, key: str | None, *_changes: float | str | None) -> ssl.SSLContext | None:
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ClientTlsError(f"{CERT_ENV} and {KEY_ENV} go together: set both (PEM certificate and its "
                             f"unencrypted key) or neither")
    context = ssl.create_default_context()  # SSL_CERT_FILE / SSL_CERT_DIR still pick the trust
    try:
        # a password-protected key would prompt on the terminal: refuse it instead
        context.load_cert_chain(cert, key, password=lambda: b"")
    except (OSError, ssl.SSLError) as exc:
        raise ClientTlsError(f"cannot use {CERT_ENV}={cert} with {KEY_ENV}={key}: {exc}") from None
    return context


def certificate_hint(url: str) -> str:
    """What to add to "cannot reach" for an https collector when no client certificate is
    set: one that asks for it (serve --tls-client-ca) closes the connection without a word."""
    if not url.lower().startswith("https:") or os.environ.get(CERT_ENV):
        return ""
    return f" (if it asks for a client certificate, set {CERT_ENV} and {KEY_ENV})"
