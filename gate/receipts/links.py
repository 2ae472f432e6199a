"""Packet verification step 3: receipts and records checked against their Decision Record.

`verify_receipt_links(record, executions, outcomes, syncs)` returns the list of failures as
values (`LinkFailure`), [] when every receipt is intact and linked. It does not verify the
record itself (step 2 does); it trusts the record's stated `decision_id`, `record_hash`,
`receipt_hash`, `verdict`, `action`, policy members and `action_binding`.

Checks, per receipt, each named as in `LinkFailure.name` (``execution_receipts[0].execution_hash``):

* ``shape``: the receipt is a JSON object (nothing else is checked when it is not);
* ``versions``: `decision_protocol_version` and the kind's version label are ours;
* ``<status member>``: the status (and `sync_direction`) is in its closed value set;
* ``<hash member>``: the stated hash equals the recomputed one (`gate.receipts.hashing`);
* ``unhashed_members``: the receipt has no member outside its hash preimage and the hash
  member (an unhashed member could be changed without detection, so it is refused);
* ``decision_id``, ``decision_record_hash``, ``decision_receipt_hash``,
  ``decision_verdict``, ``decision_action``, ``policy_id``, ``policy_version``,
  ``policy_bundle_hash``: equal to the record's `decision_id`, `record_hash`,
  `receipt_hash`, `verdict`, `action`, `policy_id`, `policy_version`,
  `policy_bundle_hash` (a member absent on both sides is equal);
* ``decision_found``: true;
* execution receipts: ``action_binding_hash`` = sha256 of the receipt's `action_binding`
  ({} when absent) and ``action_binding_match`` = the match rule recomputed from the record's
  and the receipt's bindings (`gate.receipts.binding`);
* Outcome Records: ``action_binding`` equals the record's; ``execution_link``: a receipt with
  `execution_receipt_id` / `execution_hash` (`OUTCOME_LINK_MEMBERS`, stated beside the hash)
  states both, and they name one of the given execution receipts and its `execution_hash`.
  Those two members are the only ones outside a hash preimage that a receipt may carry. A link
  to a receipt that is not given fails (fail closed: what cannot be checked is not proven); a
  packet whose truncated `execution_receipts` lacks it is re-exported with a larger limit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from gate.protocol.canonical import CanonicalJSONError, canonical_text, sha256_hex
from gate.receipts.binding import action_binding_match
from gate.receipts.hashing import (
    EXECUTION_HASH_MEMBERS,
    OUTCOME_HASH_MEMBERS,
    OUTCOME_LINK_MEMBERS,
    RECORD_LINKS,
    SYNC_HASH_MEMBERS,
    compact,
    execution_hash_of,
    outcome_hash_of,
    sync_hash_of,
)
from gate.receipts.values import (
    EXECUTION_STATUSES,
    OUTCOME_STATUSES,
    SYNC_DIRECTIONS,
    SYNC_STATUSES,
)
from gate.strict_json import JsonValue
from gate.vocabulary import (
    DECISION_CRM_SYNC_VERSION,
    DECISION_EXECUTION_VERSION,
    DECISION_OUTCOME_VERSION,
    DECISION_PROTOCOL_VERSION,
)

__all__ = ["LinkFailure", "verify_receipt_links"]


class LinkFailureJSON(TypedDict):
    """A `LinkFailure` as JSON: its name, where it is, the check and the two values."""

    name: str
    artifact: str
    index: int
    check: str
    expected: object
    actual: object


@dataclass(frozen=True, slots=True)
class LinkFailure:
    """One failed check: where (`artifact`, `index`), what (`check`), and the two values."""

    artifact: str  # "execution_receipts", "outcome_records" or "crm_syncs"
    index: int
    check: str
    expected: Any
    actual: Any

    @property
    def name(self) -> str:
        return f"{self.artifact}[{self.index}].{self.check}"

    def to_dict(self) -> LinkFailureJSON:
        return {"name": self.name, "artifact": self.artifact, "index": self.index,
                "check": self.check, "expected": self.expected, "actual": self.actual}

    def __str__(self) -> str:
        return f"{self.name}: expected {self.expected!r}, got {self.actual!r}"


@dataclass(frozen=True, slots=True)
class _Kind:
    artifact: str
    version_member: str
    version: str
    hash_member: str
    members: tuple[str, ...]
    hash_of: Callable[[Mapping[str, JsonValue]], str]
    value_sets: tuple[tuple[str, tuple[str, ...]], ...]
    beside_hash: tuple[str, ...] = ()  # members stated outside the preimage, checked on their own


_EXECUTION = _Kind("execution_receipts", "decision_execution_version", DECISION_EXECUTION_VERSION,
                   "execution_hash", EXECUTION_HASH_MEMBERS, execution_hash_of,
                   (("execution_status", EXECUTION_STATUSES),))
_OUTCOME = _Kind("outcome_records", "decision_outcome_version", DECISION_OUTCOME_VERSION,
                 "outcome_hash", OUTCOME_HASH_MEMBERS, outcome_hash_of,
                 (("outcome_status", OUTCOME_STATUSES),), OUTCOME_LINK_MEMBERS)
_SYNC = _Kind("crm_syncs", "decision_crm_sync_version", DECISION_CRM_SYNC_VERSION,
              "sync_hash", SYNC_HASH_MEMBERS, sync_hash_of,
              (("sync_status", SYNC_STATUSES), ("sync_direction", SYNC_DIRECTIONS)))


def _canon(value: Any) -> str | None:
    """Canonical text of a compacted value (absent, null, "" and {} are all None)."""
    value = compact({"v": value}).get("v")
    if value is None:
        return None
    try:
        return canonical_text(value)
    except (CanonicalJSONError, TypeError, ValueError, RecursionError):
        return "<not JSON>"


def _safe_hash(fn: Callable[..., str], *args: Any) -> str | None:
    try:
        return fn(*args)
    except (CanonicalJSONError, TypeError, ValueError, RecursionError):
        return None


def _check_one(kind: _Kind, index: int, receipt: Any, record: Mapping[str, JsonValue]) -> list[LinkFailure]:
    failures: list[LinkFailure] = []

    def fail(check: str, expected: Any, actual: Any) -> None:
        failures.append(LinkFailure(kind.artifact, index, check, expected, actual))

    if not isinstance(receipt, Mapping):
        fail("shape", "object", type(receipt).__name__)
        return failures
    versions = {"decision_protocol_version": DECISION_PROTOCOL_VERSION, kind.version_member: kind.version}
    stated = {name: receipt.get(name) for name in versions}
    if stated != versions:
        fail("versions", versions, stated)
    for member, allowed in kind.value_sets:
        if receipt.get(member) not in allowed:
            fail(member, list(allowed), receipt.get(member))
    recomputed = _safe_hash(kind.hash_of, receipt)
    if recomputed is None or receipt.get(kind.hash_member) != recomputed:
        fail(kind.hash_member, recomputed, receipt.get(kind.hash_member))
    extra = sorted(set(receipt) - set(kind.members) - {kind.hash_member} - set(kind.beside_hash))
    if extra:
        fail("unhashed_members", [], extra)
    for member, source in RECORD_LINKS:
        if _canon(receipt.get(member)) != _canon(record.get(source)):
            fail(member, record.get(source), receipt.get(member))
    if receipt.get("decision_found") is not True:
        fail("decision_found", True, receipt.get("decision_found"))

    binding = receipt.get("action_binding")
    if kind is _EXECUTION:
        binding_hash = _safe_hash(sha256_hex, {} if binding is None else binding)
        if binding_hash is None or receipt.get("action_binding_hash") != binding_hash:
            fail("action_binding_hash", binding_hash, receipt.get("action_binding_hash"))
        match = action_binding_match(record.get("action_binding"), {} if binding is None else binding)
        if receipt.get("action_binding_match") is not match:
            fail("action_binding_match", match, receipt.get("action_binding_match"))
    elif kind is _OUTCOME and _canon(binding) != _canon(record.get("action_binding")):
        fail("action_binding", record.get("action_binding"), binding)
    return failures


def _executions_by_id(executions: Iterable[Any]) -> dict[str, Mapping[str, JsonValue]]:
    return {receipt["execution_receipt_id"]: receipt for receipt in executions
            if isinstance(receipt, Mapping) and isinstance(receipt.get("execution_receipt_id"), str)}


def _stated_link(outcome: Any) -> dict[str, JsonValue] | None:
    """The outcome's link members as stated (None: no link member at all)."""
    if not isinstance(outcome, Mapping) or not any(name in outcome for name in OUTCOME_LINK_MEMBERS):
        return None
    return {name: outcome.get(name) for name in OUTCOME_LINK_MEMBERS}


