"""The PostgreSQL outbox partitioned by day (migration 0023; docs/events.md "Retention"): a day's
events are dropped whole once every one of them is inside the ranges a retention pass deletes, so
a sustained rate never leaves a month of dead rows for vacuum to find. SQLite keeps one plain
table: these are no-ops there.

`event_outbox` is partitioned by RANGE over `created_at` (ISO 8601 UTC text, compared in the "C"
collation, so text order is time order): one partition per UTC day, `event_outbox_pYYYYMMDD`, and
a DEFAULT partition, `event_outbox_default`, that takes any row no day partition does (rows written
before the migration, or on a day whose partition was not made in time), so an insert never fails
for want of one. Each retention pass makes the partitions of the next `DAYS_AHEAD` days
(`ensure_partitions`); one the default partition already holds rows of is left unmade (its rows
are pruned by range like any other)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, timedelta

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

DAYS_AHEAD = 3
PREFIX = "event_outbox_p"
DEFAULT = "event_outbox_default"


def partitioned(connection: Connection) -> bool:
    """Whether this ledger's outbox is partitioned (PostgreSQL after migration 0023)."""
    if connection.dialect.name != "postgresql":
        return False
    kind = connection.execute(text("SELECT relkind FROM pg_class WHERE oid = to_regclass('event_outbox')")).scalar()
    return kind == "p"


def day_partitions(connection: Connection) -> list[tuple[date, str]]:
    """The day partitions, oldest first: (their day, their name)."""
    names = connection.execute(text(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = to_regclass('event_outbox')")).scalars()
    days = []
    for name in names:
        if name.startswith(PREFIX) and name[len(PREFIX):].isdigit():
            stamp = name[len(PREFIX):]
            days.append((date(int(stamp[:4]), int(stamp[4:6]), int(stamp[6:])), name))
    return sorted(days)


def ensure_partitions(connection: Connection, today: date, days_ahead: int = DAYS_AHEAD) -> int:
    """Make the day partitions of `today` and the `days_ahead` days after it that are missing;
    returns how many were made. Each in a savepoint: a day the default partition already holds
    rows of cannot be made (PostgreSQL refuses), and is left to the default partition."""
    if not partitioned(connection):
        return 0
    present = {day for day, _ in day_partitions(connection)}
    made = 0
    for offset in range(days_ahead + 1):
        day = today + timedelta(days=offset)
        if day in present:
            continue
        savepoint = connection.begin_nested()
        try:
            connection.execute(text(
                f'CREATE TABLE {PREFIX}{day:%Y%m%d} PARTITION OF event_outbox '
                f"FOR VALUES FROM ('{day.isoformat()}') TO ('{(day + timedelta(days=1)).isoformat()}')"))
        except DBAPIError:
            savepoint.rollback()
            continue
        savepoint.commit()
        made += 1
    return made


def drop_partitions(connection: Connection, ranges: Mapping[str, tuple[int, int]],
                    kept: Mapping[str, int] | None = None) -> int:
    """Drop, oldest first, each day partition every row of which is inside `ranges` (per scope,
    first exclusive and last inclusive: what the pass deletes), stopping at the first that is not;
    `kept`: every scope's pruned prefix (no row at or below it exists). Returns how many were
    dropped: exactly rows the range DELETE would have removed, in one catalog change each."""
    if not ranges or not partitioned(connection):
        return 0
    bounds = {**(kept or {}), **{scope: last for scope, (_, last) in ranges.items()}}
    values = ", ".join(f"(:s{i}, :b{i})" for i in range(len(bounds)))
    params: dict[str, str | int] = {}  # s<i>: a scope, b<i>: its bound (seq)
    for i, (scope, last) in enumerate(bounds.items()):
        params[f"s{i}"], params[f"b{i}"] = scope, last
    dropped = 0
    for _, name in day_partitions(connection):
        # A row past its scope's bound keeps the partition: one probe of its key per scope (every
        # scope with events is named: `kept` holds them all).
        outside = connection.execute(text(
            f"SELECT 1 FROM (VALUES {values}) AS v(scope, bound) WHERE EXISTS ("  # noqa: S608 - our names
            f"SELECT 1 FROM {name} p WHERE p.scope = v.scope AND p.seq > v.bound) LIMIT 1"), params).first()
        if outside is not None:
            break
        connection.execute(text(f"DROP TABLE {name}"))
        dropped += 1
    return dropped
