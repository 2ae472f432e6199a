"""Decision Records: envelope, hashes, the rulebook-mode record builder and response views.

Pure code: no I/O, no clock, no randomness. Time, ids, keys and signers are passed in.

Hash preimages (reference facts §5; all hashes are bare lowercase sha256 hex of
`json.sort_deep.v1` canonical bytes, see `gate.protocol.canonical`):

* ``record_hash  = sha256(canonical(record_envelope(record)))`` (see `record_envelope`).
* ``receipt_hash = sha256(canonical({decision_record_version, decision_id, record_hash,
  input_hash, output_hash, policy_hash, action_binding_hash, evidence_manifest_hash,
  policy_bundle_hash?}))`` where the two inner hashes are over the canonical
  ``action_binding`` and ``evidence_manifest`` objects (see `receipt_hash`).
* receipt signature payload = ``canonical({decision_id, key_id, receipt_hash, record_hash})``
  (`receipt_signature_payload`).

Not covered by `record_hash`: ``c``, ``v``, ``status``, ``missing_fields``,
``invalid_fields``, ``engine``, ``evaluation``, ``source_hash``, ``decision_url``,
``integrity``, ``receipt_*``, ``decision_confidence``, ``confidence_hash``,
``confidence_signature``, ``audit_chain``, ``audit_chain_signature``.
The verifier (`gate.verify`) binds the first ones through consistency checks and, in rulebook
mode, through a recomputed ``output_hash`` (see `rulebook_output_hash`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, cast
from urllib.parse import quote

from gate.bodies.text import js_trim
from gate.keys.signing import Ed25519Key, ReceiptSigner
from gate.protocol.attestation import (
    attestation_outcome,
    build_rulebook_attestation,
    rulebook_attestation_bundle,
    rulebook_reference,
)
from gate.protocol.canonical import canonical_bytes, canonical_text, clone, sha256_hex
from gate.protocol.evaluation import Evaluation
from gate.protocol.types import (
    EvidenceManifest,
    EvidenceSource,
    IdentityMembers,
    Integrity,
    IntegritySignature,
    LineageMembers,
    OutcomeMembers,
    PolicyBundle,
    PolicyMembers,
    RecordMembers,
    RulebookAttestation,
    RulebookContract,
    RulebookRecordInputs,
    RulebookReference,
    RuntimeBinding,
    SignedRegistryEntry,
    TrustedAdapter,
    UnsealedRecord,
)
from gate.strict_json import JsonValue
from gate.vocabulary import (
    ADAPTER_AUTHORITY,
    BINDING_ADAPTER,
    CANONICALIZATION,
    COMPACT_FOR_VERDICT,
    CUSTOMER_SUPPLIED_CODE,
    DECISION_PROTOCOL_VERSION,
    DECISION_RECORD_VERSION,
    EVALUATOR_VERSION,
    HASH_ALGORITHM,
    NEEDS_INPUT_STATUS,
    PRODUCTION_CORE,
    RULEBOOK_SCHEMA_VERSION,
    SIG_ED25519,
    SUPPORTED_BINDING_MODES,
    VERDICT_AUTHORITY,
    VIEW_FULL,
    VIEW_MINIMAL,
    VIEWS,
    Verdict,
    is_verdict,
)

__all__ = [
    "ENVELOPE_ALWAYS",
    "ENVELOPE_WHEN_NON_EMPTY",
    "MAX_ACTION",
    "MAX_DECISION_ID",
    "MAX_EVIDENCE_CHARS",
    "MAX_EVIDENCE_ITEMS",
    "MAX_IDEMPOTENCY_KEY",
    "MAX_MANIFEST_SOURCES",
    "MAX_REQUEST_ID",
    "MAX_URL",
    "MINIMAL_VIEW_MEMBERS",
    "RECEIPT_FIELDS",
    "STANDARD_VIEW_MEMBERS",
    "RulebookRecordInputs",
    "action_binding_from_context",
    "build_rulebook_record",
    "compact_deep",
    "decision_urls",
    "js_trim",
    "limit_text",
    "project_view",
    "receipt_hash",
    "receipt_hash_preimage",
    "receipt_signature_payload",
    "record_envelope",
    "record_hash",
    "rulebook_output_hash",
    "runtime_binding_for",
    "seal_record",
]

# --------------------------------------------------------------------------- limits (§5)

MAX_DECISION_ID = 600
MAX_REQUEST_ID = 160
MAX_IDEMPOTENCY_KEY = 300
MAX_ACTION = 140
MAX_EVIDENCE_ITEMS = 32
MAX_EVIDENCE_CHARS = 180
MAX_MANIFEST_SOURCES = 16
MAX_URL = 800

def limit_text(value: Any, limit: int) -> str:
    """Trim (JS rules), then keep the longest prefix of at most `limit` UTF-16 code units.

    Lengths are counted as JavaScript counts them (UTF-16 units, so an emoji counts 2), and the
    cut never splits a surrogate pair (the pair is dropped whole). Deterministic: the same input
    always gives the same output. Non-strings are converted with `str()` first (None → "").
    """
    if value is None:
        return ""
    text = js_trim(value if isinstance(value, str) else str(value))
    if len(text) <= limit // 2:  # fast path: cannot exceed even if every char were 2 units
        return text
    units = 0
    for index, char in enumerate(text):
        units += 2 if ord(char) > 0xFFFF else 1
        if units > limit:
            return text[:index]
    return text


# --------------------------------------------------------------------------- envelope

# Always in the envelope, in the reference's listed order (order is irrelevant to the hash).
ENVELOPE_ALWAYS = (
    "decision_protocol_version",
    "decision_record_version",
    "decision_id",
    "request_id",
    "idempotency_key",
    "verdict",
    "action",
    "action_binding",
    "evidence",
    "evidence_manifest",
    "policy_id",
    "policy_version",
    "policy_hash",
    "input_hash",
    "output_hash",
    "created_at",
    "replay_url",
    "verify_url",
)

# In the envelope only when non-empty, deep-compacted (null/empty members removed).
ENVELOPE_WHEN_NON_EMPTY = (
    "application_verdict",
    "reason_code",
    "matched_rule_id",
    "rulebook",
    "rulebook_contract",
    "evaluator_version",
    "runtime_binding",
    "rulebook_registry",
    "rulebook_attestation",
    "trusted_adapter",
    "adapter_facts",
)

RECEIPT_FIELDS = (
    "receipt_key_id",
    "receipt_signature",
    "receipt_signature_algorithm",
    "receipt_public_key_fingerprint",
)


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (str, dict, list, tuple)) and len(value) == 0)


_CONTAINERS = (dict, list, tuple)


def compact_deep(value: Any) -> Any:
    """Remove object members whose value is null, "", {} or [] at every depth.

    Objects are compacted bottom-up (a member that becomes empty after compaction is removed
    too). Array elements are compacted but never removed, so arrays keep their length and
    positions. `false` and `0` are values, not empty.
    """
    if isinstance(value, dict):
        result = {}
        for key, item in value.items():
            if type(item) is str:  # the common member first (a record is mostly text)
                if item:
                    result[key] = item
            elif item is None:
                continue
            elif isinstance(item, _CONTAINERS):
                compacted = compact_deep(item)
                if compacted:  # not {} or [] (before or after compaction)
                    result[key] = compacted
            elif not (isinstance(item, str) and not item):
                result[key] = item
        return result
    if isinstance(value, _CONTAINERS[1:]):
        return [compact_deep(item) if isinstance(item, _CONTAINERS) else item for item in value]
    return value


def record_envelope(record: Mapping[str, Any]) -> dict[str, JsonValue]:
    """The object whose canonical sha256 is `record_hash` (reference facts §5).

    Selection rules:
    1. Every name in `ENVELOPE_ALWAYS` is present; a missing member is null, except
       `idempotency_key` ("" when missing or null) and `action_binding` ({} when missing or
       null). `evidence_manifest` is reduced to ``{codes, sources}`` (each [] when missing)
       when it is an object; any other value is kept as is.
    2. `policy_bundle_hash` when it is a non-empty value, and `policy_bundle` (with its
       null/empty members dropped, one level) when it is a non-empty object.
    3. Each name in `ENVELOPE_WHEN_NON_EMPTY` whose `compact_deep` value is non-empty.
    The values of rule 1 are used exactly as stored (they are emitted already trimmed).
    """
    envelope: dict[str, JsonValue] = {name: record.get(name) for name in ENVELOPE_ALWAYS}
    if envelope["idempotency_key"] is None:
        envelope["idempotency_key"] = ""
    if envelope["action_binding"] is None:
        envelope["action_binding"] = {}
    manifest = envelope["evidence_manifest"]
    if isinstance(manifest, dict):
        envelope["evidence_manifest"] = {
            "codes": manifest.get("codes", []),
            "sources": manifest.get("sources", []),
        }
    bundle_hash = record.get("policy_bundle_hash")
    if not _is_empty(bundle_hash):
        envelope["policy_bundle_hash"] = bundle_hash
    bundle = record.get("policy_bundle")
    if isinstance(bundle, dict):
        bundle = {k: v for k, v in bundle.items() if not _is_empty(v)}
        if bundle:
            envelope["policy_bundle"] = bundle
    for name in ENVELOPE_WHEN_NON_EMPTY:
        if name in record:
            value = compact_deep(record[name])
            if not _is_empty(value):
                envelope[name] = value
    return envelope


def record_hash(record: Mapping[str, Any]) -> str:
    """sha256 of the canonical envelope."""
    return sha256_hex(record_envelope(record))


def receipt_hash_preimage(record: Mapping[str, Any], record_hash_value: str | None = None) -> dict[str, JsonValue]:
    """The object whose canonical sha256 is `receipt_hash`.

    `record_hash` is the value stated in the record unless `record_hash_value` is given (the
    builder passes the freshly computed one). `action_binding_hash` is over the stored
    `action_binding` ({} when missing), `evidence_manifest_hash` over the stored
    `evidence_manifest` object as a whole ({} when missing). `policy_bundle_hash` is a member
    only when the record has a non-empty one.
    """
    preimage: dict[str, JsonValue] = {
        "decision_record_version": record.get("decision_record_version"),
        "decision_id": record.get("decision_id"),
        "record_hash": record.get("record_hash") if record_hash_value is None else record_hash_value,
        "input_hash": record.get("input_hash"),
        "output_hash": record.get("output_hash"),
        "policy_hash": record.get("policy_hash"),
        "action_binding_hash": sha256_hex(_or_empty_object(record.get("action_binding"))),
        "evidence_manifest_hash": sha256_hex(_or_empty_object(record.get("evidence_manifest"))),
    }
    bundle_hash = record.get("policy_bundle_hash")
    if not _is_empty(bundle_hash):
        preimage["policy_bundle_hash"] = bundle_hash
    return preimage


def _or_empty_object(value: Any) -> Any:
    return {} if value is None else value


def receipt_hash(record: Mapping[str, Any], record_hash_value: str | None = None) -> str:
    return sha256_hex(receipt_hash_preimage(record, record_hash_value))


# --------------------------------------------------------------------------- output hash


def rulebook_output_hash(record: Mapping[str, Any]) -> str:
    """Rulebook-mode `output_hash`: sha256(canonical({status, verdict, application_verdict,
    action, reason_code, matched_rule_id, evidence, evaluation})).

    For `status: "needs_input"` records the preimage also has `missing_fields` and
    `invalid_fields` (our decision: otherwise those response members would be bound by no hash
    or signature). Missing members are null.
    """
    preimage = {
        name: record.get(name)
        for name in ("status", "verdict", "application_verdict", "action", "reason_code",
                     "matched_rule_id", "evidence", "evaluation")
    }
    if record.get("status") == NEEDS_INPUT_STATUS:
        preimage["missing_fields"] = record.get("missing_fields")
        preimage["invalid_fields"] = record.get("invalid_fields")
    return sha256_hex(preimage)


# --------------------------------------------------------------------------- urls


def decision_urls(decision_id: str) -> dict[str, str]:
    """``decision_url``, ``replay_url``, ``verify_url`` for an id.

    The id is percent-encoded like JavaScript's `encodeURIComponent` (our ids never need it;
    this only keeps foreign characters from breaking the path), each URL limited to 800 units.
    """
    encoded = quote(decision_id, safe="-_.!~*'()")
    base = f"/api/decision/{encoded}"
    return {
        "decision_url": limit_text(base, MAX_URL),
        "replay_url": limit_text(base + "/replay", MAX_URL),
        "verify_url": limit_text(base + "/verify", MAX_URL),
    }


# --------------------------------------------------------------------------- action binding

# (member, context keys tried in order)
_BINDING_SOURCES = (
    ("system", ("workflow", "target_system")),
    ("resource", ("source_record_id", "target_object_id")),
    ("proposed_action", ("requested_action",)),
    ("actor", ("actor",)),
    ("subject", ("subject",)),
    ("amount", ("amount", "discount_percent")),
    ("currency", ("currency",)),
    ("target_system", ("target_system",)),
    ("target_object_id", ("target_object_id",)),
    ("mutation", ("mutation",)),
)


def _binding_value(member: str, value: Any) -> str | None:
    if isinstance(value, str):
        text = js_trim(value)
        return text or None
    if member == "amount" and isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return canonical_text(value)
        except ValueError:
            return None
    return None


def action_binding_from_context(context: Mapping[str, Any] | None) -> dict[str, str]:
    """The record's `action_binding`, derived from the request `context`.

    * ``system`` ← ``workflow``, else ``target_system``;
    * ``resource`` ← ``source_record_id``, else ``target_object_id``;
    * ``proposed_action`` ← ``requested_action``;
    * ``actor``, ``subject``, ``currency``, ``target_system``, ``target_object_id``,
      ``mutation`` copied when present;
    * ``amount`` ← ``amount``, else ``discount_percent`` (the reference vector binds
      ``discount_percent: 15`` as ``amount: "15"``); numbers are written as canonical JSON
      number text (15 → "15", 2.50 → "2.5").
    Only non-empty strings (after JS trim) are kept, numbers only for `amount`; a source key
    whose value is unusable falls through to the next source key. {} when nothing applies.
    """
    if not isinstance(context, Mapping):
        return {}
    binding: dict[str, str] = {}
    for member, keys in _BINDING_SOURCES:
        for key in keys:
            value = _binding_value(member, context.get(key))
            if value is not None:
                binding[member] = value
                break
    return binding


# --------------------------------------------------------------------------- sealing


def receipt_signature_payload(decision_id: str | None, key_id: str, receipt_hash: str, record_hash: str) -> bytes:
    """Signed bytes of a receipt: canonical ``{decision_id, key_id, receipt_hash, record_hash}``
    (the keys sign bytes; the record protocol says which)."""
    return canonical_bytes({"decision_id": decision_id, "key_id": key_id, "receipt_hash": receipt_hash,
                            "record_hash": record_hash})


def audit_chain_signature_payload(decision_id: Any, key_id: Any, audit_chain: Mapping[str, Any]) -> bytes:
    """What `audit_chain_signature` signs: canon({audit_chain_hash, decision_id, key_id}) with
    audit_chain_hash = sha256(canon(audit_chain)). The chain member is outside record_hash
    (reference facts §5), so the gate signs it on its own once the chain position is known."""
    return canonical_bytes({"decision_id": decision_id, "key_id": key_id,
                            "audit_chain_hash": sha256_hex(dict(audit_chain))})


class _BundleHashMember(TypedDict, total=False):
    """`integrity.policy_bundle_hash`, there when the record has a non-empty one."""

    policy_bundle_hash: str


class _SignatureMember(TypedDict, total=False):
    """`integrity.signature`, there when a receipt signer signed."""

    signature: IntegritySignature


# What `seal_record` writes (anew, replacing any the record brings).
_SEALED_MEMBERS = frozenset(("record_hash", "receipt_hash", "integrity", *RECEIPT_FIELDS))


def seal_record(record: Mapping[str, Any], *, receipt_signer: ReceiptSigner | None = None) -> dict[str, Any]:
    """Copy of `record` with `record_hash`, `receipt_hash`, receipt signature and `integrity`.

    Works for any record that already carries the envelope members (rulebook or legacy).
    With a signer: `receipt_key_id`, `receipt_signature`, `receipt_signature_algorithm`, and
    `receipt_public_key_fingerprint` for Ed25519 (HMAC has no public key). Without a signer
    none of those members exist and `integrity` has no `signature`.
    `integrity` repeats the top-level values: canonicalization, hash_algorithm,
    decision_protocol_version, input_hash, output_hash, policy_hash, policy_bundle_hash (when
    present), record_hash, receipt_hash, replay_url, verify_url, and
    ``signature: {algorithm, key_id, public_key_fingerprint?}``.
    """
    # A shallow copy: sealing only sets top-level members, nested values are shared.
    sealed = {k: v for k, v in record.items() if k not in _SEALED_MEMBERS}
    sealed["record_hash"] = record_hash(sealed)
    sealed["receipt_hash"] = receipt_hash(sealed)
    signature_block: IntegritySignature | None = None
    if receipt_signer is not None:
        sealed["receipt_key_id"] = receipt_signer.key_id
        sealed["receipt_signature"] = receipt_signer.sign_payload(receipt_signature_payload(
            sealed.get("decision_id"), receipt_signer.key_id, sealed["receipt_hash"], sealed["record_hash"]))
        sealed["receipt_signature_algorithm"] = receipt_signer.algorithm
        signature_block = {"algorithm": receipt_signer.algorithm, "key_id": receipt_signer.key_id}
        if receipt_signer.algorithm == SIG_ED25519 and receipt_signer.public_key_fingerprint:
            sealed["receipt_public_key_fingerprint"] = receipt_signer.public_key_fingerprint
            signature_block["public_key_fingerprint"] = receipt_signer.public_key_fingerprint
    bundle_hash: _BundleHashMember = {}
    if not _is_empty(sealed.get("policy_bundle_hash")):
        bundle_hash["policy_bundle_hash"] = sealed["policy_bundle_hash"]
    signed: _SignatureMember = {}
    if signature_block is not None:
        signed["signature"] = signature_block
    integrity: Integrity = {
        "canonicalization": CANONICALIZATION,
        "hash_algorithm": HASH_ALGORITHM,
        "decision_protocol_version": sealed.get("decision_protocol_version"),
        "input_hash": sealed.get("input_hash"),
        "output_hash": sealed.get("output_hash"),
        "policy_hash": sealed.get("policy_hash"),
        **bundle_hash,
        "record_hash": sealed["record_hash"],
        "receipt_hash": sealed["receipt_hash"],
        "replay_url": sealed.get("replay_url"),
        "verify_url": sealed.get("verify_url"),
        **signed,
    }
    sealed["integrity"] = integrity
    return sealed


# --------------------------------------------------------------------------- rulebook record

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def _require_hex(name: str, value: Any) -> str:
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise ValueError(f"{name} must be 64 lowercase hex characters")
    return value


def _require_text(name: str, value: Any, limit: int) -> str:
    text = limit_text(value, limit) if isinstance(value, str) else ""
    if not text:
        raise ValueError(f"{name} must be a non-empty string")
    return text


def _evidence(codes: Iterable[Any]) -> list[str]:
    items = [limit_text(code, MAX_EVIDENCE_CHARS) for code in codes]
    return [item for item in items if item][:MAX_EVIDENCE_ITEMS]


# The rulebook-mode record, member by member: derived choices (reference facts §3–§5 where
# they speak; ours otherwise).
#
# * Strings that the reference bounds are JS-trimmed and cut to its limits with
#   `limit_text`: decision_id 600, request_id 160, idempotency_key 300, action 140,
#   evidence ≤ 32 items × 180 units, evidence_manifest.sources ≤ 16, URLs 800. The trimmed
#   action is used everywhere (top level, attestation outcome, output hash). Callers should
#   reject over-long ids at the boundary; truncation here only keeps records well-formed.
#   `decision_id`, `request_id`, `created_at` must be non-empty; `input_hash`,
#   `rulebook_hash`, `schema_hash` must be 64 lowercase hex (ValueError otherwise).
# * ``c`` = `COMPACT_FOR_VERDICT[evaluation.decision]` (review → "unclear"); ``v`` =
#   application verdict; ``verdict`` = normalized decision.
# * ``status`` is the evaluation status; `missing_fields` and `invalid_fields` (lists) exist
#   only for needs_input.
# * ``idempotency_key`` is a member only when a non-empty key is supplied (the envelope
#   then uses "" for records without one).
# * ``evidence`` = [reason_code]; ``evidence_manifest`` = {codes: [reason_code], sources:
#   [{id, type: "rulebook_rule", rulebook_id, rulebook_version, rulebook_hash}]} where `id`
#   is the matched rule id, "default_outcome" when no rule matched, or "input_schema" for
#   needs_input.
# * ``action_binding`` = `action_binding_from_context(context)`.
# * ``rulebook`` = {schema_version, id, version, hash}; ``policy_id`` = rulebook id,
#   ``policy_version`` = rulebook version, ``policy_hash`` = ``source_hash`` = rulebook hash;
#   ``policy_bundle`` = {id, version, hash (= rulebook hash), hash_algorithm,
#   canonicalization, source: "rulebook:<id>@<version>"}; ``policy_bundle_hash`` = the
#   rulebook attestation's `bundle_hash`.
# * ``runtime_binding`` = {production_core, binding_mode, verdict_authority,
#   customer_supplied_code} plus adapter_authority "facts_only" in adapter mode.
# * ``rulebook_attestation``: bundle over the same rulebook/outcome/runtime_binding with
#   input_hash = sha256(canonical(facts)) and trusted_adapter (null in direct mode); signed
#   with `attestation_key` (an `Ed25519Key`) or the unsigned form when it is None.
# * ``rulebook_registry`` is copied as given (it carries its own registry_attestation).
# * ``trusted_adapter`` / ``adapter_facts`` are members only when given.
# * ``output_hash`` = `rulebook_output_hash` of the record.
# * ``engine`` (top level and in the attestation bundle) is `engine`: the current label for
#   new records; historical replay passes the label the stored record carries (`gate.replay.historical`).
# * ``stored_attestation`` (replay only): when its `bundle_hash` equals the rebuilt bundle's,
#   its `signature` is kept (it signs exactly that hash), so an unchanged record rebuilds to
#   the same `record_hash` without the signing key.
# * URLs from `decision_urls`; then `seal_record` adds hashes, receipt fields and integrity.


def build_rulebook_record(
    inputs: RulebookRecordInputs,
    *,
    attestation_key: Ed25519Key | None = None,
    receipt_signer: ReceiptSigner | None = None,
) -> RecordMembers:
    """The full rulebook-mode Decision Record (the `full` view) of `inputs`, sealed.

    Built in named steps: check the inputs (`_check_binding`, `_checked_identity`,
    `_checked_verdict`), attest the outcome (`_rulebook_attestation`), then write the members
    in record order (`_outcome_members`, `_lineage_members`, `_identity_members`,
    `_policy_members`), the output hash, the URLs, and seal.
    See the comment above for how each member is derived.
    """
    _check_binding(inputs)
    identity = _checked_identity(inputs)
    verdict = _checked_verdict(inputs.evaluation)
    action = limit_text(inputs.evaluation.action, MAX_ACTION)
    rulebook_ref = rulebook_reference(inputs.rulebook, identity.rulebook_hash)
    runtime_binding = runtime_binding_for(inputs.binding_mode)
    attestation = _rulebook_attestation(inputs, rulebook_ref, action, runtime_binding, attestation_key)
    urls = decision_urls(identity.decision_id)
    record: UnsealedRecord = {
        **_outcome_members(inputs.evaluation, verdict, inputs.engine),
        **_lineage_members(inputs, rulebook_ref, runtime_binding, attestation, identity.schema_hash),
        **_identity_members(identity),
        **_policy_members(inputs, identity, action, attestation["bundle_hash"]),
        "output_hash": "",  # written next, over the members above (the hash leaves itself out)
        "replay_url": urls["replay_url"],
        "verify_url": urls["verify_url"],
        "decision_url": urls["decision_url"],
        "created_at": identity.created_at,
    }
    record["output_hash"] = rulebook_output_hash(record)
    # seal_record also seals advisory records, so it answers a plain object; this one has
    # exactly the members RecordMembers names (tests/crypto checks them against the type).
    return cast(RecordMembers, seal_record(record, receipt_signer=receipt_signer))


@dataclass(frozen=True, slots=True)
class _Identity:
    """The checked and trimmed identity and hashes of a record (`_checked_identity`)."""

    decision_id: str
    request_id: str
    created_at: str
    idempotency_key: str  # "" when none was supplied
    input_hash: str
    rulebook_hash: str
    schema_hash: str


def _check_binding(inputs: RulebookRecordInputs) -> None:
    """A supported binding mode, the adapter lineage in adapter mode, a real `Evaluation`."""
    if inputs.binding_mode not in SUPPORTED_BINDING_MODES:
        raise ValueError(f"unsupported binding_mode {inputs.binding_mode!r}")
    if inputs.binding_mode == BINDING_ADAPTER and not inputs.trusted_adapter:
        raise ValueError("adapter binding mode needs the trusted_adapter lineage")
    if not isinstance(inputs.evaluation, Evaluation):
        raise TypeError("evaluation must be a gate.protocol.evaluation.Evaluation")


def _checked_identity(inputs: RulebookRecordInputs) -> _Identity:
    """Ids and time non-empty and cut to their limits, hashes 64 lowercase hex (ValueError otherwise)."""
    decision_id = _require_text("decision_id", inputs.decision_id, MAX_DECISION_ID)
    request_id = _require_text("request_id", inputs.request_id, MAX_REQUEST_ID)
    created_at = _require_text("created_at", inputs.created_at, 80)
    input_hash = _require_hex("input_hash", inputs.input_hash)
    rulebook_hash = _require_hex("rulebook_hash", inputs.rulebook_hash)
    schema_hash = _require_hex("schema_hash", inputs.schema_hash)
    key = limit_text(inputs.idempotency_key, MAX_IDEMPOTENCY_KEY) if inputs.idempotency_key else ""
    return _Identity(decision_id, request_id, created_at, key, input_hash, rulebook_hash, schema_hash)


def _checked_verdict(evaluation: Evaluation) -> Verdict:
    """The evaluation's normalized decision: yes, no or review."""
    if not is_verdict(evaluation.decision):
        raise ValueError(f"evaluation.decision must be yes|no|review, not {evaluation.decision!r}")
    return evaluation.decision


