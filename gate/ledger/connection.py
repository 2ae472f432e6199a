"""The ledger's connection: its engine, schema upgrade, read and write transactions, the
snapshot several reads share, and its decide-path statements compiled once.

Every part of the ledger (`gate.ledger.api_keys`, `snapshots`, `chains`, `records`,
`decision_write`, and the table modules over a `Ledger`: holds, releases, the outbox) reads and
writes through one `LedgerConnection`.

Guarantees:
- Driver errors are wrapped once, here, as `LedgerUnavailable` (the API answers 503); a stored
  value that cannot be decoded (`gate.ledger.codec`) fails closed the same way.
- A write is one transaction (BEGIN IMMEDIATE on SQLite, queued fairly before it by
  `gate.ledger.writelock`); it commits on success and leaves nothing on failure.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import Table, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, IntegrityError, SQLAlchemyError
from sqlalchemy.sql.dml import Insert

from gate.errors import LedgerUnavailable
from gate.ledger import waits, writelock
from gate.ledger.codec import StoredValueUnreadable
from gate.ledger.engine import WRITE_OPTION, make_engine, normalize_url
from gate.ledger.groupcommit import BATCH_MEMO, GroupWriter, defer_row
from gate.ledger.prepared import Prepared

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

UNREADABLE = "a stored ledger value could not be decoded (corrupt, or written with an unknown dictionary)"


class LedgerConnection:
    """An SQLAlchemy engine (SQLite file or PostgreSQL) and the transactions over it."""

    def __init__(self, url: str, *, pool_size: int = 5, engine: Engine | None = None,
                 group_commit: bool | None = None) -> None:
        """`group_commit`: decisions stored through one writer thread per process, many per
        transaction (`gate.ledger.groupcommit`); None (auto): on, for SQLite and PostgreSQL alike."""
        self.url = normalize_url(url)
        self.engine = engine or make_engine(self.url, pool_size=pool_size)
        self.dialect = self.engine.dialect.name
        self._prepared: dict[Any, Prepared] = {}
        self.write_queue = writelock.for_url(self.engine.url.database) if self.dialect == "sqlite" else None
        self._snapshot = threading.local()  # the connection of this thread's `one_snapshot`, if any
        if group_commit is None:
            group_commit = True
        self.group = GroupWriter(self.write) if group_commit else None

    # ------------------------------------------------------------------ lifecycle

    def upgrade(self) -> None:
        """Bring the schema to the newest Alembic revision (idempotent). A ledger that already
        states the newest revision is left as it is without loading Alembic (issue 68: a command
        such as `gate holds list` starts without it)."""
        if self._states_newest_revision():
            return
        # Alembic is imported only here: a serving process that does not migrate never loads it.
        from alembic import command
        from alembic.config import Config

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS_DIR))
        config.set_main_option("sqlalchemy.url", self.url.replace("%", "%%"))
        with self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def _states_newest_revision(self) -> bool:
        """Whether `alembic_version` holds exactly the newest migration's revision: each file in
        migrations/versions is named as its revision and the names sort in the chain's order
        (tests/ledger/test_migration_names.py). Anything else (no such table, an older, a branched
        or an unknown revision) is Alembic's to handle."""
        newest = max(path.stem for path in (MIGRATIONS_DIR / "versions").glob("[0-9]*.py"))
        try:
            with self.engine.connect() as connection:
                stated = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
        except DBAPIError:
            return False
        return list(stated) == [newest]

    def dispose(self) -> None:
        self.engine.dispose()

    def ping(self) -> bool:
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
            return True
        except SQLAlchemyError:
            return False

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction (BEGIN IMMEDIATE on SQLite); commits on success."""
        try:
            asked = time.perf_counter()
            with self._queued(), self.engine.connect() as plain:
                connection = plain.execution_options(**{WRITE_OPTION: True})
                with connection.begin():
                    if self.write_queue is not None:  # SQLite: BEGIN IMMEDIATE ran, the write lock is held
                        waits.waited(waits.WRITE_QUEUE, time.perf_counter() - asked)
                    yield connection
        except IntegrityError:
            raise
        except (DBAPIError, SQLAlchemyError) as exc:
            raise LedgerUnavailable(f"ledger write failed: {type(exc).__name__}") from exc
        except StoredValueUnreadable as exc:
            raise LedgerUnavailable(UNREADABLE) from exc

    def _queued(self) -> AbstractContextManager[None]:
        """SQLite: wait in the host's fair write queue first (`gate.ledger.writelock`)."""
        return self.write_queue.held() if self.write_queue is not None else nullcontext()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read. On PostgreSQL reads run in autocommit (no BEGIN/COMMIT round trips): each
        is one statement, and the writes they race are atomic transactions. Inside
        `one_snapshot` every read of the thread runs on that snapshot's connection."""
        pinned: Connection | None = getattr(self._snapshot, "connection", None)
        try:
            if pinned is not None:
                yield pinned
                return
            with self.engine.connect() as connection:
                if self.dialect == "postgresql":
                    yield connection.execution_options(isolation_level="AUTOCOMMIT")
                    return
                with connection.begin():
                    yield connection
        except (DBAPIError, SQLAlchemyError) as exc:
            raise LedgerUnavailable(f"ledger read failed: {type(exc).__name__}") from exc
        except StoredValueUnreadable as exc:  # a corrupt at-rest value (gate.ledger.codec): fail closed
            raise LedgerUnavailable(UNREADABLE) from exc

    @contextmanager
    def one_snapshot(self) -> Iterator[None]:
        """Every read of this thread inside sees the ledger as of one instant. Several reads that
        must agree (a chain head, its newest link, its nodes) otherwise each see the ledger of
        their own moment, and a decide committed between them reads as a contradiction. SQLite:
        one deferred read transaction (WAL keeps its snapshot from the first read); PostgreSQL:
        one REPEATABLE READ, READ ONLY transaction. Nested: the outer snapshot holds."""
        if getattr(self._snapshot, "connection", None) is not None:
            yield
            return
        try:
            with self.engine.connect() as plain:
                connection = (plain.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
                              if self.dialect == "postgresql" else plain)
                with connection.begin():
                    self._snapshot.connection = connection
                    try:
                        yield
                    finally:
                        self._snapshot.connection = None
        except (DBAPIError, SQLAlchemyError) as exc:
            raise LedgerUnavailable(f"ledger read failed: {type(exc).__name__}") from exc

    # ------------------------------------------------------------------ statements

    def insert_ignore(self, table: Table, values: Mapping[str, Any]) -> Insert:
        """INSERT … ON CONFLICT DO NOTHING for either dialect."""
        dialect_insert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        return dialect_insert(table).values(**values).on_conflict_do_nothing()

    def hot(self, key: Any, statement: Any, column_keys: tuple[str, ...] | None = None) -> Prepared:
        """A decide-path statement compiled once for this ledger (`gate.ledger.prepared`)."""
        prepared = self._prepared.get(key)
        if prepared is None:
            prepared = self._prepared[key] = Prepared(statement, self.engine.dialect, column_keys)
        return prepared

    def insert_row(self, connection: Connection, key: Any, statement: Any, row: Mapping[str, Any],
                   column_keys: tuple[str, ...] | None = None) -> None:
        """Insert `row` now, or, in a batch run all at once, with the batch's other rows of the
        same statement in one multi-row INSERT before the commit (`BATCH_FLUSH`). A constraint a
        deferred row violates then fails that INSERT, and the batch is run again member by
        member, each row in its member's SAVEPOINT (`gate.ledger.groupcommit`)."""
        prepared = self.hot(key, statement, column_keys)
        if BATCH_MEMO in connection.info:
            defer_row(connection, key, prepared, row)
        else:
            prepared.run(connection, row)
