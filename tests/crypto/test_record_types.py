"""`gate.protocol.types`: the records the builder makes have exactly the members `RecordMembers`
names, and the verifier's closed member set is the type's."""

from __future__ import annotations

import pytest
from crypto_support import default_evaluation, make_record, needs_input_evaluation

from gate.protocol.types import DECISION_RECORD_MEMBERS, DECISION_RECORD_REQUIRED
from gate.verify import RULEBOOK_RECORD_ALLOWED, RULEBOOK_RECORD_REQUIRED


@pytest.mark.parametrize("options", [
    {}, {"signer": "hmac"}, {"signer": None}, {"adapter": True}, {"attest": False},
    {"idempotency_key": None}, {"evaluation": default_evaluation()}, {"evaluation": needs_input_evaluation()},
])
def test_a_built_record_has_the_members_of_its_type(options):
    record = make_record(**options)
    assert DECISION_RECORD_REQUIRED <= set(record) <= DECISION_RECORD_MEMBERS


def test_the_verifier_closes_a_rulebook_record_over_the_types_members():
    assert RULEBOOK_RECORD_ALLOWED == DECISION_RECORD_MEMBERS
    assert DECISION_RECORD_REQUIRED | {"rulebook_registry"} == RULEBOOK_RECORD_REQUIRED