def runtime_binding_for(binding_mode: str) -> RuntimeBinding:
    """The record's `runtime_binding`; adapter mode adds `adapter_authority: "facts_only"`."""
    binding: RuntimeBinding = {
        "production_core": PRODUCTION_CORE,
        "binding_mode": binding_mode,
        "verdict_authority": VERDICT_AUTHORITY,
        "customer_supplied_code": CUSTOMER_SUPPLIED_CODE,
    }
    if binding_mode == BINDING_ADAPTER:
        binding["adapter_authority"] = ADAPTER_AUTHORITY
    return binding


def _rulebook_attestation(inputs: RulebookRecordInputs, rulebook_ref: RulebookReference, action: str,
                          runtime_binding: RuntimeBinding, attestation_key: Ed25519Key | None) -> RulebookAttestation:
    """The attestation over rulebook, outcome, runtime binding and facts hash, signed with
    `attestation_key` (unsigned without one). In replay, a stored signature over the same
    bundle hash is kept."""
    evaluation = inputs.evaluation
    outcome = attestation_outcome(
        status=evaluation.status,
        verdict=evaluation.decision,
        application_verdict=evaluation.application_verdict,
        action=action,
        reason_code=evaluation.reason_code,
        matched_rule_id=evaluation.matched_rule_id,
    )
    bundle = rulebook_attestation_bundle(
        rulebook_ref=rulebook_ref,
        facts_hash=sha256_hex(dict(inputs.facts)),
        outcome=outcome,
        runtime_binding=runtime_binding,
        trusted_adapter=inputs.trusted_adapter if inputs.trusted_adapter else None,
        engine=inputs.engine,
    )
    attestation = build_rulebook_attestation(bundle, attestation_key)
    stored = inputs.stored_attestation
    if (isinstance(stored, Mapping) and stored.get("bundle_hash") == attestation["bundle_hash"]
            and isinstance(stored.get("signature"), Mapping)):
        attestation["signature"] = clone(dict(stored["signature"]))
    return attestation


