"""`gate dispatch`: the serving processes' background work in a process of its own (issue 68,
item 1; docs/operating.md, "Deployment"). Every `PeriodicWorker` a `gate serve` worker starts when
GATE_EVENTS_DISPATCH is on, composed by the same composition root: the webhook deliveries (and
their NATS mirror), the outbox's retention, the scheduled reports, the reviewers' notices and the
hold sweeper. The deployment runs it beside `gate serve --no-dispatch`, so a decide never shares
its worker's GIL and core with a delivery.

Any number may run against one ledger: the leases in the ledger (a subscription's, a stream's, a
notice kind's) let one at a time deliver each, and one that dies leaves its leases to expire. It
runs until SIGTERM or SIGINT, then stops taking work, lets the running turns finish (up to
`STOP_SECONDS`) and exits 0; a turn cut short (or a kill -9) posts its unwritten events again
on the next turn (at least once, docs/events.md, "Guarantees")."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

from gate_cli.context import load_settings, open_ledger
from gate_cli.help import Subparsers

if TYPE_CHECKING:
    from gate.ledger import Ledger
    from gate.services.events import Dispatcher
    from gate.services.periodic import PeriodicWorker
    from gate.settings import Settings

STOP_SECONDS = 10.0  # how long a stop waits for the running delivery turns


def add_dispatch_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "dispatch",
        description="Run every background worker of the serving processes in this process: webhook deliveries "
                    "and the NATS mirror, the outbox's retention, scheduled reports, reviewers' notices and the "
                    "hold sweeper, until SIGTERM (graceful). Any number may run on one ledger; its leases keep "
                    "two from delivering the same subscription.")
    p.set_defaults(func=cmd_dispatch)


def cmd_dispatch(_args: argparse.Namespace, settings: Settings | None = None) -> int:
    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    return run_dispatch(settings or load_settings(), stop)


def dispatch_workers(settings: Settings) -> tuple[Dispatcher, PeriodicWorker, Ledger]:
    """(the dispatcher and the hold sweeper a serving process would start, the ledger), composed by
    the serving composition root with dispatch on whatever GATE_EVENTS_DISPATCH says."""
    from gate.services.root import signing_setup
    from workbench.services.root import compose

    ledger = open_ledger(settings)
    composed = compose(signing_setup(settings), ledger, settings=dataclasses.replace(settings, events_dispatch=True))
    _, serving = composed.served()
    if serving.dispatcher is None or serving.hold_sweeper is None:  # pragma: no cover - dispatch is on above
        raise RuntimeError("the serving services were composed without their workers")
    return serving.dispatcher, serving.hold_sweeper, ledger


def run_dispatch(settings: Settings, stop: threading.Event) -> int:
    """Start the workers, wait for `stop`, stop them (the running turns finish first)."""
    dispatcher, sweeper, ledger = dispatch_workers(settings)
    dispatcher.start()
    sweeper.start()
    names = ", ".join(w.name for w in [*dispatcher.workers, sweeper])
    print(f"gate dispatch: running {names}; SIGTERM stops it", file=sys.stderr, flush=True)
    try:
        stop.wait()
    finally:
        sweeper.stop(STOP_SECONDS)
        dispatcher.stop(STOP_SECONDS)
        ledger.dispose()
    print("gate dispatch: stopped", file=sys.stderr, flush=True)
    return 0


def start_dispatch_beside(env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`gate dispatch` as a child process beside a server in the foreground (`gate demo`): stopped
    (SIGTERM) when this process exits, and on Linux by the kernel even if this process is killed."""
    import atexit
    import ctypes

    def die_with_parent() -> None:  # pragma: no cover - runs in the child
        with contextlib.suppress(OSError):  # not Linux: the atexit hook alone stops the child
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG

    gate = os.path.join(os.path.dirname(sys.executable), "gate")
    child = subprocess.Popen([gate, "dispatch"], env=env, preexec_fn=die_with_parent)  # noqa: S603, PLW1509

    def stop_child() -> None:
        if child.poll() is None:
            child.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(STOP_SECONDS + 5)

    atexit.register(stop_child)
    return child
