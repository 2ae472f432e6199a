"""Issue 67, items 1 and 2, through HTTP on SQLite and PostgreSQL: with a data map that marks
`customer_email` personal and `customer_id` the subject's key, no value of either leaves in a
webhook body (received and verified with the `standardwebhooks` package), a NATS message or the
dataset in clear (a byte search of the Parquet files and a search of every decoded value), while
the dataset's hashed column still groups equal values, the signed record the caller got is
unchanged and every delivered event that was masked says which members and where the record is."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pyarrow.parquet as pq
import pytest

from gate.events.stream import JetStreamPublisher
from tests.events.receiver import Receiver
from tests.events.test_stream import _read_all, _run, nats_url  # noqa: F401 - the nats-server fixture
from tests.events.test_webhooks import LOOPBACK, dispatch
from tests.privacy.support import CUSTOMER, EMAIL, OTHER_CUSTOMER, customer_request, privacy

SECRETS = (EMAIL.encode(), CUSTOMER.encode(), OTHER_CUSTOMER.encode())


@pytest.fixture
def gate(make_app, backend):
    return make_app(env=LOOPBACK)


@pytest.fixture
def admin(issue_key):
    return {"x-api-key": issue_key(permissions="decide,admin,approve")["api_key"]}


@pytest.fixture
def receiver():
    made = Receiver()
    yield made
    made.close()


def _clear(blob: bytes) -> list[bytes]:
    return [value for value in SECRETS if value in blob]


def _decide_for_customers(client, admin) -> list[dict]:
    records = []
    for body in (customer_request(), customer_request(held=True), customer_request(OTHER_CUSTOMER, "bob@example.org"),
                 customer_request()):
        answer = client.post("/api/decide", json=body, headers=admin)
        assert answer.status_code == 200, answer.get_json()
        records.append(answer.get_json())
    return records


def _set_up(client, admin, receiver) -> None:
    put = client.put("/api/privacy", json=privacy(), headers=admin)
    assert put.status_code == 200, put.get_json()
    assert put.get_json()["privacy"]["data_map"]["subject_key"] == "context.customer_id"
    on = client.put("/api/events/settings", json={"decision_created": True, "anomaly_every_seconds": None},
                    headers=admin)
    assert on.status_code == 200, on.get_json()
    made = client.post("/api/events/subscriptions", json={"url": receiver.url, "event_types": ["*"]}, headers=admin)
    assert made.status_code == 201, made.get_json()
    receiver.secrets.append(made.get_json()["secret"])


def test_no_personal_value_leaves_in_a_webhook_and_the_caller_s_record_is_unchanged(gate, admin, receiver):
    client = gate.test_client()
    _set_up(client, admin, receiver)
    records = _decide_for_customers(client, admin)
    assert records[0]["action_binding"]["subject"] == CUSTOMER  # the caller's signed record keeps it
    assert records[0]["action_binding"]["actor"] == EMAIL
    dispatch(gate, 5)
    created = [e for e in receiver.accepted if e["type"].endswith("decision.created")]
    assert len(created) == 4 and receiver.rejected == 0  # each verified by standardwebhooks
    assert receiver.bodies and all(_clear(body) == [] for body in receiver.bodies)
    first = created[0]
    assert json.loads(first["maskedmembers"]) == ["/data/record/action_binding/actor",
                                                    "/data/record/action_binding/subject"]
    assert first["recordurl"] == f"/api/decision/{records[0]['decision_id']}"
    assert "subject" not in first["data"]["record"]["action_binding"]
    assert first["data"]["record_hash"] == records[0]["record_hash"]
    # the full record is read with a key, and it is the record the caller got, which still verifies
    full = client.get(first["recordurl"], headers=admin).get_json()
    assert full["action_binding"]["subject"] == CUSTOMER and full["record_hash"] == records[0]["record_hash"]
    verified = client.get(f"/api/decision/{records[0]['decision_id']}/verify", headers=admin).get_json()
    assert verified["verified"] is True and verified["integrity_valid"] is True
    # the stored outbox row is not changed: masking applies to what leaves
    stored = gate.extensions["gate"].events.outbox.events_after("tenant_a", 0, 1000)
    assert any(EMAIL in row["event_json"] for row in stored)


def test_no_personal_value_leaves_in_a_nats_message(gate, admin, receiver, nats_url):  # noqa: F811
    client = gate.test_client()
    _set_up(client, admin, receiver)
    _decide_for_customers(client, admin)
    events = gate.extensions["gate"].events

    def publish() -> int:
        publisher = JetStreamPublisher(events.outbox, nats_url, body_of=events.delivery.body_of)
        try:
            return publisher.publish_pending()
        finally:
            publisher.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(publish).result(timeout=120) > 4
    read = _run(_read_all(nats_url))
    created = [e for _, _, e in read if e["type"].endswith("decision.created")]
    assert len(created) == 4
    assert all(_clear(json.dumps(e).encode()) == [] for _, _, e in read)
    assert all("maskedmembers" in e for e in created)


@pytest.mark.parametrize("layout", ["parquet", "iceberg"])
def test_the_dataset_keeps_personal_values_hashed_and_groupable(gate, admin, receiver, tmp_path, layout):
    from workbench.dataset import iceberg
    from workbench.dataset.export import export_ledger

    client = gate.test_client()
    _set_up(client, admin, receiver)
    records = _decide_for_customers(client, admin)
    runtime = gate.extensions["gate"]
    root = tmp_path / "out" / "dataset"
    lakehouse = iceberg.default_target(str(root), root.parent) if layout == "iceberg" else None
    export_ledger(runtime.ledger, str(root), signer=None, settle_seconds=0, privacy_key=runtime.privacy.key,
                  lakehouse=lakehouse)
    files = [path for path in sorted((tmp_path / "out").rglob("*")) if path.is_file()]
    assert any(path.suffix == ".parquet" for path in files)
    for path in files:  # every file the export wrote: parts, Iceberg data and metadata, the catalog
        assert _clear(path.read_bytes()) == [], path
        if path.suffix == ".parquet":  # and every value decoded (a page may be compressed)
            assert _clear(json.dumps(pq.read_table(path).to_pylist(), default=str).encode()) == [], path
    facts = pq.read_table(root / "facts").to_pylist()
    by_decision = {row["decision_id"]: row for row in facts}
    emails = [by_decision[r["decision_id"]]["customer_email::s"] for r in records]
    assert all(e.startswith("hmac-sha256:") for e in emails)
    # the same customer's two decisions group under one token, the other customer's apart
    assert emails[0] == emails[1] == emails[3] != emails[2]


def test_no_personal_value_reaches_the_gate_s_logs(gate, admin, receiver, caplog, monkeypatch):
    import logging

    client = gate.test_client()
    _set_up(client, admin, receiver)
    service = gate.extensions["gate"].service
    decide = service.decide

    def logging_decide(caller, body, **options):
        # any module that logs the request it is deciding (a debug line, an adapter's failure)
        logging.getLogger("gate.decide").warning("deciding %s", json.dumps(body))
        return decide(caller, body, **options)

    monkeypatch.setattr(service, "decide", logging_decide)
    with caplog.at_level(logging.DEBUG):
        _decide_for_customers(client, admin)
        dispatch(gate, 5)
    lines = [record.getMessage() for record in caplog.records]
    deciding = [line for line in lines if line.startswith("deciding ")]
    assert len(deciding) == 4 and all("[dropped]" in line for line in deciding)
    assert all("margin_percent" in line for line in deciding)  # the rest of the line is kept
    assert _clear(caplog.text.encode()) == [] and _clear("\n".join(lines).encode()) == []


def test_no_personal_value_leaves_in_an_mcp_answer_and_the_signed_resolution_stays_whole(gate, admin, receiver):
    client = gate.test_client()
    _set_up(client, admin, receiver)
    held = client.post("/api/decide", json=customer_request(held=True), headers=admin).get_json()
    route = client.get(f"/api/decision/{held['decision_id']}/resolution", headers=admin).get_json()
    assert route["hold"]["facts"]["customer_email"] == EMAIL  # the keyed REST route is the full view
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "hold_resolution", "arguments": {"decision_id": held["decision_id"]}}}
    answer = client.post("/api/mcp", json=message, headers=admin)
    assert _clear(answer.data) == [], answer.get_json()
    content = answer.get_json()["result"]["structuredContent"]
    assert content["state"] == "open" and "/hold/facts/customer_email" in content["masked"]
    assert content["hold"]["facts"]["margin_percent"] == 12  # what is nobody's stays
