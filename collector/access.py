"""Store access for every part of tracefix (docs/contracts.md §2).

    from tracefix.collector.access import connect
    with connect() as store:               # a running `tracefix serve`, else the DuckDB file
        for s in store.list_sessions(feedback="negative"):
            doc = store.get_session(s["session_id"])

`connect(server=None, db=None, token=None, create=True)`:
- `server` (or TRACEFIX_SERVER): talk HTTP to that collector; one that does not answer
  `/healthz` (or is no http(s) URL) is an AccessError naming it, never a fall back to a file;
- otherwise a collector on the default port serving the same file is used when one runs
  (the collector process is the only writer of its file; its unauthenticated `/healthz`
  names the file by `store_identity`, never by its path), and, for a verb that only reads
  (`create=False`), also when there is no such file here;
- otherwise the file `db` (or TRACEFIX_DB, default ./.tracefix/tracefix.duckdb) is opened;
  with `create=False` a missing file is an AccessError saying where it looked.
A collector found either way that answers `/healthz` with 503 "unhealthy" (its store cannot
write) is an AccessError that says why, never a reason to open its file instead.
`token` (or TRACEFIX_TOKEN) is the collector's bearer token.

The three implementations (HTTP, file, in-process inside `tracefix serve`) have the same
methods and return the same JSON shapes: `HttpAccess` (http_access.py) and `StoreAccess`
(store_access.py, the file or the serve's writer); `AccessError` is in access_base.py. This
module finds which one to use.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping

from tracefix.client_tls import certificate_hint, client_context
from tracefix.collector import db_path
from tracefix.collector.access_base import AccessError
from tracefix.collector.http_access import HttpAccess
from tracefix.collector.store_access import StoreAccess

# the access objects and their error live in modules of their own; callers get them here
__all__ = ["DEFAULT_SERVER", "AccessError", "HttpAccess", "StoreAccess", "checked_server", "collector_health",
           "collector_url", "connect", "refuse_unhealthy", "serves_file", "store_identity"]

DEFAULT_SERVER = "http://127.0.0.1:4318"


def collector_health(server: str, timeout: float) -> dict | None:
    """What a tracefix serve at `server` says on /healthz: its answer, an unhealthy one's 503
    included (`refuse_unhealthy`); None when nothing there answers as one."""
    context = client_context()  # outside the try: unusable client TLS settings are said, not taken for "no collector"
    try:
        with urllib.request.urlopen(server.rstrip("/") + "/healthz", timeout=timeout, context=context) as resp:
            return json.loads(resp.read()) if resp.status == 200 else None
    except urllib.error.HTTPError as exc:  # 503: a collector whose store cannot write says so and why
        try:
            answer = json.loads(exc.read()) if exc.code == 503 else None
        except (OSError, ValueError, http.client.HTTPException):
            return None
        return answer if isinstance(answer, dict) and answer.get("status") == "unhealthy" else None
    except (OSError, ValueError, http.client.HTTPException):  # HTTPException: a port that speaks no HTTP
        return None


def refuse_unhealthy(server: str, health: Mapping[str, Any]) -> None:
    """Raise AccessError (503) saying why, when the collector that answered `health` cannot write
    its store. It is still the store's only writer: nobody should open the file instead."""
    if health.get("status") == "unhealthy":
        raise AccessError(f"tracefix serve at {server} is unhealthy, its store cannot write: "
                          f"{health.get('reason') or 'no reason given'}", 503)


def store_identity(path: str | os.PathLike) -> str | None:
    """Which file a store is, without saying where it is: a hash of the file's device and
    inode (what `os.path.samefile` compares). `/healthz` shows it to anyone; whoever can
    stat the same file computes the same value, nobody learns the path from it."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # no such file, or ':memory:'
        return None
    return hashlib.sha256(f"tracefix store identity v1:{st.st_dev}:{st.st_ino}".encode()).hexdigest()[:32]


def serves_file(health: dict | None, path: str | os.PathLike) -> bool:
    """Whether the collector that answered `health` owns the DuckDB file at `path`."""
    theirs = (health or {}).get("store_id")
    return isinstance(theirs, str) and theirs == store_identity(path)


def checked_server(server: str) -> str:
    """`server` without its trailing slash when it is an http:// or https:// URL; an AccessError
    naming it otherwise (`127.0.0.1:4318` without a scheme is no URL a request can go to)."""
    parts = urllib.parse.urlsplit(server.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise AccessError(f"--server / TRACEFIX_SERVER {server!r} is not a URL: give it with its scheme, "
                          f"e.g. http://{server.split('://')[-1].strip('/') or '127.0.0.1:4318'}")
    return server.strip().rstrip("/")


def collector_url(server: str | None = None, db: str | os.PathLike | None = None, create: bool = True) -> str | None:
    """The collector to go through, or None to open the store file itself.

    `server` (or TRACEFIX_SERVER) must answer: one that does not is an AccessError naming it,
    never a reason to open a local file instead. Without it, the collector on the default port
    is used when it owns the file `db`, or, unless `create`, when there is no such file (a
    verb run from another folder than the serve's). With `create` False, no file and no
    collector is an AccessError that says where it looked and how to point it elsewhere."""
    explicit = server or os.environ.get("TRACEFIX_SERVER") or None
    if explicit:
        url = checked_server(explicit)
        health = collector_health(url, timeout=2.0)
        if health is None:
            raise AccessError(f"no tracefix serve answers at {url} (--server / TRACEFIX_SERVER)"
                              f"{certificate_hint(url)}")
        refuse_unhealthy(url, health)
        return url
    path = db_path(db)
    exists = os.path.exists(path)
    health = collector_health(DEFAULT_SERVER, timeout=0.3)
    if health is not None and (serves_file(health, path) or not (exists or create)):
        refuse_unhealthy(DEFAULT_SERVER, health)
        return DEFAULT_SERVER
    if not exists and not create:
        raise AccessError(f"no tracefix serve answers at {DEFAULT_SERVER} and there is no store file "
                          f"{os.path.abspath(path)}: start `tracefix serve`, or say where the store is with "
                          "--server URL (TRACEFIX_SERVER) or --db PATH (TRACEFIX_DB)")
    return None


def connect(server: str | None = None, db: str | os.PathLike | None = None, token: str | None = None,
            create: bool = True):
    """An access object: HTTP to a running collector when one answers, else the DuckDB file
    (`collector_url`; with `create` False a missing file is an AccessError, never a new store)."""
    token = token or os.environ.get("TRACEFIX_TOKEN") or None
    url = collector_url(server, db, create)
    if url is not None:
        return HttpAccess(url, token)
    path = db_path(db)
    import duckdb

    from tracefix.collector.store import Store

    try:
        # a store this process may not write (an archived copy, a read-only mount) is browsed read-only
        read_only = not _writable(path)
        return StoreAccess(Store(path, read_only=read_only), owns_store=True, read_only=read_only)
    except Exception as exc:
        if "lock" in str(exc).lower():
            raise AccessError(f"{path} is held by a running tracefix serve; pass --server URL "
                              f"(or TRACEFIX_SERVER) to go through it") from exc
        if isinstance(exc, (OSError, duckdb.IOException)):
            raise AccessError(f"cannot open the store {os.path.abspath(path)}: {exc}") from exc
        raise


def _writable(path: str) -> bool:
    """Whether this process may write the store file `path` and the WAL beside it (a file not
    there yet is created, so counts as writable)."""
    if not os.path.exists(path):
        return True
    return os.access(path, os.W_OK) and os.access(os.path.dirname(os.path.abspath(path)), os.W_OK)
