"""Rulebook-mode checks: the rulebook attestation (bundle hash, consistency with the record, facts
hash, signature over the recomputed bundle hash) and the rulebook registry with its attestation."""

from __future__ import annotations

from collections.abc import Mapping

from gate.keys.signing import public_key_fingerprint, raw_public_key_from_pem
from gate.protocol.attestation import (
    OUTCOME_MEMBERS,
    STATUS_SIGNED,
    STATUS_UNSIGNED,
    registry_attestation_hash,
    verify_hash_text_signature,
)
from gate.protocol.canonical import sha256_hex
from gate.verify.checks import _canon_equal, _digest_equal, _safe
from gate.vocabulary import (
    ADAPTER_AUTHORITY,
    ATTESTATION_SIGNATURE_ALGORITHM,
    BINDING_ADAPTER,
    REGISTRY_ATTESTATION_VERSION,
    RULEBOOK_ATTESTATION_SIGNATURE_VERSION,
    RULEBOOK_ATTESTATION_VERSION,
    SIG_ED25519,
    SIGNED_FIELD_BUNDLE_HASH,
)


def _check_rulebook_attestation(record, anchors, original_input, checks, expected, actual, notes) -> None:
    attestation = record.get("rulebook_attestation")
    if attestation is None:
        if "rulebook" in record:
            checks["rulebook_attestation_bundle_hash"] = False
            notes.append("rulebook record without rulebook_attestation")
        return
    names = ("rulebook_attestation_bundle_hash", "rulebook_attestation_consistency",
             "rulebook_attestation_signature", "policy_bundle_hash")
    if not isinstance(attestation, Mapping) or not isinstance(attestation.get("bundle"), Mapping):
        for name in names:
            checks[name] = False
        return
    bundle = attestation["bundle"]

    # Bundle hash, and policy_bundle_hash equal to it.
    digest = _safe(sha256_hex, bundle)
    expected["rulebook_attestation_bundle_hash"] = digest
    actual["rulebook_attestation_bundle_hash"] = attestation.get("bundle_hash")
    checks["rulebook_attestation_bundle_hash"] = _digest_equal(digest, attestation.get("bundle_hash"))
    expected["policy_bundle_hash"] = digest
    actual["policy_bundle_hash"] = record.get("policy_bundle_hash")
    checks["policy_bundle_hash"] = _digest_equal(digest, record.get("policy_bundle_hash"))

    # Bundle consistent with the record's own members.
    outcome = {name: record.get(name) for name in OUTCOME_MEMBERS}
    consistent = (
        attestation.get("schema_version") == RULEBOOK_ATTESTATION_VERSION
        and bundle.get("engine") == record.get("engine", bundle.get("engine"))
        and bundle.get("evaluator_version") == record.get("evaluator_version")
        and _canon_equal(bundle.get("rulebook"), record.get("rulebook"))
        and _canon_equal(bundle.get("outcome"), outcome)
        and _canon_equal(bundle.get("runtime_binding"), record.get("runtime_binding"))
        and _canon_equal(bundle.get("trusted_adapter"), record.get("trusted_adapter"))
    )
    checks["rulebook_attestation_consistency"] = consistent

    # Facts hash: checkable through the adapter lineage, or the original input's context.inputs.
    facts_hash = bundle.get("input_hash")
    adapter = record.get("trusted_adapter")
    if isinstance(adapter, Mapping) and "output_hash" in adapter:
        expected["rulebook_attestation_input_hash"] = adapter.get("output_hash")
        actual["rulebook_attestation_input_hash"] = facts_hash
        checks["rulebook_attestation_input_hash"] = _digest_equal(adapter.get("output_hash"), facts_hash)
    elif isinstance(original_input, Mapping) and isinstance(original_input.get("context"), Mapping) \
            and isinstance(original_input["context"].get("inputs"), Mapping):
        facts_expected = _safe(sha256_hex, original_input["context"]["inputs"])
        expected["rulebook_attestation_input_hash"] = facts_expected
        actual["rulebook_attestation_input_hash"] = facts_hash
        checks["rulebook_attestation_input_hash"] = _digest_equal(facts_expected, facts_hash)

    # Signature over the text of the *recomputed* bundle hash.
    signature = attestation.get("signature")
    if not isinstance(signature, Mapping):
        checks["rulebook_attestation_signature"] = False
        return
    status = signature.get("status")
    well_formed = (
        signature.get("schema_version") == RULEBOOK_ATTESTATION_SIGNATURE_VERSION
        and signature.get("algorithm") == ATTESTATION_SIGNATURE_ALGORITHM
        and signature.get("signed_field") == SIGNED_FIELD_BUNDLE_HASH
    )
    if status == STATUS_UNSIGNED:
        blank = all(signature.get(n) is None for n in ("key_id", "public_key_pem", "signature"))
        checks["rulebook_attestation_signature"] = None if (well_formed and blank) else False
        return
    if status != STATUS_SIGNED or not well_formed:
        checks["rulebook_attestation_signature"] = False
        return
    embedded_pem = signature.get("public_key_pem")
    embedded_fp = _safe(public_key_fingerprint, embedded_pem) if isinstance(embedded_pem, str) else None
    key = anchors.select_ed25519(signature.get("key_id"), embedded_fp)
    if key is None:
        notes.append("rulebook attestation signature not checked: no trusted key for it")
        embedded_raw = _safe(raw_public_key_from_pem, embedded_pem) if isinstance(embedded_pem, str) else None
        if embedded_raw is not None:
            checks["rulebook_attestation_signature_matches_untrusted_key"] = verify_hash_text_signature(
                digest, signature.get("signature"), embedded_raw
            )
        return
    ok = verify_hash_text_signature(digest, signature.get("signature"), key.public_key_raw)
    if embedded_pem is not None:
        embedded_raw = _safe(raw_public_key_from_pem, embedded_pem) if isinstance(embedded_pem, str) else None
        ok = ok and embedded_raw == key.public_key_raw
    checks["rulebook_attestation_signature"] = ok


