"""The fast path of the receipt checks: canonical texts computed once for `packet_hash` and reused
(`_ReceiptTexts`, `_packet_text`), and `_fast_receipt_ok`, a sufficient condition for
`gate.receipts.verify_receipt_links` finding nothing wrong with a receipt."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from gate.packets.common import _LISTED, _canon, _is_hex64
from gate.protocol.canonical import canonical_text, key_order
from gate.receipts import (
    EXECUTION_HASH_MEMBERS,
    EXECUTION_STATUSES,
    OUTCOME_HASH_MEMBERS,
    OUTCOME_STATUSES,
    RECORD_LINKS,
    SYNC_DIRECTIONS,
    SYNC_HASH_MEMBERS,
    SYNC_STATUSES,
    action_binding_match,
)
from gate.strict_json import JsonValue
from gate.vocabulary import (
    DECISION_CRM_SYNC_VERSION,
    DECISION_EXECUTION_VERSION,
    DECISION_OUTCOME_VERSION,
    DECISION_PROTOCOL_VERSION,
)


class _ReceiptTexts:
    """Canonical text of each listed receipt, computed once for the packet hash and reused for
    the receipt hash (see `_fast_receipt_ok`)."""

    def __init__(self) -> None:
        self.by_part: dict[str, list[str] | None] = {}


def _packet_text(packet: Mapping[str, JsonValue], texts: _ReceiptTexts) -> str:
    """canonical_text(packet without packet_hash), composed member by member: canonical JSON
    of an object is its members' texts joined in key order, so the receipts' texts can be kept."""
    body = {k: v for k, v in packet.items() if k != "packet_hash"}
    pieces = []
    for key in key_order(body):
        value = body[key]
        if key in _LISTED and isinstance(value, list):
            items = [canonical_text(item) for item in value]
            texts.by_part[key] = items
            value_text = "[" + ",".join(items) + "]"
        else:
            value_text = canonical_text(value)
        pieces.append(canonical_text(key) + ":" + value_text)
    return "{" + ",".join(pieces) + "}"


_KINDS = {
    # part: (hash member, preimage members, id member, version member, version, value sets)
    "execution_receipts": ("execution_hash", frozenset(EXECUTION_HASH_MEMBERS), "execution_receipt_id",
                           "decision_execution_version", DECISION_EXECUTION_VERSION,
                           (("execution_status", frozenset(EXECUTION_STATUSES)),)),
    "outcome_records": ("outcome_hash", frozenset(OUTCOME_HASH_MEMBERS), "outcome_id",
                        "decision_outcome_version", DECISION_OUTCOME_VERSION,
                        (("outcome_status", frozenset(OUTCOME_STATUSES)),)),
    "crm_sync_records": ("sync_hash", frozenset(SYNC_HASH_MEMBERS), "sync_id",
                         "decision_crm_sync_version", DECISION_CRM_SYNC_VERSION,
                         (("sync_status", frozenset(SYNC_STATUSES)), ("sync_direction", frozenset(SYNC_DIRECTIONS)))),
}


_PLAIN_TYPES = frozenset({str, int, float, bool, list, dict})


class _BindingCache:
    """Per-packet cache of (action_binding_hash, action_binding_match) by the binding's text."""

    def __init__(self, record: Mapping[str, JsonValue]) -> None:
        self.record_binding = record.get("action_binding")
        self.record_binding_text = _canon(self.record_binding) if isinstance(self.record_binding, dict) else None
        self.items: dict[str, tuple[str, bool]] = {}

    def get(self, binding: dict[str, JsonValue]) -> tuple[str, bool] | None:
        # Keyed by (name, type, value) of flat text bindings (types keep True apart from 1);
        # anything else is keyed by its canonical text.
        key: Any = tuple((name, type(value), value) for name, value in binding.items())
        if not all(type(value) is str for value in binding.values()):
            key = _canon(binding)
            if key is None:
                return None
        cached = self.items.get(key)
        if cached is None:
            text = _canon(binding)
            if text is None:
                return None
            cached = (hashlib.sha256(text.encode("utf-8")).hexdigest(),
                      action_binding_match(self.record_binding, binding))
            self.items[key] = cached
        return cached