class _NeedsInputMembers(TypedDict, total=False):
    """A needs_input record's `missing_fields` and `invalid_fields` (none on any other)."""

    missing_fields: list[str]
    invalid_fields: list[str]


class _RegistryMember(TypedDict, total=False):
    """`rulebook_registry`, when the caller gives a registry entry."""

    rulebook_registry: SignedRegistryEntry


class _AdapterMembers(TypedDict, total=False):
    """`trusted_adapter` and `adapter_facts`, each when the caller gives it (adapter mode)."""

    trusted_adapter: TrustedAdapter
    adapter_facts: dict[str, JsonValue]


def _outcome_members(evaluation: Evaluation, verdict: Verdict, engine: str) -> OutcomeMembers:
    """Protocol versions, then what the evaluation decided and how (`c`, `v`, the trace)."""
    needs_input: _NeedsInputMembers = {}
    if evaluation.status == NEEDS_INPUT_STATUS:
        needs_input["missing_fields"] = list(evaluation.missing_fields)
        needs_input["invalid_fields"] = list(evaluation.invalid_fields)
    return {
        "decision_protocol_version": DECISION_PROTOCOL_VERSION,
        "decision_record_version": DECISION_RECORD_VERSION,
        "status": evaluation.status,
        **needs_input,
        "c": COMPACT_FOR_VERDICT[verdict],
        "v": evaluation.application_verdict,
        "verdict": verdict,
        "application_verdict": evaluation.application_verdict,
        "reason_code": evaluation.reason_code,
        "matched_rule_id": evaluation.matched_rule_id,
        "engine": engine,
        "evaluator_version": EVALUATOR_VERSION,
        "evaluation": evaluation.trace(),
    }


