"""The TLS context a replay child's first HTTP client builds, built by the zygote before it forks.

An SDK's HTTP client builds a TLS context when it is made, and loading the system's CA
certificates into it costs about 18 ms of CPU (OpenSSL parses every one): a third of a demo
replay child's CPU time, since an agent makes its client in each run. So the zygote builds
one context with the HTTP library's own defaults (httpx's `create_ssl_context()`: verify, no
client certificate, the CA settings of the environment, which a child shares: its environment
differs by TRACEFIX_REPLAY only), and the library's transports hand it to the first client a
forked child makes with those defaults, unless the agent changed the environment the context
is made from; every other call builds its own, as before. Each child has its own copy of it
(fork), so no two clients share one. What a long-lived zygote built is what its children get:
CA certificates changed on disk since reach a replay's first client once the zygote is started
again, as with anything else it preloaded.
"""
from __future__ import annotations

import os
import sys
from typing import Any, Callable

LIBRARIES = ("httpx", "httpx2")  # the HTTP libraries of the SDKs tracefix traces (and a fork of httpx)
# what a default context is built from besides the files: an agent that sets one of these
# before it makes its client gets a context built then
ENVIRONMENT = ("SSL_CERT_FILE", "SSL_CERT_DIR", "SSLKEYLOGFILE")


def prebuild(libraries: tuple[str, ...] = LIBRARIES) -> list[str]:
    """In the zygote: build a context for each of `libraries` already imported, and have its
    transports hand it to a forked child's first default client. The libraries done."""
    done = []
    for name in libraries:
        transports = sys.modules.get(f"{name}._transports.default")
        build = getattr(transports, "create_ssl_context", None)
        if build is None or hasattr(build, "spare"):
            continue
        try:
            context = build()
        except Exception as exc:  # another version of the library: its clients build their own
            print(f"tracefix zygote: no prebuilt TLS context for {name}: {type(exc).__name__}: {exc}", file=sys.stderr,
                  flush=True)
            continue
        transports.create_ssl_context = _first_prebuilt(build, context)  # type: ignore[union-attr]
        done.append(name)
    return done


def _first_prebuilt(build: Callable[..., Any], context: Any) -> Callable[..., Any]:
    zygote = os.getpid()
    spare = [context]
    built_in = _environment()

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: Any = True, **more: Any) -> Any:
        if spare and verify is True and cert is None and trust_env is True and not more and os.getpid() != zygote \
                and _environment() == built_in:
            return spare.pop()  # the defaults' context, built before the fork: this process's only user
        return build(verify=verify, cert=cert, trust_env=trust_env, **more)

    create_ssl_context.spare = spare  # type: ignore[attr-defined]
    return create_ssl_context


def _environment() -> tuple:
    return tuple(os.environ.get(name) for name in ENVIRONMENT)
