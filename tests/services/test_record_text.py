"""A record's stored text, encoded before the chain head lock and completed under it
(`gate.services.pipeline.RecordText`), is exactly the text `json.dumps` writes of the whole record.

Unit cases for every way a record can change between the two moments, a property over generated
records, and the real decide over HTTP on both ledgers: the stored text, the answer's bytes and a
fresh compact encoding of the stored value are one text, with and without a confidence block.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import select

from gate.ledger.codec import decode
from gate.ledger.tables import decisions
from gate.services.pipeline import RecordText


def dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_members_added_after_are_spliced_before_the_closing_brace():
    record = {"decision_id": "dec_1", "verdict": "yes", "nested": {"a": [1, 2.5, None, True]}}
    text = RecordText(record)
    record["decision_confidence"] = {"score": 0.875, "level": "medium"}
    record["audit_chain"] = {"chain_position": 7, "note": "naïve \u2028 \x01 \"quoted\" \\"}
    record["audit_chain_signature"] = "c2lnbmF0dXJl"
    assert text.of(record) == dumps(record)


def test_nothing_added_is_the_text_as_encoded():
    record = {"decision_id": "dec_1"}
    assert RecordText(record).of(record) == dumps(record)


@pytest.mark.parametrize("change", ["replaced", "removed", "moved", "non_text_key", "nested_added"])
def test_any_other_change_encodes_the_whole_record_again(change):
    record = {"decision_id": "dec_1", "verdict": "yes", "evaluation": {"checks": []}}
    text = RecordText(record)
    if change == "replaced":
        record["verdict"] = "no"
    elif change == "removed":
        del record["verdict"]
    elif change == "moved":  # taken out and put back: now the last member
        record["verdict"] = record.pop("verdict")
    elif change == "non_text_key":
        record[7] = "seven"  # json.dumps writes the key as "7"
    else:
        record["audit_chain"] = {}
        del record["evaluation"]
    assert text.of(record) == dumps(record)


def test_an_empty_record_is_encoded_whole():
    record: dict = {}
    text = RecordText(record)
    record["audit_chain"] = {"chain_position": 1}
    assert text.of(record) == dumps(record)


_values = st.recursive(
    # finite numbers: a record holds no other (its canonical text refuses them)
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(before=st.dictionaries(st.text(), _values, max_size=6), added=st.dictionaries(st.text(), _values, max_size=4))
def test_any_record_and_any_added_members_read_as_json_dumps(before, added):
    record = dict(before)
    text = RecordText(record)
    record.update(added)  # a key already there keeps its place with a new value: encoded whole
    assert text.of(record) == dumps(record)


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
    from gate.services.pipeline import _encode_text

    assert _encode_text(value) == dumps(value)


@given(value=_values)
def test_any_value_the_fast_encoder_writes_is_json_dumps(value):
    from gate.services.pipeline import _encode_text

    assert _encode_text(value) == dumps(value)
