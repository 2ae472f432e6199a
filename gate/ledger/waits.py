"""How long the ledger's writers wait, for whoever watches (issue 23: no request waits on a lock
for more than 50 ms).

Three waits, each a closed name (the only label values the metrics give them):

- `write_queue`: SQLite. From asking for a write transaction to holding it: the host's fair queue
  (`gate.ledger.writelock`, the turnstile then the write lock) and SQLite's `BEGIN IMMEDIATE`.
  Every write transaction waits here, the group writer's batches and the lifecycle writes alike.
- `chain_head`: PostgreSQL. The `SELECT … FOR UPDATE` of a scope's chain head, where a writer
  waits while another process's transaction holds that scope's head (once per chain per batch).
- `writer`: group commit. From a decide handing its write to its process's writer thread to
  the answer: the queue before its batch, the batch and its commit. It is what a caller waits
  for the ledger, locks included.

The ledger only measures; the HTTP shell turns the waits into a Prometheus histogram
(`api.metrics`, `gate_ledger_wait_seconds{wait}`). With no observer a wait costs one clock read.
"""

from __future__ import annotations

from collections.abc import Callable

WRITE_QUEUE = "write_queue"
CHAIN_HEAD = "chain_head"
WRITER = "writer"
WAITS = (WRITE_QUEUE, CHAIN_HEAD, WRITER)

Observer = Callable[[str, float], None]
_observers: list[Observer] = []


def watch(observer: Observer) -> None:
    """Call `observer(wait, seconds)` after every wait (once per observer, however often asked)."""
    if observer not in _observers:
        _observers.append(observer)


def waited(wait: str, seconds: float) -> None:
    for observer in _observers:
        observer(wait, seconds)
