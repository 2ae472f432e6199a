"""Hot-path statements compiled once per dialect and run on the driver's cursor.

A decide's write runs about ten small statements. Through `Connection.execute` each one pays a
cache lookup, a compiled-statement context, the construction of its parameters and a result
object; on SQLite that overhead was about three quarters of a small statement's CPU (`benchmarks/
bench_decide_cpu.py`). A `Prepared` statement is the same Core statement (its SQL is still
written once, beside its table) compiled once: its SQL text, the order of its parameters and
each parameter's bind processor (the at-rest encoding of `gate.ledger.codec`). It runs on the
cursor of the connection the caller's transaction holds, so it is part of that transaction: one
cursor kept per DBAPI connection, on PostgreSQL a psycopg raw cursor with the statement's
placeholders written as PostgreSQL's own `$1, $2, …` (`_dollar_placeholders`), so psycopg sends
the text as it is instead of parsing it for placeholders on every run.

What is kept from `Connection.execute`:
- the `before_cursor_execute` event fires when a listener is registered (the fault tests
  inject driver errors through it, so they reach this path too);
- driver errors come out as SQLAlchemy's `IntegrityError` and `DBAPIError`, which the ledger
  already turns into refusals and 503 `LEDGER_UNAVAILABLE`.
- a driver error goes through SQLAlchemy's own handling of one (`_handle_dbapi_exception`), so a
  lost PostgreSQL connection invalidates the pool as it did when these statements went through
  `Connection.exec_driver_sql` (until 2026-11-25 evening: on PostgreSQL that call and its result
  object were a third of the writer's CPU for a decide's statement).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, cast

from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

_REQUIRED = object()
# The most parameters a multi-row INSERT (`Prepared.insert_rows`) binds: under SQLite's limit
# (SQLITE_MAX_VARIABLE_NUMBER, 32,766 since 3.32) and PostgreSQL's (65,535), with room to spare.
MAX_VARIABLES = 30_000
# A placeholder in psycopg's paramstyle (or its escaped `%`), and one of PostgreSQL's own.
_PYFORMAT = re.compile(r"%\((\w+)\)s|%%")
_DOLLAR = re.compile(r"\$(\d+)")
Row = dict[str, Any]


class Prepared:
    """One Core statement compiled for `dialect`. Parameters are mappings by bind name, as for
    `Connection.execute`; a required parameter that is missing is a `KeyError`, never NULL."""

    __slots__ = ("_columns", "_numbered", "_positional", "_slots", "sql")

    def __init__(self, statement: ClauseElement, dialect: Dialect, column_keys: Sequence[str] | None = None) -> None:
        compiled = cast(SQLCompiler, statement.compile(dialect=dialect,
                                                       column_keys=list(column_keys) if column_keys else None))
        self.sql = compiled.string
        order = compiled.positiontup
        # psycopg: PostgreSQL's own `$1, $2, …` on a raw cursor (`_cursor`), which sends the
        # text as it is; with `%(name)s` psycopg parsed every statement's text again to find its
        # placeholders (a regular-expression pass, uncached past 4 KB or 50 parameters, which a
        # batch's multi-row INSERT always is): 6% of a PostgreSQL worker's time under load.
        self._numbered = order is None and _raw_driver(dialect)
        if self._numbered:
            self.sql, order = _dollar_placeholders(self.sql)
        self._positional = order is not None
        slots: list[tuple[str, Any, Callable[[Any], Any] | None]] = []
        for name in (list(order) if order is not None else list(compiled.binds)):
            bind = compiled.binds[name]
            # A value the statement fixes (a literal such as `used = 1`) is the bind's own.
            default = _REQUIRED if bind.required or bind.callable is not None else bind.effective_value
            slots.append((name, default, bind.type.bind_processor(dialect)))
        self._slots = tuple(slots)
        # The columns the statement answers (None: it answers no rows), read from the driver's
        # description on its first run: a statement's result columns never change, and psycopg
        # builds a `Column` object per column on every read of `description`.
        self._columns: tuple[str, list[str] | None] | None = None

    def parameters(self, values: Mapping[str, Any]) -> tuple[Any, ...] | dict[str, Any]:
        """The driver's parameters for `values` (a tuple for positional styles, else a dict)."""
        out = []
        for name, default, processor in self._slots:
            value = values.get(name, default)
            if value is _REQUIRED:
                raise KeyError(f"statement parameter {name!r} is missing")
            out.append(processor(value) if processor is not None else value)
        if self._positional:
            return tuple(out)
        return {slot[0]: value for slot, value in zip(self._slots, out, strict=True)}

    def run(self, connection: Connection, values: Mapping[str, Any]) -> list[Row]:
        """Execute once; the rows it returns (if any) as dicts by column name."""
        return self._execute(connection, self.parameters(values), many=False)

    def run_many(self, connection: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            self._execute(connection, [self.parameters(row) for row in rows], many=True)

    def insert_rows(self, connection: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """An INSERT of `rows` as few statements as the driver's parameter limit allows: one
        `VALUES` list of many rows, which the driver runs in one step (on SQLite it releases and
        takes back the GIL once, where `run_many` does so per row; on PostgreSQL it is one round
        trip and one statement to plan). A statement without a `VALUES` list, or with named
        placeholders (a driver other than those two), runs as `run_many`."""
        head, found, values = self.sql.rpartition(" VALUES ")
        if not rows or not found or not values.startswith("(") or not self._positional:
            self.run_many(connection, rows)
            return
        width = len(self._slots)
        per_statement = max(1, MAX_VARIABLES // max(1, width))
        for start in range(0, len(rows), per_statement):
            chunk = rows[start:start + per_statement]
            parameters: list[Any] = []
            for row in chunk:  # the rows' values one after the other
                parameters.extend(cast(tuple[Any, ...], self.parameters(row)))
            # `?` (SQLite) repeats as it is; `$n` (PostgreSQL) counts on from row to row
            lists = ([_row_numbers(values, number * width) for number in range(len(chunk))] if self._numbered
                     else [values] * len(chunk))
            self._execute(connection, tuple(parameters), many=False, sql=f"{head} VALUES {', '.join(lists)}")

    def first(self, connection: Connection, values: Mapping[str, Any]) -> Row | None:
        rows = self.run(connection, values)
        return rows[0] if rows else None

    def _execute(self, connection: Connection, parameters: Any, *, many: bool, sql: str | None = None) -> list[Row]:
        if sql is not None:  # a statement of its own (insert_rows' multi-row INSERT): no rows
            return _on_cursor(connection, sql, parameters, many=many, columns=None)
        known = self._columns
        if known is not None and known[0] == self.sql:
            return _on_cursor(connection, self.sql, parameters, many=many, columns=known[1])
        if _in_pipeline(connection):  # no result yet to read its columns from (`pipelined`)
            return _on_cursor(connection, self.sql, parameters, many=many, columns=None)
        rows = _on_cursor(connection, self.sql, parameters, many=many)
        self._columns = (self.sql, _last_columns(connection))
        return rows


_CURSOR = "gate.cursor"  # `Connection.info` key of the driver cursor the statements run on
_UNKNOWN: Any = object()


def _cursor(connection: Connection) -> Any:
    """The driver cursor kept for this DBAPI connection: one per connection, reused by every
    statement (psycopg builds a cursor, with its own adapters map, for each `cursor()`).
    `Connection.info` lives as long as the DBAPI connection and is emptied when the pool
    replaces it, and the cursor is checked to belong to the connection it is used on."""
    driver = connection.connection.driver_connection
    kept = connection.info.get(_CURSOR)
    if kept is not None and kept[0] is driver:
        return kept[1]
    if _raw_driver(connection.dialect):  # statements with `$n` placeholders, sent as they are
        from psycopg import RawCursor

        cursor: Any = RawCursor(driver)  # type: ignore[arg-type]
    else:
        cursor = driver.cursor()  # type: ignore[union-attr]
    connection.info[_CURSOR] = (driver, cursor)
    return cursor


def _raw_driver(dialect: Dialect) -> bool:
    return dialect.driver == "psycopg"


@contextmanager
def pipelined(connection: Connection) -> Iterator[None]:
    """Statements whose rows nobody reads (a group commit's deferred writes, `BATCH_FLUSH`),
    sent in one round trip on PostgreSQL: psycopg's pipeline mode queues each statement and
    reads every answer at the end of the block, where a failed one raises (as SQLAlchemy's
    `IntegrityError` or `DBAPIError`, as `_on_cursor` answers it; the statements after it did
    not run, and the transaction is aborted, as with one statement at a time). A statement run
    inside the block answers no rows. Other drivers run the statements one at a time.

    Until 2026-11-27 a batch's flush made one round trip per statement: the links, the tree
    nodes, the decisions, the heads, the usage counters, the holds and, with `decision.created`
    on, the outbox rows and the scope's sequence, each a wait for the server under the chain
    head's lock (issue 53)."""
    if not _raw_driver(connection.dialect):
        yield
        return
    try:
        with connection.connection.driver_connection.pipeline():  # type: ignore[union-attr]
            yield
    except connection.dialect.loaded_dbapi.Error as exc:
        connection.info.pop(_CURSOR, None)
        connection._handle_dbapi_exception(exc, "(pipelined statements)", None, None, None)
        raise  # pragma: no cover - the call above always raises


def _in_pipeline(connection: Connection) -> bool:
    return _raw_driver(connection.dialect) and bool(
        connection.connection.driver_connection.info.pipeline_status)  # type: ignore[union-attr]


def _dollar_placeholders(sql: str) -> tuple[str, list[str]]:
    """psycopg's `%(name)s` placeholders of compiled `sql` as PostgreSQL's `$1, $2, …` (a name
    used twice keeps its number) and `%%` as `%`, with the names in number order. The names are
    the statement's own bind names, never values."""
    numbers: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "%"
        return f"${numbers.setdefault(name, len(numbers) + 1)}"

    return _PYFORMAT.sub(number, sql), list(numbers)


@lru_cache(maxsize=1024)
def _row_numbers(values: str, offset: int) -> str:
    """A `VALUES` list of `$n` placeholders numbered `offset` further (a later row's)."""
    return _DOLLAR.sub(lambda match: f"${int(match.group(1)) + offset}", values)


def _last_columns(connection: Connection) -> list[str] | None:
    description = _cursor(connection).description
    return None if description is None else [column[0] for column in description]


def _on_cursor(connection: Connection, sql: str, parameters: Any, *, many: bool = False,
               columns: list[str] | None = _UNKNOWN) -> list[Row]:
    """Run `sql` on the driver cursor of `connection` (inside its transaction). `columns` are
    the result's column names when the caller knows them (None: no rows); else the driver's
    description says."""
    cursor = _cursor(connection)
    try:
        hooks = connection.dispatch.before_cursor_execute
        if hooks:
            hooks(connection, cursor, sql, parameters, None, many)
        if many:
            cursor.executemany(sql, parameters)
        else:
            cursor.execute(sql, parameters)
        if columns is _UNKNOWN:
            columns = _last_columns(connection)
        if columns is None:
            return []
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    except connection.dialect.loaded_dbapi.Error as exc:
        # As `Connection.execute` does: IntegrityError for a violated constraint, DBAPIError for
        # the rest, and a connection found lost is invalidated with the pool's older ones. That
        # handling closes the cursor, so the next statement takes a new one.
        connection.info.pop(_CURSOR, None)
        connection._handle_dbapi_exception(exc, sql, parameters, cursor, None)
        raise  # pragma: no cover - the call above always raises


class Savepoint:
    """A SAVEPOINT by name inside the caller's transaction: `begin_nested` costs about six times
    as much on SQLite (a transaction object and its events), and a group commit takes one per
    member (`gate.ledger.groupcommit`)."""

    __slots__ = ("_connection", "_name")

    def __init__(self, connection: Connection, name: str = "gate_member") -> None:
        self._connection = connection
        self._name = name

    def _run(self, sql: str) -> None:
        _on_cursor(self._connection, sql, ())

    def __enter__(self) -> Savepoint:
        self._run(f"SAVEPOINT {self._name}")
        return self

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if kind is not None:
            # Undo this member's statements only; the enclosing transaction goes on. If the
            # rollback itself fails, that error (a driver fault) ends the batch.
            self._run(f"ROLLBACK TO SAVEPOINT {self._name}")
        self._run(f"RELEASE SAVEPOINT {self._name}")
