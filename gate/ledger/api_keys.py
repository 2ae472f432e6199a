"""Ledger reads and writes of API keys (table `api_keys`) and their monthly usage (table
`usage_counters`).

Guarantees:
- The monthly cap is charged with a conditional upsert (`used < cap`) in the storing
  transaction of the decision it counts, so concurrent requests can never overshoot it and
  refused requests charge nothing (`gate.ledger.decision_write`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypedDict, cast

from sqlalchemy import and_, bindparam, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import ReturningInsert

from gate.clock import seconds_to_next_month
from gate.errors import MonthlyCapExceeded
from gate.ledger.connection import LedgerConnection
from gate.ledger.groupcommit import BATCH_MEMO, defer
from gate.ledger.tables import api_keys, usage_counters


class ApiKeyRow(TypedDict):
    """An `api_keys` row: the key's hash (never the key), its scope, plan and limits, its state,
    its release permissions (comma-separated; null = decide only) and its holder."""

    key_id: str
    key_hash: str
    scope: str
    plan: str
    rate_limit: int | None
    monthly_cap: int | None
    status: str
    label: str | None
    created_at: str
    disabled_at: str | None
    permissions: str | None
    holder: str | None


_KEY_BY_HASH = select(api_keys).where(api_keys.c.key_hash == bindparam("key_hash"))
_SET_USED = update(usage_counters).where(and_(
    usage_counters.c.key_id == bindparam("counter_key_id"), usage_counters.c.period == bindparam("counter_period"),
)).values(used=bindparam("counter_used"))


@dataclass(frozen=True, slots=True)
class CapCharge:
    """Charge one record to `key_id` for `period` (YYYY-MM), refusing beyond `cap`; `at` is the
    record's time (the refusal says how long until the cap resets)."""

    key_id: str
    period: str
    cap: int
    at: str

    def refusal(self) -> MonthlyCapExceeded:
        """The cap's refusal, saying in how many seconds it resets (`retry_after`)."""
        return MonthlyCapExceeded(self.cap, self.period, seconds_to_next_month(self.at))


@lru_cache(maxsize=2)
def charge_statement(dialect: str) -> ReturningInsert[Any]:
    """One atomic upsert: create the month's counter at 1, or add 1 while below the cap;
    RETURNING the count, or no row when the cap refused (built once per dialect)."""
    dialect_insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = dialect_insert(usage_counters).values(key_id=bindparam("key_id"), period=bindparam("period"), used=1)
    return statement.on_conflict_do_update(
        index_elements=[usage_counters.c.key_id, usage_counters.c.period],
        set_={"used": usage_counters.c.used + 1},
        where=usage_counters.c.used < bindparam("cap"),
    ).returning(usage_counters.c.used)


class ApiKeyLedger:
    """The key and usage tables over one `LedgerConnection`."""

    def __init__(self, ledger: LedgerConnection) -> None:
        self.ledger = ledger

    def insert_api_key(self, row: ApiKeyRow) -> None:
        with self.ledger.write() as connection:
            connection.execute(insert(api_keys).values(**row))

    def api_key_by_hash(self, key_hash: str) -> ApiKeyRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(_KEY_BY_HASH, {"key_hash": key_hash}).mappings().first()
        return cast(ApiKeyRow, dict(row)) if row else None  # select(api_keys): exactly its columns

    def api_key(self, key_id: str) -> ApiKeyRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(
                select(api_keys).where(api_keys.c.key_id == key_id)
            ).mappings().first()
        return cast(ApiKeyRow, dict(row)) if row else None  # select(api_keys): exactly its columns

    def list_api_keys(self) -> list[ApiKeyRow]:
        with self.ledger.read() as connection:
            rows = connection.execute(select(api_keys).order_by(api_keys.c.created_at)).mappings()
            return [cast(ApiKeyRow, dict(row)) for row in rows]  # select(api_keys): exactly its columns

    def set_api_key_status(self, key_id: str, status: str, at: str) -> bool:
        with self.ledger.write() as connection:
            result = connection.execute(
                update(api_keys)
                .where(api_keys.c.key_id == key_id)
                .values(status=status, disabled_at=at if status == "disabled" else None)
            )
        return result.rowcount == 1

    def set_api_key_grant(self, key_id: str, permissions: str | None, holder: str | None) -> bool:
        """A key's permissions and holder (gate.services.keys widens a key through here only when
        it acts on no production right; one that does is written with its grant event)."""
        with self.ledger.write() as connection:
            result = connection.execute(update(api_keys).where(api_keys.c.key_id == key_id)
                                        .values(permissions=permissions, holder=holder))
        return result.rowcount == 1

    def monthly_usage(self, key_id: str, period: str) -> int:
        with self.ledger.read() as connection:
            used = connection.execute(
                select(usage_counters.c.used).where(
                    and_(usage_counters.c.key_id == key_id, usage_counters.c.period == period)
                )
            ).scalar()
        return int(used or 0)

    def charge(self, connection: Connection, charge: CapCharge) -> int:
        """Charge one record inside the decision's write transaction (`charge_statement`).
        In a batch run all at once only the key's first member runs it (the counter's row is
        then this transaction's until the commit); the others count on from its answer, under the
        same rule, and the batch writes the last count once (`BATCH_FLUSH`)."""
        memo = connection.info.get(BATCH_MEMO)
        counted: list[int] | None = memo.get(("used", charge.key_id, charge.period)) if memo is not None else None
        if counted is not None:
            if counted[0] >= charge.cap:
                raise charge.refusal()
            counted[0] += 1
            set_used = self.ledger.hot("set-used", _SET_USED)
            values = {"counter_key_id": charge.key_id, "counter_period": charge.period, "counter_used": counted[0]}
            defer(connection, ("used", charge.key_id, charge.period),
                   lambda connection: set_used.run(connection, values))
            return counted[0]
        answer = self.ledger.hot("charge", charge_statement(self.ledger.dialect)).first(
            connection, {"key_id": charge.key_id, "period": charge.period, "cap": charge.cap})
        used = answer["used"] if answer is not None else None
        if used is None:
            raise charge.refusal()
        if memo is not None:
            memo["used", charge.key_id, charge.period] = [int(used)]
        return int(used)
