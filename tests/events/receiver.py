"""A webhook receiver for the tests: a real HTTP server on loopback that verifies every delivery
with the `standardwebhooks` package (not with the gate's own code) and keeps what it accepted.
It can be told to answer 500 for a stretch, to stand for a receiver that is down, to answer any
status with any headers (410 Gone, 429 with `Retry-After`), or to hang: verify the delivery, then
never answer while `hang` is set (the connection stays open until the sender gives up), or only
for the paths that start with `hang_prefix` (one receiver host shared by tenants, issue 64)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError


class Receiver:
    """`keep_alive`: answer in HTTP/1.1 and keep the connection (HTTP/1.0, one connection per
    delivery, otherwise); `drop_kept`: then close it after each answer anyway, without saying so
    (a receiver that drops idle connections, as a kept one finds out only when it posts again)."""

    def __init__(self, keep_alive: bool = False) -> None:
        self.secrets: list[str] = []
        self.peers: list[int] = []  # the sender's port of each delivery: one per connection used
        self.drop_kept = False
        self.accepted: list[dict[str, Any]] = []  # CloudEvents, in arrival order
        self.bodies: list[bytes] = []  # every body received, verified or not, as its bytes
        self.rejected = 0
        self.headers: list[dict[str, str]] = []
        self.failing = False
        self.answer: tuple[int, dict[str, str]] | None = None  # (status, headers) instead of verifying's
        self.hang = False
        self.hang_prefix: str | None = None
        self.released = threading.Event()  # set at close: hanging handlers end
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def do_POST(self) -> None:
                receiver.peers.append(self.client_address[1])
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                hang = receiver.hang or (receiver.hang_prefix is not None and self.path.startswith(receiver.hang_prefix))
                status = receiver.take(body, headers, hang)
                if hang:
                    receiver.released.wait(120)
                    return
                extra = receiver.answer[1] if receiver.answer is not None else {}
                self.send_response(status)
                for name, value in extra.items():
                    self.send_header(name, value)
                answer = b"<b>down for maintenance</b>" if status >= 500 else b"" if status == 204 else b"ok"
                self.send_header("content-type", "text/plain")
                if status != 204:  # a 204 has no body, nor its length
                    self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)
                if receiver.drop_kept:
                    self.close_connection = True

            def log_message(self, *_args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.url = self.base + "/hooks/gate?x=1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def take(self, body: bytes, headers: dict[str, str], hang: bool = False) -> int:
        with self.lock:
            self.headers.append(headers)
            self.bodies.append(body)
            if self.failing:
                return 500
            for secret in self.secrets:
                try:
                    Webhook(secret).verify(body, headers)
                except WebhookVerificationError:
                    continue
                if self.answer is not None or hang:
                    return self.answer[0] if self.answer is not None else 0  # verified, not accepted
                self.accepted.append(json.loads(body))
                return 204
            self.rejected += 1
            return 401

    def sequences(self, scope: str | None = None) -> list[int]:
        with self.lock:
            return [int(e["sequence"]) for e in self.accepted
                    if scope is None or e["source"].endswith(":" + scope)]

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