def _lineage_members(inputs: RulebookRecordInputs, rulebook_ref: RulebookReference, runtime_binding: RuntimeBinding,
                     attestation: RulebookAttestation, schema_hash: str) -> LineageMembers:
    """The rulebook, its contract, the runtime binding, registry entry, attestation and adapter lineage."""
    contract: RulebookContract = {
        "schema_version": RULEBOOK_SCHEMA_VERSION,
        "schema_url": inputs.schema_url,
        "schema_hash": schema_hash,
        "evaluator_version": EVALUATOR_VERSION,
    }
    registry: _RegistryMember = {}
    if inputs.rulebook_registry:
        registry["rulebook_registry"] = clone(dict(inputs.rulebook_registry))
    adapter: _AdapterMembers = {}
    if inputs.trusted_adapter:
        adapter["trusted_adapter"] = clone(inputs.trusted_adapter)
    if inputs.adapter_facts:
        adapter["adapter_facts"] = clone(dict(inputs.adapter_facts))
    return {
        "rulebook": rulebook_ref,
        "rulebook_contract": contract,
        "runtime_binding": clone(dict(runtime_binding)),
        **registry,
        "rulebook_attestation": attestation,
        **adapter,
    }


def _identity_members(identity: _Identity) -> IdentityMembers:
    """`request_id`, `decision_id`, and `idempotency_key` when one was supplied."""
    members: IdentityMembers = {"request_id": identity.request_id, "decision_id": identity.decision_id}
    if identity.idempotency_key:
        members["idempotency_key"] = identity.idempotency_key
    return members


