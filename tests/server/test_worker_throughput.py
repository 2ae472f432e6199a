"""What keeps `gate serve`'s workers busy and their pauses short under load (issue 23).

- New connections are shared between the workers. gunicorn's workers all wait on one listening
  socket and race for each new connection; a pool of keep-alive clients often landed on one
  worker (16 of 16 `wrk` connections on one of two): that worker's threads then queued every
  request while the other process, and its core, idled. `GateWorker.accept` now steps back from
  a new connection while it already holds a full share (its threads' worth), so a worker holding
  less takes it first.
- A worker freezes what its app built out of the collector's full passes (`GateWorker.load_wsgi`).
"""

from __future__ import annotations

import http.client
import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from api.serving import ACCEPT_ALONE_AFTER, ACCEPT_STEP_BACK_S, GateWorker
from tests.server.support import worker_pids, workers_booted

pytestmark = pytest.mark.slow


def _established_per_worker(master_pid: int, port: int) -> list[int]:
    """How many established connections to `port` each worker process holds (from /proc)."""
    suffix = f":{port:04X}"
    established = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(suffix) and fields[3] == "01":  # local address, state ESTABLISHED
            established.add(fields[9])  # the socket's inode
    counts = []
    for pid in worker_pids(master_pid):
        inodes = set()
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
        counts.append(len(inodes & established))
    return sorted(counts)


def _burst(port: int, connections: int) -> list[http.client.HTTPConnection]:
    """Open every connection at once (as a client pool or `wrk` does), then one request on each."""
    opened = [http.client.HTTPConnection("127.0.0.1", port, timeout=10) for _ in range(connections)]
    for connection in opened:
        connection.connect()
    for connection in opened:
        connection.request("GET", "/healthz")
    for connection in opened:
        answer = connection.getresponse()
        answer.read()
        assert answer.status == 200
    return opened


def test_a_burst_of_keep_alive_connections_is_shared_between_the_workers(server_factory):
    server = server_factory(workers=2, threads=4)
    workers_booted(server.process.pid, 2)
    for connection in _burst(server.port, 8):  # each worker's first requests warm it up
        connection.close()
    splits = []
    for _ in range(3):
        opened = _burst(server.port, 8)
        try:
            counts = _established_per_worker(server.process.pid, server.port)
        finally:
            for connection in opened:
                connection.close()
        assert sum(counts) == 8, counts
        splits.append(counts)
    # A share (4) each; one late wake-up may cost one. Racing, the workers split 8 connections
    # 1:7 in four bursts of six, 2:6 and 3:5 in the others (measured), so two shared bursts of
    # three pass by chance about once in fourteen. Shared, a burst can still go to one worker on a
    # loaded host: a worker whose step-backs went untaken 3 times in a row takes every connection
    # (`ACCEPT_ALONE_AFTER`), and a CI run once saw 0:8 while the whole suite ran beside it.
    assert sum(counts[0] >= 3 for counts in splits) >= 2, splits


def _stub_worker(workers: int, threads: int, held: int, alone_until: float = float("-inf")):
    return SimpleNamespace(cfg=SimpleNamespace(workers=workers, threads=threads), nr_conns=held,
                           _accept_alone_until=alone_until)


def test_a_worker_steps_back_only_when_it_holds_a_full_share_and_has_company():
    def step_back(workers: int, threads: int, held: int, alone_until: float = float("-inf")) -> float:
        return GateWorker.accept_step_back(_stub_worker(workers, threads, held, alone_until))

    assert step_back(2, 8, 0) == 0
    assert step_back(2, 8, 7) == 0
    assert step_back(2, 8, 8) == ACCEPT_STEP_BACK_S
    assert step_back(2, 8, 500) == ACCEPT_STEP_BACK_S  # constant however many it holds
    assert step_back(1, 8, 64) == 0  # the only worker takes every connection at once
    assert step_back(3, 1, 1) == ACCEPT_STEP_BACK_S
    assert step_back(2, 8, 8, alone_until=time.monotonic() + 60) == 0  # the others were full


def test_when_every_worker_is_full_a_few_connections_pay_the_step_and_the_next_ones_do_not(tmp_path):
    """Clients that open a connection per request keep every worker full under load: stepping
    back from each new connection would cap a worker at one accept per step. A worker that finds
    the connection still there after `ACCEPT_ALONE_AFTER` steps in a row accepts at once for
    `ACCEPT_ALONE_S`."""
    import logging
    import selectors
    import socket

    from gunicorn.config import Config

    cfg = Config()
    cfg.set("workers", 2)
    cfg.set("threads", 1)
    cfg.set("worker_tmp_dir", str(tmp_path))
    listener = socket.create_server(("127.0.0.1", 0))
    worker = GateWorker(0, os.getpid(), [listener], SimpleNamespace(), 30, cfg, logging.getLogger("test"))
    worker.poller = selectors.DefaultSelector()
    worker.nr_conns = 1  # a full share: its one thread's worth
    clients = []
    try:
        worker.set_accept_enabled(True)
        clients.append(socket.create_connection(listener.getsockname()))
        for held in range(1, 1 + ACCEPT_ALONE_AFTER):  # each pays the step: the others may be slow
            if held > 1:
                clients.append(socket.create_connection(listener.getsockname()))
            started = time.monotonic()
            worker.wait_for_and_dispatch_events(1.0)  # the connection: the worker steps back
            assert worker.nr_conns == held and worker._accept_paused_until is not None
            while worker.nr_conns == held and time.monotonic() - started < 5:
                worker.wait_for_and_dispatch_events(0.05)  # the pause ends; nobody else took it
            assert worker.nr_conns == held + 1
            assert time.monotonic() - started >= ACCEPT_STEP_BACK_S
        for _ in range(3):  # then the next ones are accepted at once
            clients.append(socket.create_connection(listener.getsockname()))
            worker.wait_for_and_dispatch_events(1.0)
        assert worker.nr_conns == 1 + ACCEPT_ALONE_AFTER + 3 and worker._accept_paused_until is None
    finally:
        for client in clients:
            client.close()
        for conn in worker.pending_conns:
            conn.close()
        worker.poller.close()
        listener.close()
        worker.tmp.close()


def test_a_worker_freezes_what_its_app_built_out_of_the_collectors_full_passes(tmp_path):
    """A full collection walked the app's ~320,000 objects: an 80-110 ms stop of every thread of
    the worker, the decide tail's 99th percentile. The worker freezes them once the app is built."""
    import gc
    import logging

    from gunicorn.config import Config

    built: list[int] = []

    class App:
        def wsgi(self):
            built.append(gc.get_freeze_count())
            return lambda environ, start_response: []

    cfg = Config()
    cfg.set("worker_tmp_dir", str(tmp_path))
    worker = GateWorker(0, os.getpid(), [], App(), 30, cfg, logging.getLogger("test"))
    gc.unfreeze()
    try:
        assert gc.get_freeze_count() == 0
        worker.load_wsgi()
        assert built == [0]  # frozen after the app was built, not before
        assert gc.get_freeze_count() > 1000
        assert callable(worker.wsgi)
    finally:
        gc.unfreeze()
        worker.tmp.close()
