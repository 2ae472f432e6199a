"""The rulebook-mode Decision Record as a type: its wire members (`RecordMembers`) and what the
decide pipeline hands the builder (`RulebookRecordInputs`).

`RecordMembers` is a TypedDict of the wire members: the builder (`gate.protocol.records`)
returns one, which the decide wraps as its envelope in the record value
(`gate.protocol.decision_record.DecisionRecord`, which adds the signed parts); the verifier
(`gate.verify.record`) takes its closed member set from it.

No `from __future__ import annotations` here: `Required` and `NotRequired` must be real
objects when the TypedDict is created, or Python 3.11 cannot tell required members apart.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from gate.protocol.confidence import DecisionConfidence
from gate.protocol.evaluation import Evaluation, EvaluationTrace
from gate.protocol.release_arm import ReleaseArm
from gate.strict_json import JsonValue
from gate.vocabulary import ENGINE, CompactVerdict, Verdict


class SnapshotLineage(TypedDict):
    """A bound rulebook snapshot's lineage: which version of which rulebook, under which
    evaluator and schema, registered when. The ledger's row (`gate.ledger.SnapshotRow`: the body
    and registry entry as stored text, and the scope) and the replay's snapshot
    (`gate.replay.historical.Snapshot`: the body and registry entry parsed) state it once, here."""

    rulebook_id: str
    version: str
    rulebook_hash: str
    evaluator_version: str
    schema_hash: str
    registered_at: str


class RegistryEntry(TypedDict):
    """An unsigned registry snapshot entry, in the order `gate.protocol.attestation.registry_entry` writes it."""

    rulebook_registry_version: str
    schema_version: str
    rulebook_id: str
    version: str
    hash: str
    evaluator_version: str
    hash_algorithm: str
    canonicalization: str
    scope_hash: str
    registered_at: str
    trusted_adapter_dependency: NotRequired[dict[str, str]]  # {adapter_id, version, manifest_hash}


class RegistryAttestation(TypedDict):
    """An entry's `registry_attestation`: the hash of the entry without it, signed or not."""

    registry_attestation_version: str
    status: str
    attestation_hash: str
    key_id: str | None
    signature_algorithm: str
    signature: str | None


class SignedRegistryEntry(RegistryEntry):
    """A registry entry with its attestation (`sign_registry_entry`): the record's `rulebook_registry`
    as the gate writes it, and the snapshot's stored entry."""

    registry_attestation: RegistryAttestation


class RuntimeBinding(TypedDict):
    """`runtime_binding`: what decided. `adapter_authority` only in adapter mode."""

    production_core: str
    binding_mode: str
    verdict_authority: str
    customer_supplied_code: str
    adapter_authority: NotRequired[str]


class RulebookReference(TypedDict):
    """`rulebook`: which rulebook decided (its id and version as the rulebook states them)."""

    schema_version: Any
    id: Any
    version: Any
    hash: str


class AttestationOutcome(TypedDict):
    """The attested `outcome`: the members a verifier compares with the record's top level."""

    status: str
    verdict: str
    application_verdict: str
    action: str
    reason_code: str
    matched_rule_id: str | None


class TrustedAdapter(TypedDict):
    """`trusted_adapter`: which adapter ran, on what, with what result (reference facts §3: these
    eleven members, written by `gate.adapters.AdapterRegistry.run`; the verifier holds a record's
    block to exactly them)."""

    manifest_version: str
    adapter_id: str
    version: str
    implementation_revision: str
    implementation_hash: str
    manifest_hash: str
    input_hash: str
    output_hash: str
    execution_isolation: str
    capability_enforcement: str
    execution_timeout_ms: int


class AttestationBundle(TypedDict):
    """What a rulebook attestation attests: the engine, the rulebook, the facts' hash, the
    outcome, the runtime binding and (null in direct mode) the trusted adapter."""

    engine: str
    evaluator_version: str
    rulebook: RulebookReference
    input_hash: str
    outcome: AttestationOutcome
    runtime_binding: RuntimeBinding
    trusted_adapter: TrustedAdapter | None


class AttestationSignature(TypedDict):
    """The attestation's `signature`: Ed25519 over the bundle hash, or its unsigned form (nulls)."""

    schema_version: str
    status: str
    algorithm: str
    signed_field: str
    key_id: str | None
    public_key_pem: str | None
    signature: str | None


class RulebookAttestation(TypedDict):
    """`rulebook_attestation`: the bundle, its hash and the signature over that hash."""

    schema_version: str
    bundle_hash: str
    bundle: AttestationBundle
    signature: AttestationSignature


class RulebookContract(TypedDict):
    """`rulebook_contract`: the rulebook schema and the evaluator the record was made under."""

    schema_version: str
    schema_url: str
    schema_hash: str
    evaluator_version: str


class EvidenceSource(TypedDict):
    """One `evidence_manifest` source: the rule (or the input schema, or the default outcome) of
    which rulebook the evidence came from."""

    id: str
    type: str
    rulebook_id: Any
    rulebook_version: Any
    rulebook_hash: str


class EvidenceManifest(TypedDict):
    """`evidence_manifest`: the evidence codes and the rulebook source each came from."""

    codes: list[str]
    sources: list[EvidenceSource]


class PolicyBundle(TypedDict):
    """`policy_bundle`: the rulebook as the policy the record was decided under."""

    id: Any
    version: Any
    hash: str
    hash_algorithm: str
    canonicalization: str
    source: str


class IntegritySignature(TypedDict):
    """`integrity.signature`: which key signed the receipt (Ed25519 adds its fingerprint)."""

    algorithm: str
    key_id: str
    public_key_fingerprint: NotRequired[str]


