"""Engine construction for the two supported ledgers: an SQLite file (embedded default) and PostgreSQL.

SQLite: WAL journal, `synchronous=FULL` (a commit is on disk before the response is sent, so an
acknowledged record survives a power cut, not only a crash), a busy timeout, and write
transactions opened with `BEGIN IMMEDIATE` so two processes never deadlock upgrading a read lock
(and queued before it, fairly, by `gate.ledger.writelock`; decisions are group-committed by
`gate.ledger.groupcommit`).
PostgreSQL: psycopg 3, READ COMMITTED, autocommit single-statement reads; concurrency safety comes from unique
constraints and row locks, never from process memory.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine

WRITE_OPTION = "gate_write"


def normalize_url(url: str) -> str:
    """Accept `postgres://` and `postgresql://` and select the psycopg 3 driver."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    return url


def make_engine(url: str, *, pool_size: int = 5, durable: bool = True) -> Engine:
    """The ledger's engine; `durable=False` (the demo seed's own SQLite engine only) does not wait
    for each commit to reach the disk."""
    url = normalize_url(url)
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"timeout": 30, "check_same_thread": False},
            pool_size=pool_size,
            max_overflow=10,
        )
        _configure_sqlite(engine, "FULL" if durable else "OFF")
        return engine
    return create_engine(
        url,
        pool_size=pool_size,
        max_overflow=10,
        # No pre-ping round trip per checkout: a dead connection fails its request with 503
        # (never an approval), and SQLAlchemy then invalidates the whole pool.
        pool_pre_ping=False,
        pool_recycle=1800,
        isolation_level="READ COMMITTED",
    )


SQLITE_PAGE_SIZE = 8192


def _configure_sqlite(engine: Engine, synchronous: str) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:  # pragma: no cover - driver callback
        # Take transaction control away from pysqlite so BEGIN is ours.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        # 8 KiB pages (SQLite's default is 4 KiB): a decision row is about 2-3 KB in the at-rest
        # encoding (gate.ledger.codec), and a 4 KiB page holds one such row when it is just over
        # 2 KB, wasting the rest. Takes effect only when the file is created; an existing ledger
        # keeps its page size until converted (docs/operating.md "Sizing").
        cursor.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")
        # Pages freed by the outbox's retention go back to the file system (`PRAGMA
        # incremental_vacuum` after each pruning pass, gate.ledger.outbox). Like the page size it
        # takes effect only when the file is created: an existing ledger switches with one VACUUM
        # (docs/operating.md "Outbox size").
        cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:  # pragma: no cover - driver callback
        if connection.get_execution_options().get(WRITE_OPTION):
            connection.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            connection.exec_driver_sql("BEGIN")
