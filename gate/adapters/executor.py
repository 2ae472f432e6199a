"""One-shot isolated execution of trusted adapters, with a small pool of warm, never-reused workers.

Each run gets its own worker process (`gate/adapters/worker.py`): started with ``python -I -S
-B`` (no environment variables read, no user or site start-up), an **empty environment**, cwd
``/``, no inherited descriptors besides its two pipes and a new session. Inside, the worker
bounds its address space (`memory_mb`), its CPU time, file sizes (0) and process creation, and
installs the capability audit hook before any adapter code runs. The gate sends the job, reads
the worker's output until it exits (at most 1 MiB), waits at most `timeout_ms` (1,000 ms) in all
and then kills the whole session. Only a worker that exited 0 with exactly one line has a result;
exit status `DENIED_EXIT_STATUS` is a refused capability, whatever was written before it. A worker
serves exactly one job and is then killed and reaped.

Start-up of a Python process costs tens of milliseconds (measured by
`benchmarks/bench_adapters.py`), far more than an adapter's own work, so the executor keeps up
to `pool_size` workers started ahead of time. They are *warm* (interpreter up, limits and hook
installed, waiting for a job), never *reused*: taking one out of the pool starts a replacement.
The pool belongs to one OS process: after a `fork` (gunicorn workers) the child discards the
parent's idle workers and starts its own; threads share the pool under a lock, each job using
its own process and pipes.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from pathlib import Path
from typing import IO, TYPE_CHECKING, cast

from gate.adapters.worker import DENIED_EXIT_STATUS
from gate.errors import GateError

if TYPE_CHECKING:
    from gate.adapters.worker import Job, WorkerMessage

WORKER_SCRIPT = str(Path(__file__).resolve().with_name("worker.py"))
MAX_RESULT_BYTES = 1_048_576
STARTUP_TIMEOUT_S = 10.0


def _pipe(stream: IO[bytes] | None) -> IO[bytes]:
    """A pipe the worker was started with (`subprocess.PIPE`: never None)."""
    if stream is None:  # pragma: no cover - Popen always opens a requested pipe
        raise OSError("the adapter worker has no pipe")
    return stream


class _Worker:
    """One started worker process and its pipes."""

    __slots__ = ("_buffer", "proc", "started")

    def __init__(self, memory_mb: int) -> None:
        self.started = time.perf_counter()
        self._buffer = b""
        self.proc = subprocess.Popen(  # noqa: S603 - our own interpreter and worker script, no shell
            [sys.executable, "-I", "-S", "-B", WORKER_SCRIPT, str(memory_mb)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={}, cwd="/", close_fds=True, start_new_session=True,
        )

    def _read_chunk(self, deadline: float) -> bytes | None:
        """What the worker wrote next (at most 64 KiB); b"" at EOF; None once the deadline passes."""
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return None
        fd = _pipe(self.proc.stdout).fileno()
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            return None
        return os.read(fd, 65536)

    def read_line(self, deadline: float, limit: int = MAX_RESULT_BYTES) -> bytes | None:
        """The next line (without newline); b"" at EOF or past `limit`; None at the deadline."""
        while b"\n" not in self._buffer:
            if len(self._buffer) > limit:
                return b""
            chunk = self._read_chunk(deadline)
            if not chunk:
                return chunk  # None at the deadline, b"" at EOF
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def read_to_end(self, deadline: float, limit: int = MAX_RESULT_BYTES) -> bytes | None:
        """Everything the worker writes until it closes its end (exits); None at the deadline.
        More than `limit` bytes raise OverflowError (the parent never buffers more)."""
        chunks, size = [self._buffer], len(self._buffer)
        self._buffer = b""
        while True:
            chunk = self._read_chunk(deadline)
            if chunk is None:
                return None
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > limit:
                raise OverflowError("worker output over the limit")
            chunks.append(chunk)

    def exit_status(self, deadline: float) -> int | None:
        """The worker's exit status once it has exited (negative: killed by that signal), None when
        it is still running at the deadline. The worker is left unreaped (WNOWAIT), so its pid and
        process group stay reserved until `terminate` has signalled the whole session."""
        delay = 0.0002
        while True:
            try:
                info = os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return self.proc.returncode if self.proc.returncode is not None else -1
            if info is not None and info.si_pid:
                return info.si_status if info.si_code == os.CLD_EXITED else -info.si_status
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return None
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 0.01)

    def send(self, data: bytes) -> bool:
        try:
            stdin = _pipe(self.proc.stdin)
            stdin.write(data)
            stdin.flush()
            return True
        except (BrokenPipeError, OSError):
            return False

    def terminate(self) -> None:
        """SIGKILL the worker's whole session and close our pipe ends (no waiting)."""
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def reap(self) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored
            self.proc.wait(timeout=5)

    def kill(self) -> None:
        self.terminate()
        self.reap()


