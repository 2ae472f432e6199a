"""`gate.verify.ledger_rows` called directly on crafted rows: each tampering of a decisions row,
its chain link or head, or its receipt rows and head fails exactly the check named for it
(tests/api/test_ledger_binding.py tampers through SQL and HTTP)."""

from __future__ import annotations

import json

import pytest

from gate.chain.links import chain_id_for, scope_hash
from gate.chain.rowseal import (
    decision_row_hash,
    receipt_head_payload,
    receipt_row_hash,
    row_signature_payload,
)
from gate.keys.anchors import TrustAnchors
from gate.keys.signing import Ed25519Key, HmacKey, b64url_encode, receipt_signer_for
from gate.verify.ledger_rows import (
    decision_row_checks,
    receipt_chain_failures,
    signature_valid,
)

KEY = Ed25519Key.from_seed(bytes(range(32)), "key_rows")
OTHER = Ed25519Key.from_seed(bytes(range(1, 33)), "key_rows")  # same id, another key
HMAC_KEY = HmacKey("key_hmac", b"ledger-row-secret")
ANCHORS = TrustAnchors.from_public_key_pem(KEY.public_key_pem, key_id=KEY.key_id) \
    + TrustAnchors.from_hmac_key(HMAC_KEY)
SCOPE, DECISION = "tenant_a", "dec_0001"
CHAIN = chain_id_for(SCOPE)
PAYLOAD = b"row payload"

ALL_TRUE = {"ledger_decision_id": True, "ledger_scope": True, "ledger_chain_position": True,
            "ledger_columns": True, "ledger_row_hash": True, "ledger_row_signature": True}


def sign(payload: bytes, key=KEY) -> str:
    return receipt_signer_for(key).sign_payload(payload)


def make_record(key=KEY, **changes) -> dict:
    record = {
        "decision_id": DECISION, "verdict": "yes", "policy_id": "pricing", "policy_version": "1.0.0",
        "policy_bundle_hash": "b" * 64, "policy_hash": "c" * 64, "created_at": "2026-05-21T00:00:00.000Z",
        "idempotency_key": "idem-1", "input_hash": "d" * 64, "record_hash": "e" * 64, "receipt_hash": "f" * 64,
        "receipt_key_id": key.key_id,
        "receipt_public_key_fingerprint": getattr(key, "fingerprint", None),
        "audit_chain": {"chain_id": CHAIN, "chain_position": 3},
        "rulebook_registry": {"scope_hash": scope_hash(SCOPE)},
    }
    record.update(changes)
    return record


def make_columns(record: dict, key=KEY, **changes) -> dict:
    columns = {"decision_id": DECISION, "scope": SCOPE, "key_id": "api_key_1",
               "verdict": record["verdict"], "policy_id": record["policy_id"],
               "policy_version": record["policy_version"], "policy_bundle_hash": record["policy_bundle_hash"],
               "rulebook_hash": record["policy_hash"], "created_at": record["created_at"],
               "idempotency_key": record["idempotency_key"], "input_hash": record["input_hash"],
               "record_hash": record["record_hash"], "receipt_hash": record["receipt_hash"]}
    columns.update(changes)
    columns["row_hash"] = decision_row_hash(columns)
    columns["row_signature"] = sign(row_signature_payload(columns["row_hash"], key.key_id), key) if key else None
    return columns


def make_link(**changes) -> dict:
    link = {"chain_id": CHAIN, "decision_id": DECISION, "chain_position": 3,
            "link_json": json.dumps({"decision_id": DECISION, "chain_position": 3})}
    link.update(changes)
    return link


def row_checks(record=None, columns=None, link=None, head=None, decision_id=DECISION, anchors=ANCHORS):
    record = make_record() if record is None else record
    columns = make_columns(record) if columns is None else columns
    link = make_link() if link is None else link
    head = {"scope": SCOPE} if head is None else head
    return decision_row_checks(decision_id, columns, record, link, head, anchors)


def failing(checks: dict) -> dict:
    return {name: value for name, value in checks.items() if value is not True}


# --------------------------------------------------------------------------- signature_valid