class Integrity(TypedDict):
    """`integrity`: the record's hashes and URLs repeated, and the receipt signature's key.
    `seal_record` copies the members the record states (null for one it lacks)."""

    canonicalization: str
    hash_algorithm: str
    decision_protocol_version: str | None
    input_hash: str | None
    output_hash: str | None
    policy_hash: str | None
    policy_bundle_hash: NotRequired[str]
    record_hash: str
    receipt_hash: str
    replay_url: str | None
    verify_url: str | None
    signature: NotRequired[IntegritySignature]


class AuditChainMember(TypedDict):
    """`audit_chain`: the record's link in its caller's chain (`gate.chain.links.record_audit_chain`)."""

    chain_id: str
    chain_position: int
    leaf_hash: str
    link_hash: str
    merkle_root: str
    entry_type: str


class OutcomeMembers(TypedDict):
    """The record's first members: protocol versions, then what the evaluation decided and how."""

    decision_protocol_version: str
    decision_record_version: str
    status: str
    missing_fields: NotRequired[list[str]]
    invalid_fields: NotRequired[list[str]]
    c: CompactVerdict
    v: str
    verdict: Verdict
    application_verdict: str
    reason_code: str
    matched_rule_id: str | None
    engine: str
    evaluator_version: str
    evaluation: EvaluationTrace


class LineageMembers(TypedDict):
    """The rulebook, its contract, the runtime binding, the registry entry, the attestation and
    (adapter mode) the adapter lineage. The registry entry and the adapter's members are copied
    as the caller gives them; the adapter's facts are the adapter's own JSON."""

    rulebook: RulebookReference
    rulebook_contract: RulebookContract
    runtime_binding: RuntimeBinding
    rulebook_registry: NotRequired[SignedRegistryEntry]
    rulebook_attestation: RulebookAttestation
    trusted_adapter: NotRequired[TrustedAdapter]
    adapter_facts: NotRequired[dict[str, JsonValue]]


class IdentityMembers(TypedDict):
    """`request_id`, `decision_id`, and `idempotency_key` when one was supplied."""

    request_id: str
    decision_id: str
    idempotency_key: NotRequired[str]


class PolicyMembers(TypedDict):
    """Evidence and its manifest, the action and its binding, the rulebook as the policy, the input hash."""

    evidence: list[str]
    evidence_manifest: EvidenceManifest
    action: str
    action_binding: dict[str, str]
    policy_id: Any
    policy_version: Any
    policy_hash: str
    source_hash: str
    policy_bundle: PolicyBundle
    policy_bundle_hash: str
    input_hash: str


class UnsealedRecord(OutcomeMembers, LineageMembers, IdentityMembers, PolicyMembers):
    """A rulebook-mode record as `build_rulebook_record` writes it before sealing: the members of
    each step in record order, then the output hash, the URLs and the time."""

    output_hash: str
    replay_url: str
    verify_url: str
    decision_url: str
    created_at: str


class RecordMembers(UnsealedRecord):
    """A sealed rulebook-mode Decision Record (the `full` view), member by member.

    Required members are those `build_rulebook_record` always writes; the others appear when
    they apply (needs_input fields, idempotency key, adapter lineage, receipt signature) or are
    added after sealing (confidence, audit chain, release arm). The adapter's facts, which the
    record only carries through, stay a JSON object.
    """

    record_hash: str
    receipt_hash: str
    receipt_key_id: NotRequired[str]
    receipt_signature: NotRequired[str]
    receipt_signature_algorithm: NotRequired[str]
    receipt_public_key_fingerprint: NotRequired[str]
    integrity: Integrity
    decision_confidence: NotRequired[DecisionConfidence]
    confidence_hash: NotRequired[str]
    confidence_signature: NotRequired[str]
    audit_chain: NotRequired[AuditChainMember]
    audit_chain_signature: NotRequired[str]
    release_arm: NotRequired[ReleaseArm]  # decide by reference
    release_arm_signature: NotRequired[str]


DECISION_RECORD_REQUIRED: frozenset[str] = RecordMembers.__required_keys__
DECISION_RECORD_MEMBERS: frozenset[str] = RecordMembers.__required_keys__ | RecordMembers.__optional_keys__


@dataclass(frozen=True, slots=True, kw_only=True)
class RulebookRecordInputs:
    """What the decide pipeline (and historical replay) hands `build_rulebook_record`.

    Identity: `decision_id`, `request_id`, `idempotency_key`, `created_at`. Request: `input_hash`
    (of the request body), `facts` (what the rulebook evaluated), `context` (for the action
    binding). Rulebook lineage: `rulebook`, `rulebook_hash`, `rulebook_registry`, `schema_url`,
    `schema_hash`, `engine`. Outcome: `evaluation`. Binding: `binding_mode` and, in adapter
    mode, `trusted_adapter` and `adapter_facts`. `stored_attestation` is for replay only.
    The builder checks and trims these (see its docstring); the keys that sign are not inputs.
    """

    decision_id: str
    request_id: str
    idempotency_key: str | None
    created_at: str
    input_hash: str
    facts: Mapping[str, Any]
    rulebook: Mapping[str, Any]
    rulebook_hash: str
    evaluation: Evaluation
    binding_mode: str
    rulebook_registry: Mapping[str, Any] | None
    schema_url: str
    schema_hash: str
    context: Mapping[str, Any] | None = None
    trusted_adapter: TrustedAdapter | None = None
    adapter_facts: Mapping[str, Any] | None = None
    engine: str = ENGINE
    stored_attestation: Mapping[str, Any] | None = None