def _denied_report(output: bytes) -> list[str]:
    """The capability the worker's hook refused, from its last report line ("unknown" when unreadable)."""
    for line in reversed(output.splitlines()):
        try:
            report = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(report, dict) and report.get("error") == "denied" and isinstance(report.get("denied"), list):
            names = [str(name)[:80] for name in report["denied"] if isinstance(name, str)]
            return names[:16] or ["unknown"]
    return ["unknown"]


_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


@atexit.register
def _close_pools() -> None:  # pragma: no cover - interpreter shutdown
    for pool in list(_POOLS):
        pool.close()


class WorkerPool:
    """Spawns one-shot workers; keeps up to `size` warm ones ready (0 = always cold)."""

    def __init__(self, *, size: int = 2, memory_mb: int = 256, timeout_ms: int = 1000) -> None:
        if not 0 <= size <= 16:
            raise ValueError("pool size must be 0..16")
        if not 32 <= memory_mb <= 65536:
            raise ValueError("memory_mb must be 32..65536")
        self.size = size
        self.memory_mb = memory_mb
        self.timeout_ms = timeout_ms
        self._lock = threading.Lock()
        self._idle: deque[_Worker] = deque()
        self._pid = os.getpid()
        self.cold_starts = 0
        self.warm_starts = 0
        _POOLS.add(self)

    # ------------------------------------------------------------------ pool

    def _own_idle(self) -> deque[_Worker]:
        """The idle deque, emptied first when this process is a fork of the pool's creator."""
        if self._pid != os.getpid():  # the parent's workers are not ours to use or kill
            self._idle = deque()
            self._pid = os.getpid()
        return self._idle

    def warm(self) -> None:
        """Fill the pool up to `size`. Workers are started outside the lock (a start costs a
        fork and exec); each becomes ready on its own."""
        with self._lock:
            missing = self.size - len(self._own_idle())
        started = []
        try:
            for _ in range(max(0, missing)):
                started.append(_Worker(self.memory_mb))
        finally:
            with self._lock:
                idle = self._own_idle()
                for worker in started:
                    if len(idle) < self.size:
                        idle.append(worker)
                    else:
                        worker.kill()

    def _after_job(self, used: _Worker) -> None:
        """Off the request path (a short-lived daemon thread): reap the used worker, then start
        its replacement. Reaping waits for the kernel to tear the process down; starting costs a
        fork and exec. Neither belongs in the job's latency."""
        threading.Thread(target=self._reap_and_refill, args=(used,), name="adapter-pool-refill",
                         daemon=True).start()

    def _reap_and_refill(self, used: _Worker) -> None:
        used.reap()
        if self.size:
            with contextlib.suppress(OSError):  # the next job starts cold or reports 503
                self.warm()

    def _take(self) -> tuple[_Worker, bool]:
        with self._lock:
            idle = self._own_idle()
            while idle:
                worker = idle.popleft()
                if worker.proc.poll() is None:
                    self.warm_starts += 1
                    return worker, True
                worker.kill()
        self.cold_starts += 1
        return _Worker(self.memory_mb), False

    def close(self) -> None:
        with self._lock:
            idle = self._own_idle()
            while idle:
                idle.popleft().kill()

    # ------------------------------------------------------------------ one job

    def execute(self, job: Job, *, adapter_id: str, version: str) -> WorkerMessage:
        """Run one job in a fresh worker; the worker's result message, or a GateError.

        504 `TRUSTED_ADAPTER_EXECUTION_TIMEOUT` past the budget (the worker is killed);
        503 `TRUSTED_ADAPTER_UNAVAILABLE` when no worker could be started; a worker that dies or
        answers garbage is 500 `TRUSTED_ADAPTER_OUTPUT_INVALID`.
        """
        detail = {"adapter_id": adapter_id, "version": version}
        try:
            worker, _pooled = self._take()
        except OSError as exc:
            raise GateError("TRUSTED_ADAPTER_UNAVAILABLE", "no adapter worker could be started",
                            reason=type(exc).__name__, **detail) from None
        try:
            ready = worker.read_line(time.perf_counter() + STARTUP_TIMEOUT_S, limit=4096)
            if not ready:
                raise GateError("TRUSTED_ADAPTER_UNAVAILABLE", "the adapter worker did not start",
                                reason="worker_start_failed", **detail)
            payload = (json.dumps(job, ensure_ascii=True, separators=(",", ":")) + "\n").encode()
            started = time.perf_counter()
            output, status = self._run_job(worker, payload, started + self.timeout_ms / 1000.0, detail)
            return _result_message(output, status, started, detail)
        finally:
            worker.terminate()
            self._after_job(worker)

    def _run_job(self, worker: _Worker, payload: bytes, deadline: float,
                 detail: dict[str, str]) -> tuple[bytes, int]:
        """Send the job and wait, until `deadline` at most, for the worker's whole output and its
        exit status."""
        if not worker.send(payload):
            raise GateError("TRUSTED_ADAPTER_OUTPUT_INVALID", "the adapter worker exited before its job",
                            reason="worker_exited", **detail)
        try:
            output = worker.read_to_end(deadline)
        except OverflowError:
            raise GateError("TRUSTED_ADAPTER_OUTPUT_INVALID", "the adapter worker's result is too large",
                            reason="result_too_large", **detail) from None
        status = None if output is None else worker.exit_status(deadline)
        if output is None or status is None:
            raise GateError("TRUSTED_ADAPTER_EXECUTION_TIMEOUT",
                            f"the adapter did not finish within its {self.timeout_ms} ms budget",
                            execution_timeout_ms=self.timeout_ms, **detail)
        return output, status


