"""The ledger's at-rest encoding end to end, on both backends (gate/ledger/codec.py, issue 23):

* the documents are stored encoded, and every read (decide answer, GET, packet, hosted verify,
  receipts) returns the exact text that was hashed;
* rows written plain (before the encoding, across migration 0011 on PostgreSQL: text -> bytea)
  still read and verify, next to new encoded rows;
* a tampered or undecodable at-rest value fails closed (503, no value, never verified), and a
  re-encoded edited document fails verification on the named check;
* bytes per decision stay under the floor.
"""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path

import pytest
from sqlalchemy import select, text, update

from gate.ledger import codec
from gate.ledger.codec import MARK, decode
from gate.ledger.store import MIGRATIONS_DIR
from gate.ledger.tables import chain_links, decisions, lifecycle_receipts
from gate.protocol.canonical import canonical_text

pytestmark = pytest.mark.usefixtures("backend")

OUTCOME = {"outcome_status": "succeeded", "action_executed": True, "observed_metrics": {"margin": 31.5}}
FLOOR_BYTES = 6_000  # issue 23: <= 6 KB per decision at rest, receipts, links and indexes counted


def _raw(app, sql: str, **params):
    with app.extensions["gate"].ledger.engine.connect() as connection:
        return connection.execute(text(sql), params).scalar()


def _raw_set(app, sql: str, **params) -> None:
    with app.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(text(sql), params)


def _decide(client, api_key, sample_request, outcome=True):
    created = client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key})
    assert created.status_code == 200
    receipt = None
    if outcome:
        answer = client.post(f"/api/decision/{created.json['decision_id']}/outcome", headers={"x-api-key": api_key},
                             json={**OUTCOME, "decision_record_hash": created.json["record_hash"]})
        assert answer.status_code in (200, 201)
        receipt = _text(answer.json["outcome"])
    return created.get_data(as_text=True), receipt


