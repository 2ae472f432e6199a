"""How a receipt is bound to its Decision Record: record references and the action binding.

Record references (checked by `check_record_references` before anything is built):
a supplied `decision_id`, `decision_record_hash` and `decision_receipt_hash` — and, for CRM
sync, `decision_verdict`, `decision_action`, `policy_id`, `policy_version` — must equal the
stored record's `decision_id`, `record_hash`, `receipt_hash`, `verdict`, `action`,
`policy_id`, `policy_version`. Otherwise the write is refused with the endpoint's
`*_RECORD_MISMATCH` code and `fields`, `expected`, `supplied` details.

SECURITY: a receipt is proof that a caller acted on *this* record; one that names another
record (or another verdict) must never be stored, or a packet would prove something false.

Action binding (`action_binding_match`, docs/receipts.md "Action binding"):
let R be the record's `action_binding` and S the binding of the receipt (the supplied
`action_binding`, else the one derived from the receipt's own fields). The compared members are

    K = (members of R that S also has) ∪ (members of R among ANCHOR_MEMBERS)

and the binding matches when K is not empty and every member of K is present in S with a value
equal to R's (canonical JSON equality). So: no member the two bindings both state may
disagree; the anchor members the record binds (what action, on which system, which object,
which mutation) must be stated and equal; members only the record has outside the anchors
(actor, subject, amount, currency, system, resource) are compared only when stated; members
only S has are ignored; a record with nothing to compare never matches (no proof, no match).
The rule depends only on (R, S), so a verifier recomputes it from the stored receipt.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.errors import GateError
from gate.protocol.canonical import CanonicalJSONError, canonical_text
from gate.strict_json import JsonValue

__all__ = [
    "ANCHOR_MEMBERS",
    "DERIVED_BINDING_SOURCES",
    "RECORD_REFERENCES",
    "action_binding_match",
    "check_record_references",
    "derived_action_binding",
]

ANCHOR_MEMBERS = ("proposed_action", "target_system", "target_object_id", "mutation")

# binding member ← receipt field, for a binding derived from the receipt's own fields.
DERIVED_BINDING_SOURCES = (
    ("proposed_action", "action_taken"),
    ("target_system", "target_system"),
    ("target_object_id", "target_object_id"),
    ("mutation", "mutation"),
)

# request member → record member it must equal when supplied.
RECORD_REFERENCES = (
    ("decision_id", "decision_id"),
    ("decision_record_hash", "record_hash"),
    ("decision_receipt_hash", "receipt_hash"),
)
CRM_RECORD_REFERENCES = RECORD_REFERENCES + (
    ("decision_verdict", "verdict"),
    ("decision_action", "action"),
    ("policy_id", "policy_id"),
    ("policy_version", "policy_version"),
)


def derived_action_binding(fields: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """`{proposed_action ← action_taken, target_system, target_object_id, mutation}`, with only
    the members whose field is present (non-empty); {} when none is."""
    return {member: fields[source] for member, source in DERIVED_BINDING_SOURCES
            if fields.get(source) not in (None, "")}


def _same(a: Any, b: Any) -> bool:
    try:
        return canonical_text(a) == canonical_text(b)
    except (CanonicalJSONError, TypeError, ValueError, RecursionError):
        return False


def action_binding_match(record_binding: Any, binding: Any) -> bool:
    """The match rule of the module docstring; False when either side is not an object."""
    if not isinstance(record_binding, Mapping) or not isinstance(binding, Mapping):
        return False
    compared = {name for name in record_binding if name in binding or name in ANCHOR_MEMBERS}
    if not compared:
        return False
    return all(name in binding and _same(binding[name], record_binding[name]) for name in compared)


def check_record_references(fields: Mapping[str, JsonValue], record: Mapping[str, JsonValue], *,
                            code: str, crm: bool = False) -> None:
    """Raise GateError(`code`) when a supplied reference differs from the record.

    Details: `fields` (the differing request members, in a fixed order), `expected` (record
    values by request member) and `supplied` (request values by request member).
    """
    pairs = CRM_RECORD_REFERENCES if crm else RECORD_REFERENCES
    differing = [(name, source) for name, source in pairs
                 if fields.get(name) is not None and fields[name] != record.get(source)]
    if differing:
        names = [name for name, _ in differing]
        raise GateError(
            code,
            f"the request does not match the stored decision record: {', '.join(names)}",
            fields=names,
            expected={name: record.get(source) for name, source in differing},
            supplied={name: fields[name] for name, _ in differing},
        )
