"""Prepared hot-path statements and named savepoints (gate/ledger/prepared.py), on both ledgers.

They replace `Connection.execute` on the decide's write path, so they must keep what it gave:
the same rows and values (at-rest encoding included), a refusal of a missing parameter, driver
errors as SQLAlchemy's `IntegrityError`/`DBAPIError`, the `before_cursor_execute` event, and
statements that belong to the caller's transaction.
"""

from __future__ import annotations

import pytest
from sqlalchemy import event, func, insert, select
from sqlalchemy.exc import DBAPIError, IntegrityError

from gate.errors import LedgerUnavailable
from gate.ledger import Ledger
from gate.ledger.api_keys import charge_statement
from gate.ledger.codec import MARK
from gate.ledger.prepared import Prepared, Savepoint
from gate.ledger.tables import chain_links

pytestmark = pytest.mark.usefixtures("backend")

LINK = {"chain_id": "c1", "chain_position": 1, "decision_id": "d1", "leaf_hash": "a" * 64,
        "link_hash": "b" * 64, "link_json": '{"chain_id":"c1","note":"' + "x" * 400 + '"}'}


@pytest.fixture
def ledger(database_url):
    ledger = Ledger(database_url)
    ledger.upgrade()
    yield ledger
    ledger.dispose()


def _links(ledger: Ledger) -> list[dict]:
    with ledger.read() as connection:
        return [dict(row) for row in connection.execute(select(chain_links).order_by(chain_links.c.chain_position))
                .mappings()]


def _stored_link_json(ledger: Ledger) -> bytes | str:
    with ledger.engine.connect() as connection:
        return connection.exec_driver_sql("SELECT link_json FROM chain_links").scalar_one()


def test_a_prepared_insert_stores_what_execute_stores(ledger):
    statement = Prepared(insert(chain_links), ledger.engine.dialect)
    with ledger.write() as connection:
        assert statement.run(connection, LINK) == []
    assert _links(ledger) == [LINK]
    stored = _stored_link_json(ledger)  # the at-rest encoding was applied (the column's bind processor)
    assert bytes(stored)[0] == MARK


def test_rows_come_back_by_column_name_and_literals_keep_their_values(ledger):
    charge = charge_statement(ledger.dialect)  # INSERT ... used = 1 ON CONFLICT ... RETURNING used
    prepared = Prepared(charge, ledger.engine.dialect)
    with ledger.write() as connection:
        assert prepared.first(connection, {"key_id": "k", "period": "2026-11", "cap": 2}) == {"used": 1}
        assert prepared.run(connection, {"key_id": "k", "period": "2026-11", "cap": 2}) == [{"used": 2}]
        assert prepared.first(connection, {"key_id": "k", "period": "2026-11", "cap": 2}) is None  # at the cap


def test_a_missing_parameter_is_refused_before_anything_runs(ledger):
    statement = Prepared(insert(chain_links), ledger.engine.dialect)
    seen: list[str] = []
    event.listen(ledger.engine, "before_cursor_execute", lambda *args: seen.append(args[2]))
    with pytest.raises(KeyError, match="leaf_hash"), ledger.write() as connection:
        statement.run(connection, {key: value for key, value in LINK.items() if key != "leaf_hash"})
    assert not any("chain_links" in sql for sql in seen)
    assert _links(ledger) == []


def test_driver_errors_come_out_as_sqlalchemy_errors(ledger):
    statement = Prepared(insert(chain_links), ledger.engine.dialect)
    with ledger.write() as connection:
        statement.run(connection, LINK)
    with pytest.raises(IntegrityError), ledger.engine.connect() as connection, connection.begin():
        statement.run(connection, LINK)  # the same primary key again
    broken = Prepared(select(func.count()).select_from(chain_links), ledger.engine.dialect)
    broken.sql = "SELECT no_such_column FROM chain_links"
    with pytest.raises(DBAPIError), ledger.engine.connect() as connection, connection.begin():
        broken.run(connection, {})


