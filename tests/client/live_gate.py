"""Live `gate serve` processes and a loopback proxy in front of them, for the client tests.

The proxy forwards to a real gate and can, per test, answer errors itself (503, HTML 502),
hold a request past the client's timeout, or rewrite the record it passes back (tampering).
It records every request's method, path and idempotency key.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

GATE = str(Path(sys.executable).parent / "gate")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATE_")}
    # the tests' receivers and OpenID Connect provider listen on loopback (gate.events.outbound)
    return {**env, "GATE_OUTBOUND_ALLOW_HOSTS": "127.0.0.1,localhost", **extra}


def gate_cli(args: list[str], env: dict, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([GATE, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


class LiveGate:
    """`gate serve` in its own process group, ready when /healthz answers."""

    def __init__(self, home: Path, env: dict | None = None, workers: int = 1) -> None:
        self.home = home
        self.env = clean_env(GATE_HOME=str(home), **(env or {}))
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.workers = workers
        self.log = home / "serve.log"
        self.process: subprocess.Popen | None = None

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return gate_cli(list(args), self.env, cwd=self.home)

    def api_key(self, scope: str = "client-tests", **limits: int) -> str:
        extra = [item for name, value in limits.items() for item in (f"--{name.replace('_', '-')}", str(value))]
        done = self.cli("keys", "create", "--scope", scope, "--json", *extra)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["api_key"]

    def start(self) -> LiveGate:
        self.home.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a") as log:
            self.process = subprocess.Popen(
                [GATE, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(self.workers)],
                env=self.env, cwd=self.home, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("gate serve exited:\n" + self.log.read_text())
            try:
                with urllib.request.urlopen(self.base + "/healthz", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("gate serve did not start:\n" + self.log.read_text())

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


@dataclass
class ProxyPlan:
    """What the proxy does with the next requests (tests set it; reset between tests)."""

    fail_first: int = 0  # answer this many requests itself with `fail_status` before forwarding
    fail_status: int = 503
    fail_html: bool = False  # an HTML body (a misbehaving load balancer) instead of the gate's JSON
    delay: float = 0.0  # hold every request this long before forwarding
    rewrite: Callable[[dict], dict] | None = None  # applied to every 2xx JSON body it passes back
    seen: list[dict] = field(default_factory=list)


class Proxy:
    """A threaded loopback HTTP proxy in front of one upstream gate."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.plan = ProxyPlan()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _handle(self) -> None:
                plan = proxy.plan
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                plan.seen.append({"method": self.command, "path": self.path,
                                  "idempotency_key": self.headers.get("x-idempotency-key")})
                if plan.delay:
                    time.sleep(plan.delay)
                if plan.fail_first > 0:
                    plan.fail_first -= 1
                    if plan.fail_html:
                        self._reply(plan.fail_status, b"<html><body>Bad gateway</body></html>", "text/html")
                    else:
                        payload = {"c": "unclear", "v": "unclear", "error": "INTERNAL_ERROR", "message": "injected"}
                        self._reply(plan.fail_status, json.dumps(payload).encode(), "application/json")
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                request = urllib.request.Request(proxy.upstream + self.path, data=body, method=self.command,
                                                 headers=headers)
                try:
                    with urllib.request.urlopen(request, timeout=60) as response:  # a 30 s long-poll
                        status, reply_headers, data = response.status, dict(response.headers), response.read()
                except urllib.error.HTTPError as error:
                    status, reply_headers, data = error.code, dict(error.headers), error.read()
                if plan.rewrite is not None and status < 300:
                    data = json.dumps(plan.rewrite(json.loads(data))).encode()
                extra = {k: v for k, v in reply_headers.items()
                         if k.lower() in ("x-idempotency-status", "retry-after", "x-decision-id")}
                self._reply(status, data, reply_headers.get("Content-Type", "application/json"), extra)

            def _reply(self, status: int, data: bytes, content_type: str, extra: dict | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (extra or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (the timeout test)

            do_GET = do_POST = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> Proxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