def _dependency_matches(dependency, adapter) -> bool:
    """The snapshot's bound adapter dependency names the record's adapter (both absent in direct mode)."""
    if dependency is None and adapter is None:
        return True
    if not isinstance(dependency, Mapping) or not isinstance(adapter, Mapping):
        return False
    return set(dependency) == {"adapter_id", "version", "manifest_hash"} and all(
        dependency.get(name) == adapter.get(name) for name in ("adapter_id", "version", "manifest_hash"))


def _check_registry(record, anchors, checks, expected, actual, notes) -> None:
    registry = record.get("rulebook_registry")
    if registry is None:
        return
    if not isinstance(registry, Mapping):
        checks["rulebook_registry_consistency"] = False
        checks["registry_attestation_hash"] = False
        return
    rulebook = record.get("rulebook")
    if isinstance(rulebook, Mapping):
        checks["rulebook_registry_consistency"] = (
            registry.get("rulebook_id") == rulebook.get("id")
            and registry.get("version") == rulebook.get("version")
            and registry.get("hash") == rulebook.get("hash")
            and registry.get("evaluator_version") == record.get("evaluator_version")
            and _dependency_matches(registry.get("trusted_adapter_dependency"), record.get("trusted_adapter"))
        )
    else:
        checks["rulebook_registry_consistency"] = False
    attestation = registry.get("registry_attestation")
    if attestation is None:
        notes.append("rulebook_registry has no registry_attestation")
        return
    if not isinstance(attestation, Mapping):
        checks["registry_attestation_hash"] = False
        return
    digest = _safe(registry_attestation_hash, dict(registry))
    expected["registry_attestation_hash"] = digest
    actual["registry_attestation_hash"] = attestation.get("attestation_hash")
    checks["registry_attestation_hash"] = (
        attestation.get("registry_attestation_version") == REGISTRY_ATTESTATION_VERSION
        and _digest_equal(digest, attestation.get("attestation_hash"))
    )
    status = attestation.get("status")
    if status == STATUS_UNSIGNED:
        checks["registry_attestation_signature"] = (
            None if attestation.get("signature") is None and attestation.get("key_id") is None else False
        )
        return
    if status != STATUS_SIGNED or attestation.get("signature_algorithm") != SIG_ED25519:
        checks["registry_attestation_signature"] = False
        return
    key = anchors.select_ed25519(attestation.get("key_id"), None)
    if key is None:
        notes.append("registry attestation signature not checked: no trusted key for it")
        return
    checks["registry_attestation_signature"] = verify_hash_text_signature(
        digest, attestation.get("signature"), key.public_key_raw
    )