def _result_message(output: bytes, status: int, started: float, detail: dict[str, str]) -> WorkerMessage:
    """What a finished worker's output and exit status mean: a refusal, its one result line, or
    500 `TRUSTED_ADAPTER_OUTPUT_INVALID`; with the job's duration since `started`."""
    if status == DENIED_EXIT_STATUS:
        # SECURITY: the hook ended the worker on a refused capability; whatever the adapter
        # wrote before that (a forged result included) is discarded.
        return {"ok": False, "error": "denied", "denied": _denied_report(output),
                "duration_ms": round((time.perf_counter() - started) * 1000, 3)}
    # A worker that finished answers exactly one line and exits 0; anything else (killed,
    # crashed, several lines, no newline) is not a result.
    if status != 0 or not output.endswith(b"\n") or output.count(b"\n") != 1:
        raise GateError("TRUSTED_ADAPTER_OUTPUT_INVALID", "the adapter worker ended without a result",
                        reason="worker_exited", **detail)
    try:
        message = json.loads(output)
    except (ValueError, RecursionError):
        message = None
    if not isinstance(message, dict) or "ok" not in message:
        raise GateError("TRUSTED_ADAPTER_OUTPUT_INVALID", "the adapter worker's result is unreadable",
                        reason="unreadable_result", **detail)
    message["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
    # The worker's one result line, an object with `ok`: `_checked_output` reads each member it
    # uses as the worker wrote it (the output against the adapter's schema).
    return cast("WorkerMessage", message)