def test_signature_valid_checks_ed25519_and_hmac_with_the_trusted_key_of_the_id_only():
    assert signature_valid(sign(PAYLOAD), KEY.key_id, PAYLOAD, ANCHORS) is True
    assert signature_valid(sign(PAYLOAD, HMAC_KEY), HMAC_KEY.key_id, PAYLOAD, ANCHORS) is True
    assert signature_valid(sign(PAYLOAD), KEY.key_id, PAYLOAD + b"x", ANCHORS) is False
    assert signature_valid(sign(PAYLOAD, HMAC_KEY), HMAC_KEY.key_id, PAYLOAD + b"x", ANCHORS) is False
    assert signature_valid(sign(PAYLOAD, OTHER), KEY.key_id, PAYLOAD, ANCHORS) is False
    # No trusted key or secret for the id: not checkable (None), never true.
    assert signature_valid(sign(PAYLOAD), "key_unknown", PAYLOAD, ANCHORS) is None
    assert signature_valid(sign(PAYLOAD, HMAC_KEY), "key_unknown", PAYLOAD, ANCHORS) is None


@pytest.mark.parametrize("signature", ["ed25519:" + "A" * 86 + ":x", "hmac-sha256:" + "0" * 64 + ":x", "ed25519:"])
def test_a_signature_for_an_untrusted_key_id_is_not_checkable_whatever_its_body(signature):
    assert signature_valid(signature, "key_unknown", PAYLOAD, ANCHORS) is None


@pytest.mark.parametrize("signature", [
    None, 7, "", "ed25519", "rsa:" + "A" * 86, "ED25519:" + sign(PAYLOAD).partition(":")[2],
    "ed25519:" + "!" * 86,  # not base64url
    "ed25519:" + b64url_encode(bytes(63)), "ed25519:" + b64url_encode(bytes(65)),
    "hmac-sha256:" + "0" * 64,
])
def test_a_malformed_signature_is_false(signature):
    key_id = HMAC_KEY.key_id if isinstance(signature, str) and signature.startswith("hmac") else KEY.key_id
    assert signature_valid(signature, key_id, PAYLOAD, ANCHORS) is False


def test_the_stated_fingerprint_picks_among_trusted_keys_that_share_an_id():
    anchors = TrustAnchors.from_public_key_pem(OTHER.public_key_pem, key_id=OTHER.key_id) + ANCHORS
    assert signature_valid(sign(PAYLOAD), KEY.key_id, PAYLOAD, anchors, KEY.fingerprint) is True
    assert signature_valid(sign(PAYLOAD), KEY.key_id, PAYLOAD, anchors) is False  # the first key of the id
    record = make_record()
    assert row_checks(record, anchors=anchors) == (ALL_TRUE, [])


# --------------------------------------------------------------------------- decision_row_checks


def test_an_intact_row_passes_every_check_with_either_signature_algorithm():
    assert row_checks() == (ALL_TRUE, [])
    record = make_record(HMAC_KEY)
    assert row_checks(record, make_columns(record, HMAC_KEY)) == (ALL_TRUE, [])


@pytest.mark.parametrize("where", ["asked", "column", "record"])
def test_a_decision_id_that_differs_anywhere_fails_ledger_decision_id(where):
    record = make_record(decision_id="dec_other") if where == "record" else make_record()
    columns = make_columns(record, decision_id="dec_other") if where == "column" else make_columns(record)
    checks, _ = row_checks(record, columns, decision_id="dec_other" if where == "asked" else DECISION)
    assert checks["ledger_decision_id"] is False


@pytest.mark.parametrize("change", [
    {"scope": None}, {"scope": "tenant_b"}, {"audit_chain": None}, {"audit_chain": "chain"},
    {"chain_id": "chain_other"}, {"link_chain_id": "chain_other"}, {"head": None}, {"head_scope": "tenant_b"},
    {"registry_scope_hash": scope_hash("tenant_b")},
])
def test_any_scope_disagreement_fails_ledger_scope_alone(change):
    record = make_record()
    if "audit_chain" in change:
        record["audit_chain"] = change["audit_chain"]
    if "chain_id" in change:
        record["audit_chain"]["chain_id"] = change["chain_id"]
    if "registry_scope_hash" in change:
        record["rulebook_registry"]["scope_hash"] = change["registry_scope_hash"]
    columns = make_columns(record, scope=change.get("scope", SCOPE))
    link = make_link(chain_id=change.get("link_chain_id", CHAIN))
    head = {"scope": change.get("head_scope", SCOPE)}
    checks = decision_row_checks(DECISION, columns, record, link, None if "head" in change else head, ANCHORS)[0]
    expected = {"ledger_scope": False}
    if "audit_chain" in change:
        expected["ledger_chain_position"] = False
    assert failing(checks) == expected


def test_no_link_row_fails_scope_and_chain_position():
    record = make_record()
    checks, _ = decision_row_checks(DECISION, make_columns(record), record, None, {"scope": SCOPE}, ANCHORS)
    assert failing(checks) == {"ledger_scope": False, "ledger_chain_position": False}