TRUSTED_ADAPTER_MEMBERS = frozenset({
    "manifest_version", "adapter_id", "version", "implementation_revision", "implementation_hash",
    "manifest_hash", "input_hash", "output_hash", "execution_isolation", "capability_enforcement",
    "execution_timeout_ms",
})
_HASH_MEMBERS = ("implementation_hash", "manifest_hash", "input_hash", "output_hash")


def _is_hex64(value) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _check_trusted_adapter(record, original_input, checks, expected, actual, notes) -> None:
    """`trusted_adapter_lineage`: the adapter block, the adapter facts and the binding agree.

    Rulebook records in adapter mode (``runtime_binding.binding_mode`` is the adapter mode, or
    `trusted_adapter` / `adapter_facts` present) must carry both members; `trusted_adapter` has
    exactly the eleven members of reference facts §3 with 64-hex hashes; ``H(adapter_facts)``
    equals `trusted_adapter.output_hash`; the runtime binding is the adapter mode with
    `adapter_authority: "facts_only"`. With the original request: its `adapter` invocation names
    the same id, version and manifest hash, ``H(adapter.input)`` equals `input_hash`, and every
    input member reappears unchanged in `adapter_facts`.
    """
    adapter = record.get("trusted_adapter")
    facts = record.get("adapter_facts")
    binding = record.get("runtime_binding")
    binding_mode = binding.get("binding_mode") if isinstance(binding, Mapping) else None
    if adapter is None and facts is None and binding_mode != BINDING_ADAPTER:
        if isinstance(binding, Mapping) and "adapter_authority" in binding:
            checks["trusted_adapter_lineage"] = False
            notes.append("adapter_authority in a direct-mode runtime binding")
        return
    ok = (isinstance(adapter, Mapping) and isinstance(facts, Mapping)
          and set(adapter) == TRUSTED_ADAPTER_MEMBERS
          and all(_is_hex64(adapter.get(name)) for name in _HASH_MEMBERS)
          and isinstance(adapter.get("execution_timeout_ms"), int)
          and binding_mode == BINDING_ADAPTER
          and binding.get("adapter_authority") == ADAPTER_AUTHORITY)
    if isinstance(facts, Mapping):
        digest = _safe(sha256_hex, facts)
        expected["adapter_facts_hash"] = digest
        actual["adapter_facts_hash"] = adapter.get("output_hash") if isinstance(adapter, Mapping) else None
        ok = ok and _digest_equal(digest, actual["adapter_facts_hash"])
    invocation = original_input.get("adapter") if isinstance(original_input, Mapping) else None
    if ok and isinstance(invocation, Mapping):
        payload = invocation.get("input")
        ok = (invocation.get("adapter_id") == adapter.get("adapter_id")
              and invocation.get("version") == adapter.get("version")
              and invocation.get("manifest_hash") == adapter.get("manifest_hash")
              and isinstance(payload, Mapping)
              and _digest_equal(_safe(sha256_hex, payload), adapter.get("input_hash"))
              and all(name in facts and _canon_equal(facts[name], value) for name, value in payload.items()))
    elif ok:
        notes.append("trusted adapter input_hash not checked: original input not supplied")
    checks["trusted_adapter_lineage"] = bool(ok)
