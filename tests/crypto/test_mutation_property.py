"""Property: any single-character edit of any string value anywhere in a built record is caught."""

from __future__ import annotations

import copy

from crypto_support import (
    HMAC_KEY_ID,
    HMAC_SECRET,
    key_a,
    make_record,
    needs_input_evaluation,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.verify import TrustAnchors, verify_record
from tests.strategies import one_character_edit

ANCHORS = TrustAnchors.from_registry_entries(
    [{"key_id": key_a().key_id, "public_key": key_a().public_key_pem}]
) + TrustAnchors.from_hmac_secret(HMAC_SECRET, key_id=HMAC_KEY_ID)

RECORDS = {
    "ed25519": make_record(),
    "hmac": make_record(signer="hmac"),
    "adapter": make_record(adapter=True),
    "needs_input": make_record(evaluation=needs_input_evaluation()),
    "unsigned_attestation": make_record(signer="hmac", attest=False),
}


def _string_paths(value, path=()):
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _string_paths(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _string_paths(item, path + (index,))


TARGETS = [(name, path) for name, record in RECORDS.items() for path in _string_paths(record)]


def _get(record, path):
    for step in path:
        record = record[step]
    return record


def _set(record, path, value):
    for step in path[:-1]:
        record = record[step]
    record[path[-1]] = value


def test_baseline_records_verify():
    assert len(TARGETS) > 150
    for name, record in RECORDS.items():
        result = verify_record(record, anchors=ANCHORS)
        assert result.verified is True, (name, result.failed_checks)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_single_character_mutation_is_detected(data):
    name, path = data.draw(st.sampled_from(TARGETS), label="target")
    record = copy.deepcopy(RECORDS[name])
    text = _get(record, path)
    mutated = one_character_edit(data, text)
    assert mutated != text
    _set(record, path, mutated)
    result = verify_record(record, anchors=ANCHORS)
    assert result.verified is False, (name, path, text, mutated)
    assert result.failed_checks, (name, path)