def test_the_event_fires_and_can_fail_the_statement(ledger):
    statement = Prepared(insert(chain_links), ledger.engine.dialect)

    def fault(connection, cursor, sql, parameters, context, executemany):
        if "INSERT INTO chain_links" in sql:
            raise ledger.engine.dialect.loaded_dbapi.OperationalError("injected")

    event.listen(ledger.engine, "before_cursor_execute", fault)
    try:
        with pytest.raises(LedgerUnavailable) as failed, ledger.write() as connection:
            statement.run(connection, LINK)
        assert isinstance(failed.value.__cause__, DBAPIError) and "injected" in str(failed.value.__cause__)
    finally:
        event.remove(ledger.engine, "before_cursor_execute", fault)
    assert _links(ledger) == []


def test_a_savepoint_undoes_its_statements_only(ledger):
    statement = Prepared(insert(chain_links), ledger.engine.dialect)
    second = {**LINK, "chain_position": 2, "decision_id": "d2"}
    with ledger.write() as connection:
        statement.run(connection, LINK)
        with pytest.raises(IntegrityError), Savepoint(connection):
            statement.run(connection, second)
            statement.run(connection, LINK)  # fails: the savepoint takes `second` back too
        with Savepoint(connection):
            statement.run_many(connection, [{**LINK, "chain_position": 3, "decision_id": "d3"}])
    assert [link["decision_id"] for link in _links(ledger)] == ["d1", "d3"]


def test_insert_rows_stores_every_row_in_as_few_statements_as_the_variable_limit_allows(ledger, monkeypatch):
    from gate.ledger import prepared as prepared_module

    monkeypatch.setattr(prepared_module, "MAX_VARIABLES", 12)  # two rows of six per statement
    rows = [dict(LINK, chain_position=n, decision_id=f"d{n}") for n in range(1, 6)]
    seen: list[tuple[str, int]] = []

    def record(connection, cursor, statement, parameters, context, executemany):
        seen.append((statement.split(" VALUES ")[0], len(parameters)))

    event.listen(ledger.engine, "before_cursor_execute", record)
    try:
        with ledger.write() as connection:
            Prepared(insert(chain_links), ledger.engine.dialect).insert_rows(connection, rows)
    finally:
        event.remove(ledger.engine, "before_cursor_execute", record)
    assert _links(ledger) == rows  # every value as given, the at-rest encoding read back
    inserts = [count for sql, count in seen if sql.startswith("INSERT INTO chain_links")]
    assert inserts == [12, 12, 6]  # rows 1-2, 3-4, 5: one statement each, on both ledgers


def test_insert_rows_refuses_a_violation_and_leaves_the_transaction_to_the_caller(ledger):
    rows = [dict(LINK, chain_position=1, decision_id="d1"), dict(LINK, chain_position=1, decision_id="d2")]
    with pytest.raises(IntegrityError), ledger.write() as connection:
        Prepared(insert(chain_links), ledger.engine.dialect).insert_rows(connection, rows)
    assert _links(ledger) == []  # not one row of the statement is stored


def test_postgresql_statements_carry_its_own_numbered_placeholders():
    # On psycopg a statement is sent as PostgreSQL's `$1, $2, …` on a raw cursor: a name bound
    # twice keeps its number, an escaped `%` is a plain one, and the parameters come in number order.
    from sqlalchemy import bindparam, text
    from sqlalchemy.dialects.postgresql import psycopg as pg_psycopg

    from gate.ledger.prepared import _dollar_placeholders, _row_numbers

    sql, names = _dollar_placeholders("UPDATE t SET a = %(a)s, b = %(b)s WHERE c = %(a)s AND d LIKE 'x%%'")
    assert (sql, names) == ("UPDATE t SET a = $1, b = $2 WHERE c = $1 AND d LIKE 'x%'", ["a", "b"])
    assert _row_numbers("($1, $2, $1)", 2) == "($3, $4, $3)"
    statement = text("SELECT :first AS one, :second AS two, :first AS three").bindparams(
        bindparam("first"), bindparam("second"))
    prepared = Prepared(statement, pg_psycopg.dialect())
    assert prepared.sql == "SELECT $1 AS one, $2 AS two, $1 AS three"
    assert prepared.parameters({"second": 2, "first": 1}) == (1, 2)
