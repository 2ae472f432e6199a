"""Realistic Decision Packets built from real parts, for the packet tests and the benchmark.

* The record: `gate.protocol.records.build_rulebook_record` over the sample pricing-exception rulebook,
  evaluated by the real compiled evaluator (`gate.rulebook.get_evaluator`), signed with Ed25519.
* Receipts: `gate.receipts` builders over that record.
* The chain: links from `gate.chain.links.new_link` (other decisions have synthetic hashes), the
  RFC 6962 node store from `gate.chain.merkle.CompactRange`, a checkpoint from `sign_checkpoint`.

Keys: `ACTIVE` (signs checkpoints and, by default, the record) and `RETIRED` (an older key of
the same registry). `anchors()` is the full registry; nothing here reads the clock.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gate import vocabulary as C
from gate.chain.links import new_link, record_audit_chain
from gate.chain.merkle import CompactRange, checkpoint_body, sign_checkpoint
from gate.chain.rowseal import receipt_head_payload
from gate.keys.signing import Ed25519Key, Ed25519ReceiptSigner
from gate.packets import (
    INTELLIGENCE_SECTIONS,
    ChainExcerpt,
    PacketOptions,
    build_packet,
    chain_window,
    report_hash,
)
from gate.protocol.attestation import registry_entry, sign_registry_entry
from gate.protocol.canonical import sha256_hex
from gate.protocol.decision_record import audit_chain_part
from gate.protocol.records import RulebookRecordInputs, build_rulebook_record
from gate.receipts import (
    build_crm_sync_record,
    build_execution_receipt,
    build_outcome_record,
)
from gate.rulebook import get_evaluator, schema_hash
from gate.verify import TrustAnchors

ROOT = Path(__file__).resolve().parents[2]
REQUEST = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text(encoding="utf-8"))
RULEBOOK = REQUEST["rulebook"]
ACTIVE = Ed25519Key.from_seed(bytes(range(200, 232)))
RETIRED = Ed25519Key.from_seed(bytes(range(150, 182)))
ATTACKER = Ed25519Key.from_seed(bytes(range(50, 82)))
CHAIN_ID = "chain_7f3a9c2e1b"
DECISION_ID = "dec_5c1e9a04b7d2f3e8a6c0b1d9"
T0 = datetime(2026, 11, 3, 9, 30, 0, tzinfo=UTC)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def at(seconds: float) -> str:
    return iso(T0 + timedelta(seconds=seconds))


def registry(keys=(ACTIVE, RETIRED)) -> list[dict]:
    """A receipt-key registry body's `keys`: the first key active, the others retired."""
    entries = []
    for index, key in enumerate(keys):
        entry = {"key_id": key.key_id, "algorithm": "ed25519", "public_key": key.public_key_pem,
                 "public_key_fingerprint": key.fingerprint, "status": "active" if index == 0 else "retired",
                 "not_before": "2026-01-01T00:00:00.000Z"}
        if index:
            entry["not_after"] = "2026-10-01T00:00:00.000Z"
        entries.append(entry)
    return entries


def anchors(keys=(ACTIVE, RETIRED)) -> TrustAnchors:
    return TrustAnchors.from_registry_entries(registry(keys))


def make_record(*, key: Ed25519Key = ACTIVE, decision_id: str = DECISION_ID, created_at: str | None = None) -> dict:
    """A sealed rulebook record from the real evaluator (no audit_chain member yet)."""
    created_at = created_at or at(0)
    rulebook_hash = sha256_hex(RULEBOOK)
    facts = REQUEST["context"]["inputs"]
    evaluation = get_evaluator(RULEBOOK, rulebook_hash).evaluate(facts)
    entry = sign_registry_entry(
        registry_entry(rulebook_id=RULEBOOK["rulebook_id"], version=RULEBOOK["version"],
                       rulebook_hash=rulebook_hash, scope_hash=hashlib.sha256(b"scope:acme").hexdigest(),
                       registered_at=created_at),
        key,
    )
    return build_rulebook_record(RulebookRecordInputs(
        decision_id=decision_id,
        request_id="req_8d2c41aa90e1",
        idempotency_key="idem:sub_1042:discount_15",
        created_at=created_at,
        input_hash=sha256_hex(REQUEST),
        facts=facts,
        rulebook=RULEBOOK,
        rulebook_hash=rulebook_hash,
        evaluation=evaluation,
        binding_mode=C.BINDING_DIRECT,
        rulebook_registry=entry,
        schema_url=C.RULEBOOK_SCHEMA_PATH,
        schema_hash=schema_hash(),
        context=REQUEST["context"],
    ), attestation_key=key, receipt_signer=Ed25519ReceiptSigner(key))