def _evidence_source_id(evaluation: Evaluation) -> str:
    """What the evidence came from: the input schema, the matched rule, or the default outcome."""
    if evaluation.status == NEEDS_INPUT_STATUS:
        return "input_schema"
    return evaluation.matched_rule_id or "default_outcome"


def _policy_members(inputs: RulebookRecordInputs, identity: _Identity, action: str,
                    bundle_hash: str) -> PolicyMembers:
    """Evidence and its manifest, the action and its binding, the rulebook as the policy, the input hash."""
    rulebook_id, rulebook_version = inputs.rulebook.get("rulebook_id"), inputs.rulebook.get("version")
    evidence = _evidence([inputs.evaluation.reason_code])
    source: EvidenceSource = {
        "id": _evidence_source_id(inputs.evaluation),
        "type": "rulebook_rule",
        "rulebook_id": rulebook_id,
        "rulebook_version": rulebook_version,
        "rulebook_hash": identity.rulebook_hash,
    }
    manifest: EvidenceManifest = {"codes": list(evidence), "sources": [source][:MAX_MANIFEST_SOURCES]}
    bundle: PolicyBundle = {
        "id": rulebook_id,
        "version": rulebook_version,
        "hash": identity.rulebook_hash,
        "hash_algorithm": HASH_ALGORITHM,
        "canonicalization": CANONICALIZATION,
        "source": f"rulebook:{rulebook_id}@{rulebook_version}",
    }
    return {
        "evidence": evidence,
        "evidence_manifest": manifest,
        "action": action,
        "action_binding": action_binding_from_context(inputs.context),
        "policy_id": rulebook_id,
        "policy_version": rulebook_version,
        "policy_hash": identity.rulebook_hash,
        "source_hash": identity.rulebook_hash,
        "policy_bundle": bundle,
        "policy_bundle_hash": bundle_hash,
        "input_hash": identity.input_hash,
    }


