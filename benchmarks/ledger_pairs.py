"""Two schemas or two ways of writing, side by side on full ledgers: the harness `bench_outbox_insert.py`
and `bench_decision_ids.py` share. Each makes, per ledger kind, one new ledger per arm at the newest
revision (filled as the arm says), then runs rounds that alternate the arms in an order reversed every
other round, each round `batches` write transactions of the arm's batch; it prints each round's CPU
µs per written unit (this process, plus the PostgreSQL server's processes from `/proc`, as
`bench_http.py` reads them), the ratio of the second arm to the first, and the 1-minute load average,
then the median ratio."""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_http import _database, _postgres_cpu_seconds  # the throw-away database; the server's CPU
from gate_app import bench_app, bench_key  # the one start-up of a benchmark's gate

ROOT = Path(__file__).resolve().parent.parent
REQUEST = ROOT / "gate" / "data" / "requests" / "verdict-yes.json"
CHUNK = 10_000


def sample_record(home: Path) -> dict[str, Any]:
    """A real record: one decide of the sample request on a throw-away gate."""
    settings, app = bench_app(home, None, {"GATE_EVENTS_DISPATCH": "false"})
    answer = app.test_client().post("/api/decide", json=json.loads(REQUEST.read_text()),
                                    headers={"x-api-key": bench_key(settings)})
    assert answer.status_code == 200, answer.get_json()
    record: dict[str, Any] = answer.get_json()
    return record


def bulk_insert(connection: Any, table: str, columns: Sequence[str], rows: Iterable[tuple[Any, ...]]) -> None:
    """`rows` (values already as stored) into `table` through the driver, `CHUNK` rows a statement."""
    mark = "?" if connection.dialect.name == "sqlite" else "%s"
    statement = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))})"
    chunk: list[tuple[Any, ...]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == CHUNK:
            connection.exec_driver_sql(statement, chunk)
            chunk = []
    if chunk:
        connection.exec_driver_sql(statement, chunk)


@dataclass(frozen=True)
class Arm:
    """One side: its name, how its ledger is filled, and one write transaction's work."""

    name: str
    fill: Callable[[Any], None]
    write: Callable[[Any, int], None]  # (connection, the batch's number)


def _ledger(kind: str, home: Path, arm: Arm):
    from gate.ledger import Ledger

    home.mkdir(parents=True)
    url, drop = _database(kind, home)
    ledger = Ledger(url)
    ledger.upgrade()
    arm.fill(ledger)
    if kind == "sqlite":
        with ledger.engine.begin() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    return ledger, drop


def _cpu_seconds(ledger) -> float:
    server = _postgres_cpu_seconds() if ledger.engine.dialect.name == "postgresql" else 0.0
    return time.process_time() + server


def _round(ledger, arm: Arm, batches: int, per_batch: int) -> float:
    """CPU µs per unit (this process and the database server) over `batches` transactions."""
    spent = _cpu_seconds(ledger)
    for batch in range(batches):
        with ledger.engine.begin() as connection:
            arm.write(connection, batch)
    return 1e6 * (_cpu_seconds(ledger) - spent) / (batches * per_batch)


def compare(kind: str, home: Path, arms: tuple[Arm, Arm], *, rounds: int, batches: int, per_batch: int,
            unit: str, kept: int) -> float:
    """Rounds of the two arms on `kind` (see the module); the median of second / first."""
    made = {arm.name: _ledger(kind, home / f"{kind}-{arm.name}", arm) for arm in arms}
    ratios = []
    try:
        for number in range(rounds):
            order = arms if number % 2 == 0 else arms[::-1]
            spent = {arm.name: _round(made[arm.name][0], arm, batches, per_batch) for arm in order}
            first, second = (spent[arm.name] for arm in arms)
            ratios.append(second / first)
            print(f"{kind} round {number + 1}: {arms[0].name} {first:.1f} µs {unit}, {arms[1].name} {second:.1f} "
                  f"({ratios[-1]:.2f}), {kept:,} kept, load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        for ledger, drop in made.values():
            ledger.dispose()
            drop()
    median = statistics.median(ratios)
    print(f"{kind}: median {arms[1].name} / {arms[0].name} {median:.2f}")
    return median