@pytest.mark.parametrize("registry", [None, "not an object"])
def test_a_record_without_a_registry_entry_is_bound_by_its_chain_alone(registry):
    assert row_checks(make_record(rulebook_registry=registry)) == (ALL_TRUE, [])


@pytest.mark.parametrize("link", [
    make_link(link_json=None), make_link(link_json="{not json"), make_link(link_json="[3]"),
    make_link(decision_id="dec_other"),
    make_link(link_json=json.dumps({"decision_id": "dec_other", "chain_position": 3})),
    make_link(chain_position=4),
    make_link(link_json=json.dumps({"decision_id": DECISION, "chain_position": 4})),
    make_link(chain_position=4, link_json=json.dumps({"decision_id": DECISION, "chain_position": 4})),
])
def test_a_link_that_names_another_decision_or_position_fails_ledger_chain_position(link):
    assert failing(row_checks(link=link)[0]) == {"ledger_chain_position": False}


def test_a_record_audit_chain_at_another_position_fails_ledger_chain_position():
    record = make_record(audit_chain={"chain_id": CHAIN, "chain_position": 4})
    assert failing(row_checks(record)[0]) == {"ledger_chain_position": False}


def test_every_mismatched_column_is_listed_in_name_order():
    record = make_record()
    columns = make_columns(record, verdict="no", rulebook_hash="0" * 64, created_at="2020-01-01T00:00:00.000Z")
    checks, mismatched = row_checks(record, columns)
    assert failing(checks) == {"ledger_columns": False}
    assert mismatched == ["created_at", "rulebook_hash", "verdict"]
    columns = make_columns(record, receipt_hash="0" * 64, idempotency_key=None)
    assert row_checks(record, columns)[1] == ["idempotency_key", "receipt_hash"]


@pytest.mark.parametrize("row_hash", [None, 64, "0" * 64])
def test_a_row_hash_that_is_not_the_recomputed_one_fails_the_hash_and_the_signature(row_hash):
    record = make_record()
    columns = make_columns(record)
    columns["row_hash"] = row_hash
    assert failing(row_checks(record, columns)[0]) == {"ledger_row_hash": False}


def test_an_edited_column_fails_the_row_hash_and_with_it_recomputed_the_signature():
    record = make_record()
    columns = make_columns(record)
    columns["key_id"] = "api_key_forged"
    assert failing(row_checks(record, columns)[0]) == {"ledger_row_hash": False, "ledger_row_signature": False}
    columns["row_hash"] = decision_row_hash(columns)
    assert failing(row_checks(record, columns)[0]) == {"ledger_row_signature": False}


@pytest.mark.parametrize("signature, expected", [(None, False), ("ed25519:" + "A" * 86, False)])
def test_a_signed_records_row_needs_a_valid_row_signature(signature, expected):
    record = make_record()
    columns = make_columns(record)
    columns["row_signature"] = signature
    assert failing(row_checks(record, columns)[0]) == {"ledger_row_signature": expected}


def test_a_row_signed_by_an_untrusted_key_id_is_not_checkable():
    record = make_record(receipt_key_id="key_unknown", receipt_public_key_fingerprint=None)
    columns = make_columns(record)
    columns["row_signature"] = sign(row_signature_payload(columns["row_hash"], "key_unknown"))
    assert failing(row_checks(record, columns)[0]) == {"ledger_row_signature": None}


def test_the_row_signature_signs_the_records_key_id():
    record = make_record()
    columns = make_columns(record)
    columns["row_signature"] = sign(row_signature_payload(columns["row_hash"], "key_other"))
    assert failing(row_checks(record, columns)[0]) == {"ledger_row_signature": False}


def test_an_unsigned_records_row_has_no_signature_check_and_may_not_carry_one():
    record = make_record(receipt_key_id=None, receipt_public_key_fingerprint=None)
    columns = make_columns(record, key=None)
    checks, _ = row_checks(record, columns)
    assert checks == {**ALL_TRUE, "ledger_row_signature": None}
    columns["row_signature"] = sign(row_signature_payload(columns["row_hash"], KEY.key_id))
    assert failing(row_checks(record, columns)[0]) == {"ledger_row_signature": False}


# --------------------------------------------------------------------------- receipt_chain_failures


def receipt_rows(count: int, first: int = 1, previous: str | None = None) -> list[dict]:
    rows = []
    for sequence in range(first, first + count):
        row = {"receipt_id": f"out_{sequence}", "kind": "outcome", "decision_id": DECISION, "scope": SCOPE,
               "idempotency_key": None, "input_hash": "1" * 64, "receipt_hash": f"{sequence:064x}",
               "reported_at": "2026-05-21T00:00:07.000Z", "sequence": sequence, "previous_row_hash": previous}
        row["row_hash"] = previous = receipt_row_hash(row)
        rows.append(row)
    return rows


