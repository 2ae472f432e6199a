"""Streaming ledger reads: stable keyset order, bounded batches, scope and policy filters, and
upper bounds; on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from gate.ledger import stream
from tests.workbench.ledger_support import LedgerWriter, at

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def written(database_url, tmp_path):
    writer = LedgerWriter(database_url, tmp_path / "keys.json")
    records = []
    # Same instant for several decisions: the id breaks the tie in the keyset.
    for index in range(7):
        scope = "acme" if index % 2 == 0 else "globex"
        moment = at(1 + index % 3, 5, ms=0 if index < 4 else index)
        record = writer.decide(scope, moment, rulebook_id="pricing_exception" if index != 3 else "other_book")
        records.append((scope, record))
        writer.receipt("outcome", scope, record, at(4, 1 + index), "succeeded" if index % 3 else "failed")
    writer.receipt("execution", "acme", records[0][1], at(4, 20), "executed")
    yield writer, records
    writer.close()


def flatten(batches):
    batches = list(batches)
    return batches, [row for batch in batches for row in batch]


def test_decisions_stream_in_stable_order_in_bounded_batches(written):
    writer, records = written
    batches, rows = flatten(stream.iter_decisions(writer.ledger, batch_size=3))
    assert [len(batch) for batch in batches] == [3, 3, 1]
    keys = [(row["scope"], row["created_at"], row["decision_id"]) for row in rows]
    assert keys == sorted(keys) and len(set(keys)) == 7
    assert {row["decision_id"] for row in rows} == {record["decision_id"] for _, record in records}
    assert set(rows[0]) == set(stream.DECISION_ROW_COLUMNS) | {"chain_position"}
    assert all(row["chain_position"] >= 1 for row in rows)
    # Resuming after any key gives exactly the rest.
    _, rest = flatten(stream.iter_decisions(writer.ledger, after=keys[2], batch_size=2))
    assert [row["decision_id"] for row in rest] == [row["decision_id"] for row in rows[3:]]


def test_decision_filters(written):
    writer, records = written
    _, acme = flatten(stream.iter_decisions(writer.ledger, scope="acme"))
    assert {row["decision_id"] for row in acme} == {r["decision_id"] for s, r in records if s == "acme"}
    _, other = flatten(stream.iter_decisions(writer.ledger, policy_id="other_book"))
    assert [row["decision_id"] for row in other] == [records[3][1]["decision_id"]]
    _, early = flatten(stream.iter_decisions(writer.ledger, created_before="2026-02-01T00:00:00.000Z"))
    assert {row["created_at"][:7] for row in early} == {"2026-01"} and len(early) == 3
    assert list(stream.iter_decisions(writer.ledger, scope="nobody")) == []


def test_chain_stream_is_position_ordered_and_bounded(written):
    writer, records = written
    _, rows = flatten(stream.iter_chain_decisions(writer.ledger, "acme", batch_size=1))
    assert [row["chain_position"] for row in rows] == [1, 2, 3, 4]
    assert [row["decision_id"] for row in rows] == [r["decision_id"] for s, r in records if s == "acme"]
    _, window = flatten(stream.iter_chain_decisions(writer.ledger, "acme", after_position=1, upto_position=3))
    assert [row["chain_position"] for row in window] == [2, 3]
    assert list(stream.iter_chain_decisions(writer.ledger, "nobody")) == []
    heads = {head["scope"]: head for head in stream.chain_heads_of(writer.ledger)}
    assert heads["acme"]["size"] == 4 and heads["globex"]["size"] == 3
    assert heads["acme"]["head_link_hash"] == rows[-1]["link_hash"]


def test_receipt_stream_order_filters_and_kinds(written):
    writer, records = written
    batches, outcomes = flatten(stream.iter_receipts(writer.ledger, "outcome", batch_size=2))
    assert [len(batch) for batch in batches] == [2, 2, 2, 1]
    keys = [(row["scope"], row["reported_at"], row["receipt_id"]) for row in outcomes]
    assert keys == sorted(keys)
    assert {row["kind"] for row in outcomes} == {"outcome"}
    _, acme = flatten(stream.iter_receipts(writer.ledger, "outcome", scope="acme"))
    assert len(acme) == 4 and {row["scope"] for row in acme} == {"acme"}
    _, other = flatten(stream.iter_receipts(writer.ledger, "outcome", policy_id="other_book"))
    assert [row["decision_id"] for row in other] == [records[3][1]["decision_id"]]
    _, before = flatten(stream.iter_receipts(writer.ledger, "outcome", reported_before="2026-04-03T00:00:00.000Z"))
    assert len(before) == 2
    _, rest = flatten(stream.iter_receipts(writer.ledger, "outcome", after=keys[4]))
    assert [row["receipt_id"] for row in rest] == [row["receipt_id"] for row in outcomes[5:]]
    assert stream.receipt_counts(writer.ledger) == {"execution": 1, "outcome": 7, "crm_sync": 0}
    assert stream.receipt_counts(writer.ledger, "globex") == {"execution": 0, "outcome": 3, "crm_sync": 0}
    assert stream.scopes(writer.ledger) == ["acme", "globex"]


def test_bad_arguments_are_refused(written):
    writer, _ = written
    for size in (0, stream.MAX_BATCH + 1, "10"):
        with pytest.raises(ValueError, match="batch_size"):
            next(stream.iter_decisions(writer.ledger, batch_size=size))
    with pytest.raises(ValueError, match="kind"):
        stream.iter_receipts(writer.ledger, "refund")


def test_decisions_created_at_by_id_in_bounded_queries(written, monkeypatch):
    """The export's lookup of the decisions behind new outcome records (which rollup partitions
    they reopen): scope and created_at by id, in queries of at most LOOKUP_BATCH ids; an id the
    ledger does not hold is absent, a repeated id is looked up once."""
    writer, records = written
    monkeypatch.setattr(stream, "LOOKUP_BATCH", 2)  # seven ids: four queries
    ids = [record["decision_id"] for _, record in records]
    found = stream.decisions_created_at(writer.ledger, [*ids, ids[0], "dec_not_in_the_ledger"])
    assert found == {record["decision_id"]: (scope, record["created_at"]) for scope, record in records}
    assert stream.decisions_created_at(writer.ledger, []) == {}