# --------------------------------------------------------------------------- views

# Spec "Response views". Every view keeps decision_id, record_hash, receipt_hash,
# policy_bundle_hash, decision_confidence, the signature fields and verify_url.
MINIMAL_VIEW_MEMBERS: frozenset[str] = frozenset(
    {
        "decision_protocol_version",
        "decision_record_version",
        "decision_id",
        "request_id",
        "idempotency_key",
        "status",
        "missing_fields",
        "invalid_fields",
        "c",
        "v",
        "verdict",
        "application_verdict",
        "reason_code",
        "matched_rule_id",
        # rulebook lineage
        "rulebook",
        "evaluator_version",
        "action",
        # hashes
        "record_hash",
        "receipt_hash",
        "policy_bundle_hash",
        # signed receipt fields
        *RECEIPT_FIELDS,
        "decision_confidence",
        "confidence_hash",
        "confidence_signature",
        "verify_url",
        "decision_url",
        "replay_url",
    }
)

STANDARD_VIEW_MEMBERS: frozenset[str] = MINIMAL_VIEW_MEMBERS | frozenset(
    {
        "evidence",
        "policy_id",
        "policy_version",
        "policy_hash",
        "source_hash",
        "policy_bundle",
        "action_binding",
        "input_hash",
        "output_hash",
        "created_at",
        "engine",
        "rulebook_contract",
        "runtime_binding",
        "audit_chain",
    }
)


def project_view(record: Mapping[str, Any], view: str) -> dict[str, Any]:
    """The `minimal`, `standard` or `full` projection of a stored record.

    A shallow projection: nested values are shared with `record` (responses are serialised
    at once; copy before mutating).

    `full` is the whole record. The others keep the listed members that the record has, in
    the record's own member order. Only the full view can be verified offline (the others
    lack envelope members).
    """
    if view not in VIEWS:
        raise ValueError(f"unknown response view {view!r}; expected one of {VIEWS}")
    if view == VIEW_FULL:
        return dict(record)
    members = MINIMAL_VIEW_MEMBERS if view == VIEW_MINIMAL else STANDARD_VIEW_MEMBERS  # else: VIEW_STANDARD
    return {k: v for k, v in record.items() if k in members}