def _text(document) -> str:
    """A receipt's stored text: the encoder of gate.services.lifecycle."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


def _reads_back(client, api_key, sample_request, record_text, receipt_text):
    """Every read path returns the stored texts byte for byte, and the decision verifies."""
    record = json.loads(record_text)
    decision_id, headers = record["decision_id"], {"x-api-key": api_key}
    got = client.get(f"/api/decision/{decision_id}", headers=headers)
    assert got.status_code == 200 and got.get_data(as_text=True) == record_text
    verified = client.get(f"/api/decision/{decision_id}/verify", headers=headers)
    assert verified.status_code == 200 and verified.json["verified"] is True, verified.json
    packet = client.get(f"/api/decision/{decision_id}/packet?include_input=true", headers=headers)
    assert packet.status_code == 200
    assert _text(packet.json["decision_record"]) == record_text
    assert canonical_text(packet.json["original_input"]) == canonical_text(sample_request)
    checked = client.post("/api/decision/packet/verify", json={"packet": packet.json}).json
    assert checked["verified"] is True, checked
    if receipt_text is not None:
        outcomes = client.get(f"/api/decision/{decision_id}/outcome", headers=headers)
        assert outcomes.status_code == 200
        assert [_text(item) for item in outcomes.json["outcome_records"]] == [receipt_text]
        assert [_text(item) for item in packet.json["outcome_records"]] == [receipt_text]
    chain = client.get(f"/api/decision/chains/{record['audit_chain']['chain_id']}?limit=1000", headers=headers)
    assert chain.status_code == 200 and chain.json["verification"]["valid"] is True, chain.json["verification"]


def test_documents_are_stored_encoded_and_read_back_byte_for_byte(app, client, api_key, sample_request):
    record_text, receipt_text = _decide(client, api_key, sample_request)
    decision_id = json.loads(record_text)["decision_id"]
    stored = {
        "record": _raw(app, "SELECT record_json FROM decisions WHERE decision_id = :id", id=decision_id),
        "request": _raw(app, "SELECT request_json FROM decisions WHERE decision_id = :id", id=decision_id),
        "link": _raw(app, "SELECT link_json FROM chain_links WHERE decision_id = :id", id=decision_id),
        "receipt": _raw(app, "SELECT receipt_json FROM lifecycle_receipts WHERE decision_id = :id", id=decision_id),
    }
    for name, value in stored.items():
        assert isinstance(value, (bytes, memoryview)) and bytes(value)[0] == MARK, name
    assert decode(stored["record"]) == record_text
    assert len(bytes(stored["record"])) * 3 < len(record_text.encode())
    assert decode(stored["request"]) == canonical_text(sample_request)
    assert decode(stored["receipt"]) == receipt_text
    with app.extensions["gate"].ledger.engine.connect() as connection:
        assert connection.execute(select(decisions.c.request_json)
                                  .where(decisions.c.decision_id == decision_id)).scalar() == canonical_text(sample_request)
    _reads_back(client, api_key, sample_request, record_text, receipt_text)


def _alembic(app, action: str, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    ledger = app.extensions["gate"].ledger
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", ledger.url.replace("%", "%%"))
    with ledger.engine.begin() as connection:
        config.attributes["connection"] = connection
        getattr(command, action)(config, revision)


def test_plain_rows_from_before_the_encoding_still_read_and_verify(app, client, api_key, sample_request,
                                                                   monkeypatch, backend):
    """Rows written as plain text on the schema before 0011, then 0011 applied (PostgreSQL: the
    columns become bytea by conversion), then new rows written encoded: all read and verify."""
    monkeypatch.setattr(codec, "MODE", codec.PLAIN)
    old = [_decide(client, api_key, sample_request) for _ in range(2)]
    _alembic(app, "downgrade", "0010_releases")
    if backend == "postgresql":
        assert _raw(app, "SELECT data_type FROM information_schema.columns WHERE table_name = 'decisions' "
                         "AND column_name = 'record_json'") == "text"
        old_id = json.loads(old[0][0])["decision_id"]
        assert _raw(app, "SELECT record_json FROM decisions WHERE decision_id = :id", id=old_id) == old[0][0]
    _alembic(app, "upgrade", "head")
    monkeypatch.setattr(codec, "MODE", codec.ZSTD)
    new = _decide(client, api_key, sample_request)
    for record_text, _ in old:
        value = _raw(app, "SELECT record_json FROM decisions WHERE decision_id = :id",
                     id=json.loads(record_text)["decision_id"])
        assert (value if isinstance(value, str) else bytes(value).decode("utf-8")) == record_text  # still plain
    value = _raw(app, "SELECT record_json FROM decisions WHERE decision_id = :id", id=json.loads(new[0])["decision_id"])
    assert bytes(value)[0] == MARK
    for record_text, receipt_text in [*old, new]:
        _reads_back(client, api_key, sample_request, record_text, receipt_text)


def _flip_middle(value) -> bytes:
    data = bytes(value)
    index = len(data) // 2
    return data[:index] + bytes([data[index] ^ 0x10]) + data[index + 1:]


@pytest.mark.parametrize("damage", ["flipped byte", "unknown dictionary", "no dictionary", "truncated"])
def test_an_undecodable_record_fails_closed(app, client, api_key, sample_request, damage):
    record_text, _ = _decide(client, api_key, sample_request, outcome=False)
    decision_id = json.loads(record_text)["decision_id"]
    value = bytes(_raw(app, "SELECT record_json FROM decisions WHERE decision_id = :id", id=decision_id))
    broken = {"flipped byte": _flip_middle(value), "unknown dictionary": bytes([MARK, 99]) + value[2:],
              "no dictionary": bytes([MARK, 0]) + value[2:], "truncated": value[:-3]}[damage]
    _raw_set(app, "UPDATE decisions SET record_json = :v WHERE decision_id = :id", v=broken, id=decision_id)
    headers = {"x-api-key": api_key}
    for path in (f"/api/decision/{decision_id}", f"/api/decision/{decision_id}/verify",
                 f"/api/decision/{decision_id}/packet"):
        answer = client.get(path, headers=headers)
        assert answer.status_code == 503, (path, answer.status_code)
        assert answer.json["error"] in ("LEDGER_UNAVAILABLE", "PACKET_SOURCE_UNAVAILABLE")
        assert "could not be decoded" in answer.json["message"]
        assert record_text[:40] not in answer.get_data(as_text=True)
    # The rest of the ledger is unaffected.
    assert client.post("/api/decide", json=sample_request, headers=headers).status_code == 200


def test_a_corrupt_receipt_or_link_fails_closed(app, client, api_key, sample_request):
    record_text, _ = _decide(client, api_key, sample_request)
    decision_id = json.loads(record_text)["decision_id"]
    headers = {"x-api-key": api_key}
    value = _raw(app, "SELECT receipt_json FROM lifecycle_receipts WHERE decision_id = :id", id=decision_id)
    _raw_set(app, "UPDATE lifecycle_receipts SET receipt_json = :v WHERE decision_id = :id",
             v=_flip_middle(value), id=decision_id)
    assert client.get(f"/api/decision/{decision_id}/outcome", headers=headers).status_code == 503
    assert client.get(f"/api/decision/{decision_id}/packet", headers=headers).status_code == 503
    _raw_set(app, "UPDATE lifecycle_receipts SET receipt_json = :v WHERE decision_id = :id", v=value, id=decision_id)
    link = _raw(app, "SELECT link_json FROM chain_links WHERE decision_id = :id", id=decision_id)
    _raw_set(app, "UPDATE chain_links SET link_json = :v WHERE decision_id = :id", v=_flip_middle(link), id=decision_id)
    verified = client.get(f"/api/decision/{decision_id}/verify", headers=headers)
    assert verified.status_code == 503 or verified.json["verified"] is False


@pytest.mark.parametrize("column, check", [("record_json", "record_hash"), ("request_json", "ledger_input_hash")])
def test_a_validly_encoded_edit_fails_verification(app, client, api_key, sample_request, column, check):
    """Editing the document and re-encoding it (what someone with the codec could do) is caught
    by the document's own hash, exactly as for plain rows."""
    record_text, _ = _decide(client, api_key, sample_request, outcome=False)
    decision_id = json.loads(record_text)["decision_id"]
    engine = app.extensions["gate"].ledger.engine
    with engine.begin() as connection:
        where = decisions.c.decision_id == decision_id
        document = json.loads(connection.execute(select(decisions.c[column]).where(where)).scalar())
        if column == "record_json":
            document["verdict"] = "no"
        else:
            document["context"]["inputs"]["discount_percent"] = 24
        connection.execute(update(decisions).where(where).values(**{column: json.dumps(document)}))
    assert bytes(_raw(app, f"SELECT {column} FROM decisions WHERE decision_id = :id", id=decision_id))[0] == MARK
    result = client.get(f"/api/decision/{decision_id}/verify", headers={"x-api-key": api_key}).json
    assert result["verified"] is False
    assert check in result["failed_checks"], result["failed_checks"]