def receipt_head(rows: list[dict], count: int | None = None, key=KEY, head_hash: str | None = None) -> dict:
    count = len(rows) if count is None else count
    head_hash = head_hash if head_hash is not None else (rows[-1]["row_hash"] if rows else None)
    return {"decision_id": DECISION, "count": count, "head_row_hash": head_hash, "key_id": key.key_id,
            "signature": sign(receipt_head_payload(DECISION, count, head_hash, key.key_id), key)}


def chain_failures(rows, total=None, head=None, record=None, scope=SCOPE):
    total = len(rows) if total is None else total
    head = receipt_head(rows, total) if head is None else head
    return receipt_chain_failures(DECISION, scope, rows, total, head, make_record() if record is None else record,
                                  ANCHORS)


def reseal(rows: list[dict]) -> list[dict]:
    """Recompute every row hash after an edit, as an attacker can (the head stays signed)."""
    previous = rows[0]["previous_row_hash"]
    for row in rows:
        row["previous_row_hash"] = previous
        row["row_hash"] = previous = receipt_row_hash(row)
    return rows


def test_an_intact_receipt_chain_has_no_failure_with_either_signature_algorithm():
    assert chain_failures(receipt_rows(3)) == []
    rows = receipt_rows(2)
    assert chain_failures(rows, head=receipt_head(rows, key=HMAC_KEY), record=make_record(HMAC_KEY)) == []


def test_no_head_fails_only_when_there_are_receipt_rows():
    assert receipt_chain_failures(DECISION, SCOPE, [], 0, None, make_record(), ANCHORS) == []
    assert receipt_chain_failures(DECISION, SCOPE, receipt_rows(1), 1, None, make_record(), ANCHORS) == [
        "receipt_chain.head"]
    assert receipt_chain_failures(DECISION, SCOPE, [], 2, None, make_record(), ANCHORS) == ["receipt_chain.head"]


def test_an_empty_signed_head_over_no_rows_is_intact_and_a_count_without_rows_is_not():
    assert chain_failures([], head=receipt_head([], 0)) == []
    assert chain_failures([], total=0, head=receipt_head([], 1)) == ["receipt_chain.count", "receipt_chain.head"]


def test_a_window_of_the_newest_rows_is_intact_without_the_older_ones():
    rows = receipt_rows(5)
    assert chain_failures(rows[2:], total=5, head=receipt_head(rows)) == []


def test_a_deleted_middle_row_fails_count_sequence_and_link():
    rows = receipt_rows(3)
    del rows[1]
    assert chain_failures(rows, total=2, head=receipt_head(receipt_rows(3))) == [
        "receipt_chain.count", "receipt_chain.link", "receipt_chain.sequence"]


def test_a_deleted_first_row_of_a_full_window_fails_its_sequence_and_link():
    # All rows are in view (2 of 2) but the chain starts at 2; the head's count cannot match it.
    rows = receipt_rows(3)[1:]
    assert chain_failures(rows) == ["receipt_chain.head", "receipt_chain.sequence"]
    rows[0]["previous_row_hash"] = None
    assert chain_failures(reseal(rows)) == ["receipt_chain.head", "receipt_chain.link", "receipt_chain.sequence"]


@pytest.mark.parametrize("sequence", [None, "2", 2.0])
def test_a_sequence_that_is_not_an_integer_fails_the_sequence(sequence):
    rows = receipt_rows(3)
    rows[1]["sequence"] = sequence
    failures = chain_failures(reseal(rows))
    assert "receipt_chain.sequence" in failures and "receipt_chain.row_hash" not in failures
    # The row after it compares against a row without an integer sequence: still a sequence failure.
    assert chain_failures(reseal(rows[1:]), total=3, head=receipt_head(rows)) == ["receipt_chain.sequence"]


def test_the_rows_after_one_without_an_integer_sequence_are_still_checked():
    rows = receipt_rows(3)
    rows[1]["sequence"] = None
    rows[1]["row_hash"] = receipt_row_hash(rows[1])
    rows[2]["previous_row_hash"] = "0" * 64
    rows[2]["row_hash"] = receipt_row_hash(rows[2])
    assert chain_failures(rows, head=receipt_head(rows)) == ["receipt_chain.link", "receipt_chain.sequence"]


def test_a_non_integer_first_sequence_is_not_compared_with_1():
    rows = receipt_rows(2)
    rows[0]["sequence"] = "1"
    assert chain_failures(reseal(rows)) == ["receipt_chain.sequence"]