def _hex(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


@dataclass
class Chain:
    """An in-memory chain: links by position, the node store and the compact range."""

    chain_id: str = CHAIN_ID
    links: list[dict] = field(default_factory=list)
    nodes: dict[tuple[int, int], str] = field(default_factory=dict)
    tree: CompactRange = field(default_factory=CompactRange)

    def append(self, *, decision_id: str, record_hash: str, receipt_hash: str, policy_id=None,
               policy_version=None, created_at: str) -> dict:
        head = self.links[-1] if self.links else None
        link = new_link(
            chain_id=self.chain_id, chain_position=len(self.links) + 1,
            previous_link_hash=head["link_hash"] if head else None,
            previous_merkle_root=head["merkle_root"] if head else None,
            decision_id=decision_id, record_hash=record_hash, receipt_hash=receipt_hash,
            policy_id=policy_id, policy_version=policy_version, created_at=created_at,
        )
        self.tree, completed = self.tree.append(link["leaf_hash"])
        for node in completed:
            self.nodes[(node.level, node.index)] = node.hash
        self.links.append(link)
        return link

    def filler(self, count: int, start_seconds: float = 0.0) -> None:
        for n in range(count):
            position = len(self.links) + 1
            self.append(decision_id=f"dec_filler_{position:06d}", record_hash=_hex(f"record {position}"),
                        receipt_hash=_hex(f"receipt {position}"), policy_id="pricing_exception",
                        policy_version=RULEBOOK["version"], created_at=at(start_seconds + n * 0.001))

    def get_node(self, level: int, index: int) -> str:
        return self.nodes[(level, index)]

    def excerpt(self, record_position: int, chain_limit: int, *, key: Ed25519Key = ACTIVE,
                checkpoint_at: str | None = None) -> ChainExcerpt:
        size = len(self.links)
        first, last = chain_window(record_position, size, chain_limit)
        head = self.links[-1]
        checkpoint = sign_checkpoint(
            checkpoint_body(self.chain_id, size, self.tree.root(), checkpoint_at or at(3600)), key)
        return ChainExcerpt.from_store(
            chain_id=self.chain_id, chain_size=size, head_link_hash=head["link_hash"],
            merkle_root=head["merkle_root"], record_position=record_position,
            links=[dict(link, scope="acme", link_json="{}") for link in self.links[first - 1:last]],
            get_node=self.get_node, checkpoint=checkpoint,
        )


def chained_record(chain: Chain, record: dict, signer=None) -> dict:
    """Append `record` to `chain` and give it its signed `audit_chain` member, as the service
    does (`signer` defaults to the Ed25519 key that signed the record's receipt)."""
    link = chain.append(decision_id=record["decision_id"], record_hash=record["record_hash"],
                        receipt_hash=record["receipt_hash"], policy_id=record.get("policy_id"),
                        policy_version=record.get("policy_version"), created_at=record["created_at"])
    if signer is None:
        key = next(k for k in (ACTIVE, RETIRED, ATTACKER) if k.key_id == record["receipt_key_id"])
        signer = Ed25519ReceiptSigner(key)
    unchained = {k: v for k, v in record.items() if k not in ("audit_chain", "audit_chain_signature")}
    return {**unchained, **audit_chain_part(record["decision_id"], record_audit_chain(link), signer)}


def executions(record: dict, count: int) -> list[dict]:
    """`count` execution receipts, newest first."""
    receipts = []
    for n in range(count):
        body = {
            "execution_status": "executed" if n % 4 else "queued",
            "decision_record_hash": record["record_hash"],
            "decision_receipt_hash": record["receipt_hash"],
            "action_taken": "apply_discount",
            "target_system": "billing",
            "target_object_id": "sub_1042",
            "mutation": "discount.create",
            "execution_id": f"job_{n:05d}",
            "executor": {"type": "worker", "id": "billing-worker-3"},
            "state_before_hash": "sha256:" + _hex(f"before {n}")[:32],
            "state_after_hash": "sha256:" + _hex(f"after {n}")[:32],
            "evidence_refs": [f"log:{n:05d}"],
            "executed_at": at(60 + n),
        }
        receipts.append(build_execution_receipt(
            body=body, record=record, execution_receipt_id=f"exr_{n:06d}",
            idempotency_key=f"exec-{n:05d}", reported_at=at(61 + n)))
    return receipts[::-1]


def outcomes(record: dict, count: int, follows: dict | None = None) -> list[dict]:
    """`count` Outcome Records, newest first; with `follows` (an execution receipt), the newest
    names it as the execution it follows (issue 41, item 7)."""
    items = []
    for n in range(count):
        body = {"outcome_status": ("pending", "succeeded", "review")[n % 3], "action_executed": True,
                "action_taken": "apply_discount", "target_system": "billing",
                "observed_metrics": {"revenue_delta": 120.5 + n, "discount_percent": 15, "churned": 0}}
        if follows is not None and n == count - 1:
            body.update(execution_receipt_id=follows["execution_receipt_id"], execution_hash=follows["execution_hash"])
        items.append(build_outcome_record(body=body, record=record, outcome_id=f"out_{n:04d}",
                                          idempotency_key=None, reported_at=at(900 + n),
                                          execution_lookup=lambda _id: follows))
    return items[::-1]


def crm_syncs(record: dict, count: int) -> list[dict]:
    items = []
    for n in range(count):
        body = {"sync_status": "written", "crm_provider": "hubspot", "crm_object_type": "deal",
                "crm_object_id": f"99127{n:02d}", "crm_record_url": f"https://app.hubspot.com/deals/99127{n:02d}",
                "field_mapping": {"verdict": "gate_verdict", "record_hash": "gate_record_hash"},
                "decision_verdict": record["verdict"], "policy_id": record["policy_id"]}
        items.append(build_crm_sync_record(body=body, record=record, sync_id=f"sync_{n:04d}",
                                           idempotency_key=f"crm-{n}", reported_at=at(1200 + n)))
    return items[::-1]


def seal(kind: str, body: dict) -> dict:
    """A report as its endpoint serves it: version label first, `<kind>_hash` last."""
    spec = next(section for section in INTELLIGENCE_SECTIONS.values() if section.kind == kind)
    report = {spec.version_member: spec.version, **body}
    report[spec.hash_member] = report_hash(report, kind)
    return report


def intelligence_reports(record: dict) -> dict[str, dict]:
    """`policy_intelligence` sections: sealed reports of the record's policy (gate.protocol.report_envelopes)."""
    effectiveness = {"policy_id": record["policy_id"], "policy_version": record["policy_version"],
                     "effectiveness_score": 0.82, "confidence": "medium", "recommendation": "healthy",
                     "sample_size": 57, "based_on": {"outcomes": 57, "terminal": 49}}
    anomaly = {"policy_id": record["policy_id"], "anomaly_count": 1, "recommendation": "stable",
               "threshold": 0.35,
               "anomalies": [{"severity": "low", "anomaly_score": 0.41, "reasons": ["refund_rate_up"]}]}
    return {"effectiveness": seal("effectiveness", effectiveness), "anomalies": seal("anomaly", anomaly)}


def receipt_head(record: dict, count: int, key: Ed25519Key) -> dict:
    """A receipt head row as the gate stores it: the count and newest row hash, signed with the
    receipt key (gate.chain.rowseal.receipt_head_payload)."""
    head_row_hash = sha256_hex({"receipt_rows": count, "decision_id": record["decision_id"]})
    signature = Ed25519ReceiptSigner(key).sign_payload(
        receipt_head_payload(record["decision_id"], count, head_row_hash, key.key_id))
    return {"decision_id": record["decision_id"], "count": count, "head_row_hash": head_row_hash,
            "key_id": key.key_id, "signature": signature}


@dataclass
class Scenario:
    packet: dict
    record: dict
    chain: Chain
    original_input: Any
    parts: dict


def scenario(*, record_key: Ed25519Key = ACTIVE, checkpoint_key: Ed25519Key = ACTIVE,
             before: int = 24, after: int = 15, n_exec: int = 5, n_out: int = 3, n_crm: int = 2,
             include_chain: bool = True, include_input: bool = True, reports: bool = True,
             link_outcome: bool = False, **option_values) -> Scenario:
    """A packet of a record at position before+1 of a chain of before+1+after links; with
    `link_outcome`, the newest outcome names the newest execution receipt it follows.

    Defaults: execution_limit 3 (5 stored: truncated; CRM 2 of 3 allowed: complete),
    outcome_limit 2 (3 stored: truncated), chain_limit 20 (window 21..40, ending at the head).
    """
    option_values = {"execution_limit": 3, "outcome_limit": 2, "include_input": include_input,
                     "include_chain": include_chain, **option_values}
    options = PacketOptions(**option_values)
    chain = Chain()
    chain.filler(before, start_seconds=-100)
    record = chained_record(chain, make_record(key=record_key))
    chain.filler(after, start_seconds=30)
    stored_executions = executions(record, n_exec)
    parts = {"executions": stored_executions,
             "outcomes": outcomes(record, n_out, stored_executions[0] if link_outcome else None),
             "crm_syncs": crm_syncs(record, n_crm)}
    packet = build_packet(
        record=record, exported_at=at(7200), options=options,
        receipt_head=receipt_head(record, n_exec + n_out + n_crm, record_key),
        original_input=copy.deepcopy(REQUEST) if include_input else None,
        chain=chain.excerpt(before + 1, options.chain_limit, key=checkpoint_key) if include_chain else None,
        policy_intelligence=intelligence_reports(record) if reports else None,
        **parts,
    )
    return Scenario(packet, record, chain, REQUEST, parts)
