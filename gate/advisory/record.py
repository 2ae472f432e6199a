"""The advisory Decision Record: built from the votes, hashed and sealed like a binding one.

Pure: no I/O, clock or randomness (time, ids and the signer are passed in).

How an advisory record reads (docs/advisory.md, docs/notes.md "Advisory c/verdict"):

| advisors' combined opinion | `advisory_verdict` | `v` | `verdict` | `c` | `action` |
|---|---|---|---|---|---|
| yes | yes | approved | review | unclear | hold_for_binding_decision |
| no | no | denied | no | no | block_action |
| review | review | review | review | unclear | hold_for_owner_review |

So no reader of `c` or `verdict` alone can take an advisory approval for a production one. The
contract members `decision_contract: {authority: "advisory_only", production_verdict: false}` and
`production_binding_required: true` are on every advisory record.

Hashes: `record_hash`, `receipt_hash` and the receipt signature exactly as for every record
(`gate.protocol.records.seal_record`). The members the reference's envelope leaves out (`c`, `v`,
`advisory_verdict`, `mode`, the contract and the `advisory` block with every vote) are bound by
``output_hash = sha256(canonical({status, mode, c, v, verdict, advisory_verdict, action, evidence,
decision_contract, production_binding_required, advisory}))``, which is in the envelope and
the receipt; `gate.verify` recomputes it. The reading table, the contract, the record's members and
that hash are the record's wire shape, shared with the verifier: `gate.protocol.advisory_record`.
`policy_hash` is the hash of the advisor panel (advisory
version, mode, combining rule and each advisor's identity), so a replay sees a changed panel.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from gate.advisory.advisors import RULES, Combined, Vote
from gate.keys.signing import ReceiptSigner
from gate.protocol.advisory_record import ADVISORY_CONTRACT, READING, advisory_output_hash
from gate.protocol.canonical import clone, sha256_hex
from gate.protocol.records import (
    MAX_ACTION,
    MAX_EVIDENCE_CHARS,
    MAX_EVIDENCE_ITEMS,
    MAX_IDEMPOTENCY_KEY,
    MAX_MANIFEST_SOURCES,
    action_binding_from_context,
    decision_urls,
    limit_text,
    seal_record,
)
from gate.protocol.types import IdentityMembers
from gate.strict_json import JsonValue
from gate.vocabulary import DECISION_PROTOCOL_VERSION, DECISION_RECORD_VERSION

ADVISORY_VERSION = "decision_advisory_v1"
ADVISORY_EVIDENCE = "ADVISORY_ONLY"
POLICY_PREFIX = "advisory."
GENERAL_POLICY = POLICY_PREFIX + "general"


class PanelPolicy(TypedDict):
    """The advisory 'policy': the mode, the combining rule and every advisor's identity."""

    advisory_version: str
    mode: str
    combining_rule: str
    advisors: list[dict[str, str]]  # each advisor's identity (`Advisor.identity`)


class CombiningRule(TypedDict):
    """`advisory.combining_rule`: the rule's id and its description (`RULES`)."""

    rule_id: str
    description: str


class AdvisoryBlock(TypedDict):
    """The record's `advisory` member, in the order `advisory_block` writes it."""

    advisory_version: str
    mode: str
    question: str
    policy_pattern: str | None
    advisors: list[dict[str, JsonValue]]
    combining_rule: CombiningRule
    tally: dict[str, int]
    combined_decision: str
    runtime_context_hash: NotRequired[str]


def panel_policy(mode: str, rule: str, identities: Sequence[Mapping[str, str]]) -> PanelPolicy:
    """The advisory 'policy': what `policy_hash` is the hash of."""
    return {"advisory_version": ADVISORY_VERSION, "mode": mode, "combining_rule": rule,
            "advisors": [dict(identity) for identity in identities]}


def _evidence(votes: Sequence[Vote]) -> list[str]:
    codes = [ADVISORY_EVIDENCE]
    for vote in votes:
        for code in vote.evidence:
            if code not in codes:
                codes.append(code)
    items = [limit_text(code, MAX_EVIDENCE_CHARS) for code in codes]
    return [item for item in items if item][:MAX_EVIDENCE_ITEMS]


class AdvisorySource(TypedDict):
    """One `evidence_manifest` source of an advisory record: a vote, with the pattern's rulebook
    lineage when the offline advisor judged it, and the model of a model advisor."""

    id: str
    type: str
    kind: str
    decision: str
    status: str
    pattern_id: NotRequired[str]
    rulebook_id: NotRequired[str]
    rulebook_version: NotRequired[str]
    rulebook_hash: NotRequired[str]
    model: NotRequired[str]