def test_bytes_per_decision_stay_under_the_floor(database_url, tmp_path, backend, sample_request):
    """200 decides of the sample request with one outcome per two decisions, every table and
    index counted (over the empty ledger), after VACUUM: at most FLOOR_BYTES per decision."""
    from benchmarks.bench_storage import fill, per_decision, pg_sizes, sqlite_sizes

    n = 200

    def sizes():
        return sqlite_sizes(Path(database_url.removeprefix("sqlite:///"))) if backend == "sqlite" else pg_sizes(database_url)

    empty = sizes()
    home = tmp_path / "bench"
    home.mkdir()
    fill(database_url, home, n, sample_request)
    result = per_decision({"n": n, "empty": empty, "full": sizes()})
    assert result["marginal"] <= FLOOR_BYTES, result
    assert result["tables"]["decisions"]["marginal"] < 3_000, result


def test_export_streams_are_the_same_whatever_the_encoding(app, client, api_key, sample_request, monkeypatch):
    """The export's read side (gate.ledger.stream) yields the same rows from plain and encoded rows."""
    from gate.ledger import stream

    monkeypatch.setattr(codec, "MODE", codec.PLAIN)
    for _ in range(3):
        _decide(client, api_key, sample_request)
    ledger = app.extensions["gate"].ledger

    def streams():
        return ([row for batch in stream.iter_decisions(ledger) for row in batch],
                [row for batch in stream.iter_receipts(ledger, "outcome") for row in batch],
                [row for batch in stream.iter_chain_decisions(ledger, "tenant_a") for row in batch])

    before = streams()
    monkeypatch.setattr(codec, "MODE", codec.ZSTD)
    with ledger.engine.begin() as connection:  # re-encode every document in place
        for table, key, column in ((decisions, "decision_id", "record_json"), (decisions, "decision_id", "request_json"),
                                   (chain_links, "decision_id", "link_json"),
                                   (lifecycle_receipts, "receipt_id", "receipt_json")):
            for row_key, value in connection.execute(select(table.c[key], table.c[column])).all():
                connection.execute(update(table).where(table.c[key] == row_key).values(**{column: value}))
    assert bytes(_raw(app, "SELECT record_json FROM decisions LIMIT 1"))[0] == MARK
    assert streams() == before


