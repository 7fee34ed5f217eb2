"""A local HTTP endpoint that keeps every alert POSTed to it: what `tracefix demo` gives the
collector as its webhook, in place of a team's chat (:class:`WebhookReceiver`)."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class WebhookReceiver:
    """A local HTTP endpoint that keeps every alert POSTed to it (what a Slack webhook would get)."""

    def __init__(self):
        self.alerts: list[dict] = []
        self._arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    alert = json.loads(body)
                except ValueError:
                    alert = {"raw": body.decode("utf-8", "replace")}
                with receiver._arrived:
                    receiver.alerts.append(alert)
                    receiver._arrived.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):  # the demo prints its own progress
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        threading.Thread(target=self.server.serve_forever, name="webhook-receiver", daemon=True).start()

    def wait_for(self, session_ids: set[str], timeout: float) -> set[str]:
        """The session ids that got an alert within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                got = {a.get("session_id") for a in self.alerts} & session_ids
                left = deadline - time.monotonic()
                if got == session_ids or left <= 0:
                    return got
                self._arrived.wait(left)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
