"""Shared builders for the signing, record and verification tests (imported by the tests).

Records are built with `gate.protocol.records.build_rulebook_record` from a hand-made `Evaluation`, so
these tests do not depend on the evaluator. Keys use fixed seeds: results are reproducible.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # the package is not installed in the venv
    sys.path.insert(0, str(ROOT))

from gate import vocabulary as C  # noqa: E402
from gate.keys.signing import (  # noqa: E402
    Ed25519Key,
    Ed25519ReceiptSigner,
    HmacKey,
    HmacReceiptSigner,
)
from gate.protocol.attestation import registry_entry, sign_registry_entry  # noqa: E402
from gate.protocol.canonical import sha256_hex  # noqa: E402
from gate.protocol.evaluation import Evaluation  # noqa: E402
from gate.protocol.records import RulebookRecordInputs, build_rulebook_record  # noqa: E402

VECTORS = Path(__file__).resolve().parent / "vectors"
HMAC_SECRET = b"decide_conformance_hmac_secret_v1"
HMAC_KEY_ID = "decide_conformance_hmac_v1"

SEED_A = bytes(range(32))
SEED_B = bytes(range(100, 132))

RULEBOOK = {
    "schema_version": "rulebook_v1",
    "rulebook_id": "pricing_exception",
    "version": "2026.05.1",
    "input_schema": {
        "required": ["discount_percent"],
        "properties": {"discount_percent": {"type": "number"}},
    },
    "rules": [
        {
            "rule_id": "small_discount",
            "priority": 10,
            "condition": {"field": "discount_percent", "operator": "lte", "value": 20},
            "outcome": {"decision": "yes", "verdict": "APPROVE", "action": "apply_discount",
                        "reason_code": "WITHIN_DISCOUNT_LIMIT"},
        }
    ],
    "default_outcome": {"decision": "review", "verdict": "REVIEW", "action": "route_to_owner",
                        "reason_code": "OUTSIDE_DISCOUNT_LIMIT"},
}
FACTS = {"discount_percent": 15, "account_tier": "annual"}
CONTEXT = {
    "workflow": "billing_discount_gate",
    "source_record_id": "sub_1042",
    "requested_action": "apply_discount",
    "actor": "user_finance_ops_17",
    "target_system": "billing",
    "target_object_id": "sub_1042",
    "mutation": "discount.create",
    "inputs": FACTS,
}
REQUEST = {"mode": "rulebook", "rulebook": RULEBOOK, "context": CONTEXT}
CREATED_AT = "2026-05-21T00:00:00.000Z"
SCHEMA_URL = "/schemas/rulebook-v1.schema.json"
SCHEMA_HASH = "5" * 64
ADAPTER = {
    "manifest_version": "trusted_adapter_manifest_v1",
    "adapter_id": "crm_discount_facts",
    "version": "1.0.0",
    "implementation_revision": "r1",
    "implementation_hash": "1" * 64,
    "manifest_hash": "2" * 64,
    "input_hash": "3" * 64,
    "output_hash": sha256_hex({**FACTS, "derived_margin_ok": True}),
    "execution_isolation": "one_shot_worker",
    "capability_enforcement": "deny_all",
    "execution_timeout_ms": 1000,
}


def load_vector(name: str):
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


def ok_evaluation() -> Evaluation:
    return Evaluation(
        status="ok",
        decision="yes",
        application_verdict="APPROVE",
        action="apply_discount",
        reason_code="WITHIN_DISCOUNT_LIMIT",
        matched_rule_id="small_discount",
        matched=True,
        checks=({"rule_id": "small_discount", "field": "discount_percent", "operator": "lte", "passed": True},),
    )


def default_evaluation() -> Evaluation:
    return Evaluation(
        status="ok",
        decision="review",
        application_verdict="REVIEW",
        action="route_to_owner",
        reason_code="OUTSIDE_DISCOUNT_LIMIT",
        matched_rule_id=None,
        matched=False,
        checks=({"rule_id": "small_discount", "field": "discount_percent", "operator": "lte", "passed": False},),
    )


def needs_input_evaluation() -> Evaluation:
    return Evaluation(
        status=C.NEEDS_INPUT_STATUS,
        decision="review",
        application_verdict=C.NEEDS_INPUT_VERDICT,
        action=C.NEEDS_INPUT_ACTION,
        reason_code=C.NEEDS_INPUT_REASON,
        matched_rule_id=None,
        matched=False,
        checks=(),
        missing_fields=("discount_percent",),
        invalid_fields=("account_tier",),
    )


def key_a() -> Ed25519Key:
    return Ed25519Key.from_seed(SEED_A)


def key_b() -> Ed25519Key:
    return Ed25519Key.from_seed(SEED_B)


def hmac_key() -> HmacKey:
    return HmacKey(HMAC_KEY_ID, HMAC_SECRET)


def make_record(
    *,
    signer: str | None = "ed25519",
    key: Ed25519Key | None = None,
    evaluation: Evaluation | None = None,
    adapter: bool = False,
    attest: bool = True,
    idempotency_key: str | None = "idem:sub_1042:discount_15",
    **overrides,
) -> dict:
    """A sealed rulebook record. `signer` is "ed25519", "hmac" or None."""
    key = key or key_a()
    rulebook_hash = sha256_hex(RULEBOOK)
    registry = sign_registry_entry(
        registry_entry(
            rulebook_id=RULEBOOK["rulebook_id"],
            version=RULEBOOK["version"],
            rulebook_hash=rulebook_hash,
            scope_hash="4" * 64,
            registered_at=CREATED_AT,
            adapter_dependency={k: ADAPTER[k] for k in ("adapter_id", "version", "manifest_hash")} if adapter else None,
        ),
        key if attest else None,
    )
    receipt_signer = {
        "ed25519": lambda: Ed25519ReceiptSigner(key),
        "hmac": lambda: HmacReceiptSigner(hmac_key()),
        None: lambda: None,
    }[signer]()
    kwargs = {
        "decision_id": "dec_test_0001",
        "request_id": "req_test_0001",
        "idempotency_key": idempotency_key,
        "created_at": CREATED_AT,
        "input_hash": sha256_hex(REQUEST),
        "facts": {**FACTS, "derived_margin_ok": True} if adapter else FACTS,
        "rulebook": RULEBOOK,
        "rulebook_hash": rulebook_hash,
        "evaluation": evaluation or ok_evaluation(),
        "binding_mode": C.BINDING_ADAPTER if adapter else C.BINDING_DIRECT,
        "rulebook_registry": registry,
        "schema_url": SCHEMA_URL,
        "schema_hash": SCHEMA_HASH,
        "context": {k: v for k, v in CONTEXT.items() if k != "inputs"} if adapter else CONTEXT,
        "attestation_key": key if attest else None,
        "receipt_signer": receipt_signer,
        "trusted_adapter": ADAPTER if adapter else None,
        "adapter_facts": {**FACTS, "derived_margin_ok": True} if adapter else None,
    }
    kwargs.update(overrides)
    signing = {name: kwargs.pop(name) for name in ("attestation_key", "receipt_signer")}
    return build_rulebook_record(RulebookRecordInputs(**kwargs), **signing)
