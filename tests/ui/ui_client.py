"""An HTTP client of the UI that signs in as a browser does (the login form, then the cookie)."""
from __future__ import annotations

import re

import httpx

CSRF = re.compile(r'name="csrf" value="([0-9a-f]+)"')


def csrf_of(html: str) -> str:
    match = CSRF.search(html)
    assert match, "the page has no form with a CSRF token"
    return match.group(1)


def signed_in(url: str, token: str) -> httpx.Client:
    client = httpx.Client(base_url=url, follow_redirects=False, timeout=60)
    login = client.get("/login")
    r = client.post("/login", data={"token": token, "csrf": csrf_of(login.text), "next": "/"})
    assert r.status_code == 303, r.text
    return client
