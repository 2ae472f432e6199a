"""Every versioned label and wire string of the contract, defined once.

Names follow the spec (`../shared/spec/decision-gate-spec.md`, "Versioning") and the
reference facts. Changing any value here changes hashes of new records: treat as frozen.
"""

from __future__ import annotations

from typing import Literal, TypeGuard, get_args

INTERFACE_VERSION = "1.13.0"

# Canonicalisation and hashing.
CANONICALIZATION = "json.sort_deep.v1"
HASH_ALGORITHM = "sha256"

# Artifact versions.
DECISION_PROTOCOL_VERSION = "decision_protocol_v1"
DECISION_RECORD_VERSION = "decision_record_v1"
DECISION_PACKET_VERSION = "decision_packet_v1"
RULEBOOK_SCHEMA_VERSION = "rulebook_v1"
DECISION_EXECUTION_VERSION = "decision_execution_v1"
DECISION_OUTCOME_VERSION = "decision_outcome_v1"
DECISION_CRM_SYNC_VERSION = "decision_crm_sync_v1"
DECISION_CONFIDENCE_VERSION = "decision_confidence_v1"
DECISION_COUNTERFACTUALS_VERSION = "decision_counterfactuals_v1"
RULEBOOK_REGISTRY_VERSION = "decision_rulebook_registry_v1"
REGISTRY_ATTESTATION_VERSION = "decision_registry_attestation_v1"
APPLICATION_BINDING_CONTRACT = "svc_application_binding_v1"
COMPATIBILITY_POLICY_VERSION = "compatibility_policy_v1"
GOLDEN_REPLAY_CORPUS_VERSION = "rulebook_v1_golden_replay_v1"
HISTORICAL_REPLAY_LABEL = "historical_rulebook_replay_v1"
MIGRATION_MANIFEST_VERSION = "rulebook_migration_v1"
RULEBOOK_ATTESTATION_VERSION = "rulebook_attestation_v1"
RULEBOOK_ATTESTATION_SIGNATURE_VERSION = "rulebook_attestation_signature_v1"
DECISION_CHAIN_VERSION = "decision_chain_v1"
CHAIN_MERKLE_STRATEGY = "rolling_sha256_pair_v1"
RECEIPT_KEY_REGISTRY_VERSION = "decision_receipt_key_registry_v1"
VERIFICATION_RESULT_VERSION = "decision_verification_v1"

# Evaluator. `engine` equals the evaluator version, as in the reference's conformance
# responses (issue 8, item 8), in the record and in the rulebook attestation bundle.
EVALUATOR_VERSION = "svc_rulebook_v1"
ENGINE = EVALUATOR_VERSION

# Runtime binding.
PRODUCTION_CORE = "hybrid_declarative_rulebook_with_trusted_adapters"
BINDING_DIRECT = "direct_declarative_rulebook"
BINDING_ADAPTER = "trusted_adapter_facts_then_declarative_rulebook"
SUPPORTED_BINDING_MODES = (BINDING_DIRECT, BINDING_ADAPTER)
VERDICT_AUTHORITY = "declarative_rulebook"
CUSTOMER_SUPPLIED_CODE = "rejected"
ADAPTER_AUTHORITY = "facts_only"

# Trusted adapters (gate/adapters, docs/adapters.md).
ADAPTER_MANIFEST_VERSION = "trusted_adapter_manifest_v1"
ADAPTER_REGISTRY_VERSION = "trusted_adapter_registry_v1"
ADAPTER_EXECUTION_ISOLATION = "one_shot_worker_process"
ADAPTER_CAPABILITY_ENFORCEMENT = "audit_hook_deny_network_file_write_subprocess"
ADAPTER_EXECUTION_TIMEOUT_MS = 1000
ADAPTER_ENTRY_POINT_GROUP = "decision_gate.adapters"

# Modes.
MODE_RULEBOOK = "rulebook"
LEGACY_MODES = ("single", "multi", "runtime")

# Verdicts: a rulebook outcome's `decision` and a record's `verdict`. Typed as a `Literal` (plain
# `str` at run time), so a verdict that reaches a record is the very text the canonical form hashes.
Verdict = Literal["yes", "no", "review"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
# `c`, the compact verdict: a review is unclear, and so is every error (never an approval).
CompactVerdict = Literal["yes", "no", "unclear"]
COMPACT_UNCLEAR: CompactVerdict = "unclear"
COMPACT_FOR_VERDICT: dict[Verdict, CompactVerdict] = {"yes": "yes", "no": "no", "review": COMPACT_UNCLEAR}


def is_verdict(value: object) -> TypeGuard[Verdict]:
    """Whether `value` is one of VERDICTS (what a rulebook's outcome and a record may state)."""
    return value in VERDICTS

# needs_input outcome (reference facts §2).
NEEDS_INPUT_STATUS = "needs_input"
NEEDS_INPUT_VERDICT = "NEEDS_INPUT"
NEEDS_INPUT_ACTION = "collect_required_input"
NEEDS_INPUT_REASON = "INPUT_SCHEMA_FAILED"

# Response views.
VIEW_MINIMAL = "minimal"
VIEW_STANDARD = "standard"
VIEW_FULL = "full"
VIEWS = (VIEW_MINIMAL, VIEW_STANDARD, VIEW_FULL)
DEFAULT_VIEW = VIEW_FULL

# Request fields that only a response may carry (spec, Decision Request rule 2), in the
# reference's fixed reporting order.
RESPONSE_ONLY_FIELDS = (
    "runtime_binding",
    "trusted_adapter",
    "adapter_facts",
    "rulebook_attestation",
    "decision_contract",
    "application_verdict",
    "action",
)

# Signatures.
SIG_ED25519 = "ed25519"
SIG_HMAC_SHA256 = "hmac-sha256"
ATTESTATION_SIGNATURE_ALGORITHM = "Ed25519"
SIGNED_FIELD_BUNDLE_HASH = "bundle_hash"

# Public schema.
RULEBOOK_SCHEMA_FILE = "rulebook-v1.schema.json"
RULEBOOK_SCHEMA_PATH = "/schemas/" + RULEBOOK_SCHEMA_FILE

# JSON safety limits (our decision: reject, never round; reference facts §1).
MAX_SAFE_INTEGER = 2**53 - 1

# Audit chain entries and signed Merkle checkpoints (gate/chain/links.py, gate/chain/merkle.py).
CHAIN_ENTRY_TYPE_DECISION = "decision"
CHAIN_CHECKPOINT_VERSION = "decision_chain_checkpoint_v1"
CHAIN_TREE_ALGORITHM = "rfc6962_sha256"

# Held actions (issue 43, docs/holds.md): a hold's states, as `hold_event_v1` states its outcome
# (gate.holds.events holds the same words; tests/workbench/test_hold_export.py keeps them equal).
# The analytics (the export, the hold report's engine) read them here.
HoldState = Literal["open", "approved", "denied", "expired"]
HOLD_OPEN: HoldState = "open"
HOLD_APPROVED: HoldState = "approved"
HOLD_DENIED: HoldState = "denied"
HOLD_EXPIRED: HoldState = "expired"
HOLD_STATES: tuple[HoldState, ...] = get_args(HoldState)