def test_the_parquet_export_is_the_same_whatever_the_encoding(database_url, tmp_path, monkeypatch):
    """A ledger written plain, exported; every document then re-encoded in place and exported
    again: every table of the two datasets holds the same rows, and the manifests the same
    chains and ledger head."""
    from datetime import datetime

    import pyarrow.dataset as pads

    from tests.workbench.ledger_support import LedgerWriter, at
    from workbench.dataset.export import export_ledger

    now = datetime(2026, 6, 1, tzinfo=UTC)
    monkeypatch.setattr(codec, "MODE", codec.PLAIN)
    writer = LedgerWriter(database_url, tmp_path / "keys.json")
    try:
        for index in range(6):
            record = writer.decide("acme", at(1 + index % 4, 1 + index, ms=index), discount=5 + index)
            writer.receipt("outcome", "acme", record, at(5, 1 + index, ms=index), "succeeded")
        export_ledger(writer.ledger, str(tmp_path / "plain"), now=now)
        monkeypatch.setattr(codec, "MODE", codec.ZSTD)
        with writer.ledger.engine.begin() as connection:
            for table, key, column in ((decisions, "decision_id", "record_json"),
                                       (decisions, "decision_id", "request_json"),
                                       (chain_links, "decision_id", "link_json"),
                                       (lifecycle_receipts, "receipt_id", "receipt_json")):
                for row_key, value in connection.execute(select(table.c[key], table.c[column])).all():
                    connection.execute(update(table).where(table.c[key] == row_key).values(**{column: value}))
            assert bytes(connection.execute(text("SELECT record_json FROM decisions LIMIT 1")).scalar())[0] == MARK
        export_ledger(writer.ledger, str(tmp_path / "zstd"), now=now)
    finally:
        writer.close()
    manifests = [json.loads((tmp_path / name / "manifest.json").read_text()) for name in ("plain", "zstd")]
    assert manifests[0]["chains"] == manifests[1]["chains"]
    assert manifests[0]["ledger_head"] == manifests[1]["ledger_head"]
    for table in ("decisions", "chain_links", "outcomes"):
        rows = []
        for name in ("plain", "zstd"):
            data = pads.dataset(str(tmp_path / name / table), format="parquet", partitioning="hive").to_table()
            rows.append(sorted(json.dumps(row, sort_keys=True, default=str) for row in data.to_pylist()))
        assert rows[0] == rows[1] and rows[0], table
