"""The web UI's sign-in is a session the collector keeps, not a value derived from the token:
each login gets its own random cookie, which logout ends for good (a copy kept by someone
else included), idling ends, and a restart ends, with another --token or the same. A real
`tracefix serve`, signed in through its login form."""
from __future__ import annotations

import time
from contextlib import closing

import httpx
import pytest
from ui_client import csrf_of, signed_in

import procs

TOKEN = "ui-session-token"
COOKIE = "tracefix_ui"
IDLE_S = 2.4
PAGES = ["/", "/api/v1/sessions"]  # a UI page, and an API read the cookie opens


def start(db, token: str = TOKEN):
    return procs.start_serve(db, "--diagnose", "off", "--token", token,
                             "--ui-session-idle-minutes", str(IDLE_S / 60), env={"TRACEFIX_TOKEN": ""})


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    p = start(tmp_path_factory.mktemp("ui-sessions") / "s.duckdb")
    yield p
    p.stop()


def opens(url: str, cookie: str) -> bool:
    """Whether `cookie`, sent on its own by a fresh client, opens both a page and an API read."""
    with httpx.Client(base_url=url, cookies={COOKIE: cookie}, follow_redirects=False, timeout=30) as client:
        answers = [client.get(path).status_code for path in PAGES]
    assert answers in ([200, 200], [303, 401]), answers  # a page sends to /login; the API says 401
    return answers == [200, 200]


def log_out(client: httpx.Client) -> None:
    page = client.get("/jobs")
    assert client.post("/logout", data={"csrf": csrf_of(page.text)}).status_code == 303


def test_logout_ends_the_session_and_every_login_has_its_own(serve):
    url = serve.match["http"]
    first, second = signed_in(url, TOKEN), signed_in(url, TOKEN)
    try:
        one, two = first.cookies[COOKIE], second.cookies[COOKIE]
        assert one != two and TOKEN not in one and len(one) >= 40
        assert opens(url, one) and opens(url, two)
        log_out(first)
        assert not opens(url, one)  # a copy of the cookie, replayed after logout
        assert opens(url, two)  # the other login goes on
        assert first.get("/").status_code == 303
    finally:
        first.close()
        second.close()


def test_a_session_ends_after_idling_and_requests_keep_it_open(serve):
    url = serve.match["http"]
    with closing(signed_in(url, TOKEN)) as client:
        cookie = client.cookies[COOKIE]
        for _ in range(5):  # 4 s of use, a request every 0.8 s: longer than the idle limit
            time.sleep(0.8)
            assert opens(url, cookie)
        time.sleep(IDLE_S + 0.6)
        assert not opens(url, cookie)
        assert client.get("/").status_code == 303  # to the login page


@pytest.mark.parametrize("token", ["rotated-token", TOKEN])
def test_a_restart_ends_every_session(tmp_path, token):
    db = tmp_path / "r.duckdb"
    serve = start(db)
    try:
        with closing(signed_in(serve.match["http"], TOKEN)) as client:
            cookie = client.cookies[COOKIE]
        assert opens(serve.match["http"], cookie)
    finally:
        assert serve.stop() == 0
    serve = start(db, token)
    try:
        assert not opens(serve.match["http"], cookie)
        with closing(signed_in(serve.match["http"], token)) as client:
            assert opens(serve.match["http"], client.cookies[COOKIE])
    finally:
        serve.stop()
