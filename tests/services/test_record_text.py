"""A record's stored text is derived from the record as a value
(`gate.protocol.decision_record.DecisionRecord`): the envelope's text, encoded once when built, with
each signed part's members written before its closing brace, is exactly the text `json.dumps`
writes of the whole record.

Unit cases for how a record gains its parts (and the ways it refuses to), a property over generated
records, and the real decide over HTTP on both ledgers: the stored text, the answer's bytes and a
fresh compact encoding of the stored value are one text, with and without a confidence block.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

from gate.keys.signing import HmacKey, HmacReceiptSigner
from gate.ledger.codec import decode
from gate.ledger.tables import decisions
from gate.protocol.decision_record import DecisionRecord, json_text

SIGNER = HmacReceiptSigner(HmacKey("hmac-test", b"a secret for the record text tests"))
ARM = {"release_arm_version": "release_arm_v1", "rulebook_id": "rb", "version": "2", "arm": "canary",
       "release_seq": 3, "subject_hash": None}
CONFIDENCE = {"score": 0.875, "level": "medium", "confidence_hash": "ab" * 32}
CHAIN = {"chain_position": 7, "note": "naïve \u2028 \x01 \"quoted\" \\"}


def dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_parts_are_written_before_the_closing_brace_in_the_order_added():
    envelope = {"decision_id": "dec_1", "verdict": "yes", "nested": {"a": [1, 2.5, None, True]}}
    built = DecisionRecord.built(envelope)
    record = built.with_release_arm(ARM, SIGNER).with_confidence(CONFIDENCE, SIGNER).with_audit_chain(CHAIN, SIGNER)
    assert record.text == dumps(record.as_dict())
    assert list(record) == ["decision_id", "verdict", "nested", "release_arm", "release_arm_signature",
                            "decision_confidence", "confidence_hash", "confidence_signature",
                            "audit_chain", "audit_chain_signature"]
    assert record["release_arm"]["release_arm_hash"] and "subject_hash" not in record["release_arm"]
    # A value: each step answered a new record and changed none before it.
    assert built.text == dumps(envelope) and list(built) == list(envelope) and len(built) == 3
    assert "audit_chain" not in built and "audit_chain" in record


def test_without_a_signer_a_part_has_no_signature_member():
    record = DecisionRecord.built({"decision_id": "dec_1"}).with_audit_chain(CHAIN, None)
    assert list(record) == ["decision_id", "audit_chain"]
    assert record.text == dumps(record.as_dict())


def test_a_record_just_built_is_its_envelope_as_json_dumps_writes_it():
    envelope = {"decision_id": "dec_1", "amount": 1e-07}
    assert DecisionRecord.built(envelope).text == dumps(envelope)


@pytest.mark.parametrize("member", ["audit_chain", "release_arm_signature", "decision_confidence", "confidence_hash"])
def test_an_envelope_that_holds_a_part_is_refused(member):
    with pytest.raises(ValueError, match="holds no signed part"):
        DecisionRecord.built({"decision_id": "dec_1", member: {}})


def test_a_part_is_added_once():
    record = DecisionRecord.built({"decision_id": "dec_1"}).with_audit_chain(CHAIN, SIGNER)
    with pytest.raises(ValueError, match="added once"):
        record.with_audit_chain(CHAIN, SIGNER)
    stored = DecisionRecord.stored(record.as_dict(), record.text)
    with pytest.raises(ValueError, match="added once"):
        stored.with_audit_chain(CHAIN, SIGNER)


def test_an_empty_envelope_gains_its_part_whole():
    record = DecisionRecord(  # not reachable through `built` (a record has a decision id), but exact
        {}, {}, "{}")._with({"audit_chain": {"chain_position": 1}})
    assert record.text == dumps({"audit_chain": {"chain_position": 1}})


_values = st.recursive(
    # finite numbers: a record holds no other (its canonical text refuses them)
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(envelope=st.dictionaries(st.text(), _values, max_size=6), arm=st.dictionaries(st.text(), _values, max_size=3),
       chain=st.dictionaries(st.text(), _values, max_size=3))
def test_any_record_with_any_parts_reads_as_json_dumps(envelope, arm, chain):
    envelope = {k: v for k, v in envelope.items() if k not in ("release_arm", "release_arm_signature",
                                                               "audit_chain", "audit_chain_signature",
                                                               "decision_confidence", "confidence_hash",
                                                               "confidence_signature")}
    envelope["decision_id"] = "dec_1"
    record = DecisionRecord.built(envelope).with_release_arm(arm, SIGNER).with_audit_chain(chain, None)
    assert record.text == dumps(record.as_dict())
    assert dict(record) == record.as_dict()


pytestmark_backend = pytest.mark.usefixtures("backend")


def _stored_text(app, decision_id: str) -> str:
    with app.extensions["gate"].ledger.engine.connect() as connection:
        stored = connection.execute(select(decisions.c.record_json)
                                    .where(decisions.c.decision_id == decision_id)).scalar_one()
    return decode(stored)


@pytestmark_backend
def test_the_stored_text_is_the_answer_and_json_dumps_of_the_record(app, client, api_key, sample_request):
    headers = {"x-api-key": api_key}
    first = client.post("/api/decide", json=sample_request, headers=headers)
    assert first.status_code == 200
    outcome = client.post(f"/api/decision/{first.json['decision_id']}/outcome",
                          json={"outcome_status": "succeeded", "action_executed": True,
                                "decision_record_hash": first.json["record_hash"]}, headers=headers)
    assert outcome.status_code == 201
    second = client.post("/api/decide", json=sample_request, headers=headers)
    assert second.status_code == 200
    assert "decision_confidence" in second.json and "confidence_signature" in second.json
    for answer in (first, second):
        stored = _stored_text(app, answer.json["decision_id"])
        assert answer.get_data(as_text=True) == stored
        assert stored == dumps(json.loads(stored))
        assert list(json.loads(stored))[-2:] == ["audit_chain", "audit_chain_signature"]
    verified = client.post("/api/decision/verify", json={"record": second.json})
    assert verified.json["verified"] is True, verified.json


@pytest.mark.parametrize("value", [
    {"small": [1e-05, 1.234e-05, 1e-07, -5e-324, 0.0001, 0.000123], "large": [1e16, 1.5e300, 1e22, 100.0, -0.0]},
    {"int": [2**63 - 1, 2**63, 2**64, -(2**63) - 1, 2**53 + 1]},  # orjson refuses beyond 64 bits
    {1: "a key that is not text", "b": None},  # json.dumps writes the key as "1"
    {"lone": "x\ud800y"},  # orjson refuses a lone surrogate; json.dumps writes it
    {"text": "".join(chr(c) for c in range(0x80)) + "\u2028\u2029\ufeff😀é\x7f"},
    {"deep": json.loads("[" * 300 + "]" * 300)},  # deeper than orjson writes
    {"a string with 1e-7 in it": "and 0.00001 too, and e-notation: 3e-5"},
])
def test_the_fast_encoder_writes_what_json_dumps_writes(value):
    assert json_text(value) == dumps(value)


@given(value=_values)
def test_any_value_the_fast_encoder_writes_is_json_dumps(value):
    assert json_text(value) == dumps(value)