def _link_failure(index: int, outcome: Any, executions: Mapping[str, Mapping[str, JsonValue]]) -> LinkFailure | None:
    """`outcome_records[index].execution_link`, or None when the link holds or is absent."""
    link = _stated_link(outcome)
    if link is None:
        return None
    receipt_id = link["execution_receipt_id"]
    named = executions.get(receipt_id) if isinstance(receipt_id, str) else None
    if named is None:
        return LinkFailure(_OUTCOME.artifact, index, "execution_link",
                           "an execution receipt of this decision among the execution receipts given "
                           "(a packet: re-export with an execution_limit that includes it)", link)
    expected = {"execution_receipt_id": receipt_id, "execution_hash": named.get("execution_hash")}
    if link != expected:
        return LinkFailure(_OUTCOME.artifact, index, "execution_link", expected, link)
    return None


def verify_receipt_links(
    record: Mapping[str, JsonValue],
    executions: Iterable[Any] = (),
    outcomes: Iterable[Any] = (),
    syncs: Iterable[Any] = (),
    *,
    linked_executions: Iterable[Any] | None = None,
) -> list[LinkFailure]:
    """Every failed link check of the receipts against `record`, in input order; [] when none.

    Outcome links are resolved among `linked_executions` (default: `executions`)."""
    if not isinstance(record, Mapping):
        raise TypeError("record must be a Decision Record object")
    executions = list(executions or ())
    known = _executions_by_id(executions if linked_executions is None else linked_executions)
    failures: list[LinkFailure] = []
    for kind, items in ((_EXECUTION, executions), (_OUTCOME, outcomes), (_SYNC, syncs)):
        for index, receipt in enumerate(items or ()):
            failures.extend(_check_one(kind, index, receipt, record))
            if kind is _OUTCOME and (failure := _link_failure(index, receipt, known)):
                failures.append(failure)
    return failures
