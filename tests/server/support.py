"""Real `gate serve` processes for the server tests: start, call, kill -9, restart."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REDIS_URL = os.environ.get("GATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
GATE = str(Path(sys.executable).parent / "gate")
START_TIMEOUT_S = 120  # how long `Server.start` waits for the first answer


def redis_available() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except Exception:  # noqa: BLE001 - whatever fails, Redis does not answer here
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call(method: str, url: str, body=None, headers=None, timeout: float = 30):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


class RawResponse:
    """An HTTP response read off a raw socket, with the attributes tests use on Flask's."""

    def __init__(self, raw: bytes) -> None:
        head, _, self.body = raw.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status_code = int(lines[0].split()[1])
        self.headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        self.mimetype = self.headers.get("content-type", "").split(";")[0]

    @property
    def json(self):
        return json.loads(self.body)

    def get_data(self, as_text: bool = False):
        return self.body.decode() if as_text else self.body


def raw_exchange(port: int, payload: bytes, timeout: float = 10) -> RawResponse:
    """Send raw bytes (possibly not even HTTP) and read until the server closes or stops sending."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        with contextlib.suppress(OSError):  # the server may refuse and close before taking everything
            sock.sendall(payload)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
                raw = b"".join(chunks)
                head, sep, body = raw.partition(b"\r\n\r\n")
                length = [int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
                          if line.startswith(b"content-length:")]
                if sep and length and len(body) >= length[0]:
                    break
        except ConnectionResetError:
            pass
    return RawResponse(b"".join(chunks))


def worker_pids(master_pid: int) -> list[int]:
    """The gunicorn worker processes of a `gate serve` master."""
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    return [int(pid) for pid in children]


def workers_booted(master_pid: int, workers: int, timeout: float = 60.0) -> None:
    """Wait until `workers` workers run and have finished booting. The first answer comes from
    whichever worker is up first; one still building the app (seconds on a busy host) takes no
    connection yet. Booting is CPU-bound, so the workers have booted once they use (almost) no
    CPU for a second while no request comes."""
    tick = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        total = 0
        for pid in worker_pids(master_pid):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        return total / tick

    deadline, quiet, before = time.time() + timeout, 0, cpu()
    while quiet < 4:
        if time.time() > deadline:
            raise AssertionError(f"the workers of {master_pid} did not settle in {timeout} s")
        time.sleep(0.25)
        now = cpu()
        quiet = quiet + 1 if now - before < 0.02 and len(worker_pids(master_pid)) == workers else 0
        before = now


def peak_rss_kib(pid: int) -> int:
    """Peak resident set size (VmHWM) of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


class Server:
    """One `gate serve --workers N [--threads T]` in its own process group."""

    def __init__(self, env: dict, log_path: Path, workers: int = 3, threads: int | None = None,
                 extra: tuple[str, ...] = ()) -> None:
        self.env, self.log_path, self.workers, self.threads = env, log_path, workers, threads
        self.extra = extra  # more of `gate serve`'s options (`--no-dispatch`)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process = None

    def start(self) -> Server:
        with open(self.log_path, "a") as log:  # the server writes to its own copy of the file
            self.process = subprocess.Popen(
                [GATE, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--workers", str(self.workers)]
                + (["--threads", str(self.threads)] if self.threads else []) + list(self.extra),
                env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        # Three workers importing and building the app at once took 30-35 s at load 10-15 on a
        # shared two-core host (issue 53, defect 6): start-up is not what these tests measure.
        deadline = time.time() + START_TIMEOUT_S
        while time.time() < deadline:
            try:
                if call("GET", self.base + "/api/decision/status", timeout=2)[0] == 200:
                    return self
            except OSError:
                time.sleep(0.2)
        self.kill()
        raise RuntimeError("server did not start:\n" + self.log_path.read_text())

    def kill(self) -> None:
        """SIGKILL the whole process group: master and every worker, mid-request."""
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=15)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=15)


@pytest.fixture
def server_factory(gate_env, tmp_path):
    if not redis_available():
        pytest.skip("Redis does not answer at " + REDIS_URL)
    servers = []

    def start(workers: int = 3, threads: int | None = None, env: dict | None = None) -> Server:
        # The public routes' per-client windows live in the shared Redis under the client's address
        # (127.0.0.1 for every test on this machine): high budgets here, so that servers of other
        # tests and other checkouts do not share one; tests of the budgets pass their own.
        env = {**os.environ, **gate_env, "GATE_REDIS_URL": REDIS_URL, "GATE_PUBLIC_RATE_LIMIT": "1000000",
               "GATE_PUBLIC_VERIFY_RATE_LIMIT": "1000000", **(env or {})}
        server = Server(env, tmp_path / "server.log", workers, threads).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def server(server_factory):
    return server_factory().base
