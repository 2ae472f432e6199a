"""Record checks that need no key: the integrity block, URLs, policy identity and the record's
`audit_chain` member; and the comparison helpers every check uses (the constant-time digest
compare and the guarded hash computation live with the detached signatures, gate.keys.detached)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gate.chain.links import AUDIT_CHAIN_MEMBERS
from gate.chain.links import leaf_hash as chain_leaf_hash
from gate.keys.detached import _digest_equal, _safe
from gate.protocol.canonical import CanonicalJSONError, canonical_bytes
from gate.protocol.records import decision_urls
from gate.strict_json import JsonValue
from gate.verify.result import CheckName, CheckResult, CheckValue
from gate.vocabulary import CANONICALIZATION, CHAIN_ENTRY_TYPE_DECISION, HASH_ALGORITHM

# --------------------------------------------------------------------------- helpers


def _canon_equal(a: Any, b: Any) -> bool:
    """Equal as canonical JSON (so 1 == 1.0, key order irrelevant, True != 1)."""
    try:
        return canonical_bytes(a) == canonical_bytes(b)
    except (CanonicalJSONError, TypeError, ValueError, RecursionError):
        return False


def digest_check(name: CheckName, expected: Any, actual: Any) -> CheckResult:
    """The check `name`: a recomputed digest equal to the stated one, with both reported."""
    return CheckResult(checks={name: _digest_equal(expected, actual)},
                       expected={name: expected}, actual={name: actual})


# --------------------------------------------------------------------------- individual checks


_INTEGRITY_MIRRORED = (
    "decision_protocol_version",
    "input_hash",
    "output_hash",
    "policy_hash",
    "policy_bundle_hash",
    "record_hash",
    "receipt_hash",
    "replay_url",
    "verify_url",
)
_INTEGRITY_SIGNATURE_MIRRORED = {
    "algorithm": "receipt_signature_algorithm",
    "key_id": "receipt_key_id",
    "public_key_fingerprint": "receipt_public_key_fingerprint",
}


def check_integrity_block(record: Mapping[str, JsonValue]) -> CheckValue:
    """`integrity` mirrors the top level exactly: the members `seal_record` writes, no others."""
    block = record.get("integrity")
    if block is None:
        return None
    if not isinstance(block, Mapping):
        return False
    fixed = {"canonicalization": CANONICALIZATION, "hash_algorithm": HASH_ALGORITHM}
    required = set(fixed) | {name for name in _INTEGRITY_MIRRORED if name != "policy_bundle_hash"}
    if record.get("policy_bundle_hash") not in (None, ""):
        required.add("policy_bundle_hash")
    signed = "receipt_signature" in record
    if signed:
        required.add("signature")
    allowed = required | {"decision_protocol_version"}
    if not required <= set(block) <= allowed:
        return False
    for name, value in block.items():
        if name in fixed:
            if value != fixed[name]:
                return False
        elif name in _INTEGRITY_MIRRORED:
            if value != record.get(name):
                return False
        elif name == "signature":
            if not isinstance(value, Mapping):
                return False
            wanted = {inner for inner, top in _INTEGRITY_SIGNATURE_MIRRORED.items() if top in record}
            if set(value) != wanted:
                return False
            for inner, top in _INTEGRITY_SIGNATURE_MIRRORED.items():
                if inner in value and value[inner] != record.get(top):
                    return False
    return True


_HEX64 = re.compile(r"[0-9a-f]{64}")


def check_audit_chain(record: Mapping[str, Any], expected_record_hash: Any,
                      expected_receipt_hash: Any) -> CheckValue:
    """The record's `audit_chain` member: what a record alone can prove of it.

    Its leaf is recomputed from the record; a first link's rolling root is its leaf; the member
    set is closed. Its placement (link hash, later roots) is proven by a packet's chain excerpt.
    """
    member = record.get("audit_chain")
    if member is None:
        return False if "audit_chain_signature" in record else None
    if not isinstance(member, Mapping) or set(member) != set(AUDIT_CHAIN_MEMBERS):
        return False
    position = member.get("chain_position")
    leaf = _safe(chain_leaf_hash, record.get("decision_id"), expected_record_hash, expected_receipt_hash)
    ok = (
        leaf is not None and member.get("leaf_hash") == leaf
        and member.get("entry_type") == CHAIN_ENTRY_TYPE_DECISION
        and type(position) is int and position >= 1
        and isinstance(member.get("chain_id"), str) and member["chain_id"] != ""
        and all(_HEX64.fullmatch(member.get(name) or "") for name in ("link_hash", "merkle_root"))
        and (position != 1 or member.get("merkle_root") == leaf)
    )
    return bool(ok)


def check_urls(record: Mapping[str, JsonValue]) -> CheckValue:
    """`decision_url` is the one the id gives, and the legacy `replay` alias equals `replay_url`."""
    results = []
    if "decision_url" in record:
        decision_id = record.get("decision_id")
        urls = _safe(decision_urls, decision_id) if isinstance(decision_id, str) else None
        results.append(urls is not None and record.get("decision_url") == urls["decision_url"])
    if "replay" in record:  # legacy alias of replay_url
        results.append(record.get("replay") == record.get("replay_url"))
    return all(results) if results else None


def check_policy_consistency(record: Mapping[str, JsonValue], rulebook_mode: bool) -> CheckValue:
    """The policy identity members agree with each other and, in rulebook mode, with `rulebook`."""
    results = []
    if "source_hash" in record:
        results.append(record.get("source_hash") == record.get("policy_hash"))
    rulebook = record.get("rulebook")
    if rulebook_mode:
        if not isinstance(rulebook, Mapping):
            return False
        bundle = record.get("policy_bundle")
        results += [
            record.get("policy_id") == rulebook.get("id"),
            record.get("policy_version") == rulebook.get("version"),
            record.get("policy_hash") == rulebook.get("hash"),
        ]
        if bundle is not None:
            results.append(
                isinstance(bundle, Mapping)
                and bundle.get("hash") == rulebook.get("hash")
                and bundle.get("id") == rulebook.get("id")
                and bundle.get("version") == rulebook.get("version")
            )
        contract = record.get("rulebook_contract")
        if contract is not None:
            results.append(
                isinstance(contract, Mapping)
                and contract.get("evaluator_version") == record.get("evaluator_version")
            )
    return all(results) if results else None
