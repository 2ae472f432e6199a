"""Spliced canonical text (`canonical_runs` + `canonical_with`, `canonical_spliced`): an object
written in parts, or with a member's text written elsewhere, is exactly `canonical_text` of the
whole (issue 53/3: a `decision.created` event carries its record's canonical text, the record's
envelope written on the decide's request thread and spliced on the writer's)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.events.cloudevent import cloud_event, event_text
from gate.protocol.canonical import (
    canonical_runs,
    canonical_spliced,
    canonical_text,
    canonical_with,
    splice_mark,
)
from gate.protocol.decision_record import PART_MEMBERS, DecisionRecord

# Keys where collation order, code-point order and array-index order all differ.
KEYS = st.one_of(st.sampled_from(["a", "B", "_x", "a_b", "a1", "0", "10", "2", "é", "Z", "-", "ab", "data"]),
                 st.text(max_size=6))
VALUES = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8)
                      | st.sampled_from([splice_mark("x"), 'q"' + splice_mark("k")]),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
                      max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=8), st.dictionaries(KEYS, VALUES, max_size=4))
def test_an_object_written_in_runs_and_completed_is_its_canonical_text(value, later):
    later = {key: item for key, item in later.items() if key not in value}
    runs = canonical_runs(value, later)
    assert canonical_with(runs, {key: canonical_text(item) for key, item in later.items()}) == \
        canonical_text({**value, **later})
    # some of the later members only, in any order: still the text of what is there
    some = dict(list(later.items())[::2])
    assert canonical_with(runs, {key: canonical_text(item) for key, item in some.items()}) == \
        canonical_text({**value, **some})


def test_a_member_the_runs_have_no_place_for_is_refused_not_dropped():
    runs = canonical_runs({"a": 1}, ["b"])
    with pytest.raises(ValueError, match="no place"):
        canonical_with(runs, {"b": "2", "c": "3"})


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=6), VALUES)
def test_a_spliced_text_is_the_canonical_text_or_none(value, member):
    marked = {**value, "m": splice_mark("m")}
    text = canonical_spliced(marked, {"m": canonical_text(member)})
    if text is not None:
        assert text == canonical_text({**value, "m": member})
    else:  # the mark occurs elsewhere too (a value holding it): never a guess
        assert canonical_text(marked).count('"gate.canonical.splice:') > 1


def test_a_decision_created_event_spliced_is_byte_for_byte_the_event_written_whole():
    record = _sealed_record()
    envelope = {key: value for key, value in record.items() if key not in PART_MEMBERS}
    built = DecisionRecord.built(envelope)
    assert built.canonical_text() == canonical_text(envelope)  # the runs are written here, once
    sealed = built.with_audit_chain({"chain_id": "c", "chain_position": 7, "link_hash": "f" * 64}, None)
    assert sealed.canonical_text() == canonical_text(sealed.as_dict())
    data = {"decision_id": sealed.decision_id, "record_hash": sealed.record_hash, "receipt_hash": sealed.receipt_hash,
            "audit_chain": sealed["audit_chain"], "record": sealed.as_dict()}
    event = cloud_event("tenant_a", 12, "decision.created", sealed.decision_id, sealed.created_at, data)
    assert event_text(event, {"record": sealed.canonical_text()}) == canonical_text(event)
    # a subject holding the very mark: the event is written whole, the same text
    odd = {**event, "subject": splice_mark("record")}
    assert event_text(odd, {"record": sealed.canonical_text()}) == canonical_text(odd)


def _sealed_record() -> dict:
    from gate.protocol.records import seal_record

    return seal_record({"decision_id": "dec_1", "created_at": "2026-11-27T00:00:00.000Z", "verdict": "yes",
                        "status": "decided", "action": "refund", "policy_id": "p", "policy_version": "1",
                        "evidence_manifest": {"codes": ["A"], "sources": []}, "Upper": 1, "10": [1, {"é": None}]})