def test_sequences_must_rise_by_one():
    rows = receipt_rows(3)
    rows[2]["sequence"] = 4
    reseal(rows)
    assert chain_failures(rows, head=receipt_head(rows, 3)) == ["receipt_chain.head", "receipt_chain.sequence"]
    rows = receipt_rows(3)
    rows[1]["sequence"], rows[2]["sequence"] = 3, 2
    reseal(rows)
    assert chain_failures(rows, head=receipt_head(rows, 3)) == ["receipt_chain.head", "receipt_chain.sequence"]


@pytest.mark.parametrize("column, value", [
    ("receipt_hash", "0" * 64), ("reported_at", "2020-01-01T00:00:00.000Z"), ("kind", "execution"),
])
def test_an_edited_receipt_column_fails_its_row_hash(column, value):
    rows = receipt_rows(3)
    rows[1][column] = value
    assert chain_failures(rows) == ["receipt_chain.row_hash"]


def test_a_resealed_edit_breaks_the_link_of_the_next_row_or_the_head():
    rows = receipt_rows(3)
    rows[1]["row_hash"] = receipt_row_hash(dict(rows[1], kind="execution"))
    rows[1]["kind"] = "execution"
    assert chain_failures(rows, head=receipt_head(receipt_rows(3))) == ["receipt_chain.link"]
    rows = receipt_rows(2)
    rows[1]["kind"] = "execution"
    rows[1]["row_hash"] = receipt_row_hash(rows[1])
    assert chain_failures(rows, head=receipt_head(receipt_rows(2))) == ["receipt_chain.head"]


@pytest.mark.parametrize("previous", ["0" * 64, ""])
def test_the_first_row_states_no_previous_hash(previous):
    rows = receipt_rows(2)
    rows[0]["previous_row_hash"] = previous
    assert chain_failures(reseal(rows)) == ["receipt_chain.link"]


def test_the_first_row_of_a_window_states_its_previous_hash():
    rows = receipt_rows(4)
    window = rows[2:]
    window[0]["previous_row_hash"] = None
    assert chain_failures(reseal(window), total=4, head=receipt_head(window, 4)) == ["receipt_chain.link"]


@pytest.mark.parametrize("column, value", [("scope", "tenant_b"), ("decision_id", "dec_other")])
def test_a_row_of_another_scope_or_decision_fails_the_scope(column, value):
    rows = receipt_rows(2)
    rows[1][column] = value
    assert chain_failures(reseal(rows), head=receipt_head(rows)) == ["receipt_chain.scope"]


def test_the_head_names_the_newest_row_and_the_count():
    rows = receipt_rows(3)
    assert chain_failures(rows, head=receipt_head(rows, head_hash=rows[1]["row_hash"])) == ["receipt_chain.head"]
    assert chain_failures(rows, total=3, head=receipt_head(rows, 2)) == ["receipt_chain.count", "receipt_chain.head"]
    assert chain_failures(rows[:2], total=3, head=receipt_head(rows)) == ["receipt_chain.head"]


@pytest.mark.parametrize("change", [
    {"signature": None}, {"signature": "ed25519:" + "A" * 86}, {"key_id": "key_unknown"}, {"key_id": None},
    {"count": 3},
])
def test_a_signed_decisions_head_needs_a_valid_signature_of_a_trusted_key(change):
    rows = receipt_rows(2)
    head = dict(receipt_head(rows), **change)
    failures = chain_failures(rows, head=head)
    assert failures[-1] == "receipt_chain.signature"
    assert set(failures) - {"receipt_chain.count", "receipt_chain.head"} == {"receipt_chain.signature"}


def test_the_head_signature_covers_the_decision_count_and_head_hash():
    rows = receipt_rows(2)
    for payload in (receipt_head_payload("dec_other", 2, rows[-1]["row_hash"], KEY.key_id),
                    receipt_head_payload(DECISION, 3, rows[-1]["row_hash"], KEY.key_id),
                    receipt_head_payload(DECISION, 2, rows[0]["row_hash"], KEY.key_id),
                    receipt_head_payload(DECISION, 2, rows[-1]["row_hash"], "key_other")):
        head = dict(receipt_head(rows), signature=sign(payload))
        assert chain_failures(rows, head=head) == ["receipt_chain.signature"]


def test_an_unsigned_decisions_head_is_not_asked_for_a_signature():
    rows = receipt_rows(2)
    head = dict(receipt_head(rows), signature=None, key_id=None)
    assert chain_failures(rows, head=head, record=make_record(receipt_key_id=None)) == []