def _plain_form(receipt: dict[str, JsonValue], hash_member: str, members: frozenset[str]) -> bool:
    """Only the preimage members and the hash member, none of them null, "" or {} (those are
    compacted away: leave them to the receipts module)."""
    for name, value in receipt.items():
        if name not in members and name != hash_member:
            return False
        kind = type(value)
        if kind not in _PLAIN_TYPES or (kind is str and not value) or (kind is dict and not value):
            return False
    return True


def _kind_values(receipt: dict[str, JsonValue], version_member: str, version: str,
                 value_sets: tuple[tuple[str, frozenset[str]], ...]) -> bool:
    """The protocol and kind versions, and each status (or direction) one of its values."""
    if receipt.get("decision_protocol_version") != DECISION_PROTOCOL_VERSION or receipt.get(version_member) != version:
        return False
    for member, allowed in value_sets:
        value = receipt.get(member)
        if type(value) is not str or value not in allowed:
            return False
    return True


def _record_links_equal(receipt: dict[str, JsonValue], record: Mapping[str, JsonValue]) -> bool:
    """Every record-derived member equal in value and type to the record's (or both absent)."""
    for member, source in RECORD_LINKS:
        mine, theirs = receipt.get(member), record.get(source)
        if mine is None and theirs is None:
            continue
        if type(mine) is not str or type(theirs) is not str or mine != theirs:
            return False
    return True


def _binding_as_recorded(part: str, receipt: dict[str, JsonValue], bindings: _BindingCache) -> bool:
    """An execution's binding hash and match as the record's binding gives them; an outcome's
    binding the record's own."""
    binding = receipt.get("action_binding")
    if part == "execution_receipts":
        if type(binding) is not dict:
            return False
        cached = bindings.get(binding)
        return not (cached is None or receipt.get("action_binding_hash") != cached[0]
                    or receipt.get("action_binding_match") is not cached[1])
    if part == "outcome_records":
        return not (type(binding) is not dict or bindings.record_binding_text is None
                    or _canon(binding) != bindings.record_binding_text)
    return True


def _text_hash_matches(text: str, hash_member: str, stated: str) -> bool:
    """The sha256 of the receipt's canonical text with the hash member cut out is `stated`.

    What remains after the cut is the canonical text of the preimage (all other members, same
    order). The needle can only occur once, as the top-level member: quotes inside strings are
    escaped, and a second (nested) occurrence sends the receipt to the slow path. It is never
    the first member (decision_protocol_version, required by `_kind_values`, sorts before every
    hash member), so a comma precedes it and goes with it."""
    needle = '"' + hash_member + '":"' + stated + '"'
    if text.count(needle) != 1:
        return False
    at = text.index(needle)
    preimage = text[: at - 1] + text[at + len(needle):]
    return hmac.compare_digest(hashlib.sha256(preimage.encode("utf-8")).hexdigest(), stated)


def _fast_receipt_ok(part: str, receipt: Any, text: str | None, record: Mapping[str, JsonValue],
                     bindings: _BindingCache) -> bool:
    """A sufficient condition for `verify_receipt_links` finding nothing wrong with `receipt`.

    True only for a receipt in the exact form the gate builds (no member outside its preimage,
    no null/""/{} member, every record-derived member equal in value and type to the record's),
    whose hash, computed from the receipt's canonical text with the hash member cut out, equals
    the stated one. Anything else goes to `verify_receipt_links`, which names the failures; so
    this only saves time and can never accept what the receipts module rejects
    (tests/packets/test_packet_receipts.py checks the implication on mutated receipts).
    """
    if type(receipt) is not dict or text is None:
        return False
    hash_member, members, _, version_member, version, value_sets = _KINDS[part]
    stated = receipt.get(hash_member)
    return (_is_hex64(stated)
            and _plain_form(receipt, hash_member, members)
            and _kind_values(receipt, version_member, version, value_sets)
            and _record_links_equal(receipt, record)
            and receipt.get("decision_found") is True
            and _binding_as_recorded(part, receipt, bindings)
            and _text_hash_matches(text, hash_member, stated))