def _source(vote: Vote) -> AdvisorySource:
    source: AdvisorySource = {"id": vote.advisor_id, "type": "advisor_vote", "kind": vote.kind,
                              "decision": vote.decision, "status": vote.status}
    lineage = vote.details.get("policy_pattern")
    if isinstance(lineage, Mapping):
        source["pattern_id"] = lineage["pattern_id"]
        source["rulebook_id"] = lineage["rulebook_id"]
        source["rulebook_version"] = lineage["rulebook_version"]
        source["rulebook_hash"] = lineage["rulebook_hash"]
    if "model" in vote.details:
        source["model"] = vote.details["model"]
    return source


def advisory_block(mode: str, question: str, facts: Mapping[str, Any], pattern_id: str | None,
                   votes: Sequence[Vote], combined: Combined) -> AdvisoryBlock:
    """The record's `advisory` member: every vote, the combining rule, the tally and the outcome."""
    advisory: AdvisoryBlock = {
        "advisory_version": ADVISORY_VERSION,
        "mode": mode,
        "question": question,
        "policy_pattern": pattern_id,
        "advisors": [vote.to_record() for vote in votes],
        "combining_rule": {"rule_id": combined.rule, "description": RULES[combined.rule]},
        "tally": dict(combined.tally),
        "combined_decision": combined.decision,
    }
    if mode == "runtime":
        advisory["runtime_context_hash"] = sha256_hex(dict(facts))
    return advisory


def _reading(mode: str, combined: Combined, advisory: AdvisoryBlock) -> dict[str, object]:
    """The versions, the reading of the combined opinion (`READING`) and the contract members."""
    verdict, c, v, _action = READING[combined.decision]
    return {
        "decision_protocol_version": DECISION_PROTOCOL_VERSION,
        "decision_record_version": DECISION_RECORD_VERSION,
        "status": "ok",
        "mode": mode,
        "c": c,
        "v": v,
        "verdict": verdict,
        "advisory_verdict": combined.decision,
        "decision_contract": dict(ADVISORY_CONTRACT),
        "production_binding_required": True,
        "advisory": clone(advisory),
    }


def _identifiers(decision_id: str, request_id: str, idempotency_key: str | None) -> IdentityMembers:
    """`request_id`, `decision_id` and, when one was given, the (bounded) idempotency key."""
    members: IdentityMembers = {"request_id": request_id, "decision_id": decision_id}
    key = limit_text(idempotency_key, MAX_IDEMPOTENCY_KEY) if idempotency_key else ""
    if key:
        members["idempotency_key"] = key
    return members


def _evidence_and_policy(votes: Sequence[Vote], combined: Combined, context: Mapping[str, Any], *, mode: str,
                         policy_id: str, policy_version: str, identities: Sequence[Mapping[str, str]],
                         input_hash: str) -> dict[str, object]:
    """Evidence and its manifest, the action and its binding, and the panel as the policy."""
    evidence = _evidence(votes)
    return {
        "evidence": evidence,
        "evidence_manifest": {"codes": list(evidence),
                              "sources": [_source(vote) for vote in votes][:MAX_MANIFEST_SOURCES]},
        "action": limit_text(READING[combined.decision][3], MAX_ACTION),
        "action_binding": action_binding_from_context(context),
        "policy_id": policy_id,
        "policy_version": policy_version,
        "policy_hash": sha256_hex(panel_policy(mode, combined.rule, identities)),
        "input_hash": input_hash,
    }


def build_advisory_record(
    *,
    decision_id: str,
    request_id: str,
    idempotency_key: str | None,
    created_at: str,
    input_hash: str,
    mode: str,
    question: str,
    context: Mapping[str, Any],
    facts: Mapping[str, Any],
    pattern_id: str | None,
    policy_id: str,
    policy_version: str,
    identities: Sequence[Mapping[str, str]],
    votes: Sequence[Vote],
    combined: Combined,
    receipt_signer: ReceiptSigner | None = None,
) -> dict[str, Any]:
    """The sealed advisory record. Its members are added in the order the record is serialized."""
    record = _reading(mode, combined, advisory_block(mode, question, facts, pattern_id, votes, combined))
    record.update(_identifiers(decision_id, request_id, idempotency_key))
    record.update(_evidence_and_policy(votes, combined, context, mode=mode, policy_id=policy_id,
                                       policy_version=policy_version, identities=identities, input_hash=input_hash))
    record["output_hash"] = advisory_output_hash(record)
    urls = decision_urls(decision_id)
    record.update(replay_url=urls["replay_url"], verify_url=urls["verify_url"], decision_url=urls["decision_url"],
                  created_at=created_at)
    return seal_record(record, receipt_signer=receipt_signer)


__all__ = ["ADVISORY_EVIDENCE", "ADVISORY_VERSION", "GENERAL_POLICY", "POLICY_PREFIX", "build_advisory_record",
           "panel_policy"]
