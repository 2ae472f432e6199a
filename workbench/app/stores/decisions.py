"""The Decisions page's reads: a page of the dataset's decisions, and one stored decision with
its receipts, inclusion proof and a fresh verification (the API's bodies)."""

from __future__ import annotations

import json
from typing import TypedDict

import polars as pl

from gate.chain.links import chain_id_for
from gate.services.chains import inclusion_for
from gate.services.lifecycle import KINDS
from gate.services.verification import StoredVerification, verify_stored_decision
from gate.strict_json import JsonValue
from workbench.app.stores.shared import StoreShared
from workbench.dataset.convert import facts_of
from workbench.dataset.load import scan_table
from workbench.engines.common import latest_outcomes


class StoredResult(TypedDict):
    """What a stored decision's record says it decided, and under which rulebook version."""

    verdict: str | None
    application_verdict: str | None
    reason_code: str | None
    matched_rule_id: str | None
    rulebook_version: str | None


class StoredEvaluation(TypedDict):
    """A stored decision's facts and its stored result (`DecisionReads.stored_evaluation`)."""

    decision_id: str
    facts: dict[str, JsonValue]  # the caller's facts, as the rulebook saw them
    stored: StoredResult


class DecisionReads:
    """The Decisions page's reads over the one `WorkbenchStore` (`StoreShared`)."""

    def __init__(self, store: StoreShared) -> None:
        self.store = store

    def decision_page(self, scope: str, *, policy_id: str | None = None, verdict: str | None = None,
                      rule: str | None = None, id_prefix: str | None = None, offset: int = 0,
                      limit: int = 25) -> tuple[pl.DataFrame, int]:
        """One page of a scope's decisions from the dataset, newest first, each with its latest
        outcome status; and the number of decisions the filters match."""
        opened = self.store.opened()
        manifest = None if opened is None else opened.manifest
        decisions = scan_table(self.store.dataset_dir, "decisions", [scope], manifest)
        if policy_id:
            decisions = decisions.filter(pl.col("policy_id") == policy_id)
        if verdict:
            decisions = decisions.filter(pl.col("verdict") == verdict)
        if rule:
            decisions = decisions.filter(pl.col("matched_rule_id") == rule)
        if id_prefix:
            decisions = decisions.filter(pl.col("decision_id").str.starts_with(id_prefix))
        total = decisions.select(pl.len()).collect().item()
        newest_first = (["created_at", "decision_id"], True)
        # A join does not keep the left frame's order (Polars' default): sort the page again after it.
        page = (decisions.sort(newest_first[0], descending=newest_first[1]).slice(offset, limit)
                .join(latest_outcomes(scan_table(self.store.dataset_dir, "outcomes", [scope], manifest)),
                      on="decision_id", how="left")
                .sort(newest_first[0], descending=newest_first[1])
                .select("decision_id", "created_at", "policy_id", "policy_version", "verdict",
                        "matched_rule_id", "reason_code", pl.col("status").alias("latest_outcome"))
                .collect())
        return page, total

    def decision_detail(self, scope: str, decision_id: str) -> dict[str, JsonValue] | None:
        """The stored record with its receipts, its chain inclusion proof and a fresh
        verification, or None when the decision is not in `scope`."""
        stored = self.store.ledger.decision(scope, decision_id)
        if stored is None:
            return None
        record = json.loads(stored.record_json)
        request = json.loads(stored.request_json)
        receipts = {}
        for name, kind in KINDS.items():
            items, total = self.store.lifecycle.all_for(kind, decision_id, 100)
            receipts[name] = {"items": items, "total": total}
        proof = inclusion_for(self.store.audit, scope, chain_id_for(scope), decision_id, None)
        return {
            "record": record,
            "request": request,
            "facts": facts_of(request, record) or {},
            "receipts": receipts,
            "inclusion": proof,
            "verification": verify_stored_decision(self.store.ledger, self.store.lifecycle, self.store.signing, stored),
        }

    def verify(self, scope: str, decision_id: str) -> StoredVerification | None:
        """A fresh hosted verification (the API's `GET /api/decision/{id}/verify` body)."""
        stored = self.store.ledger.decision(scope, decision_id)
        if stored is None:
            return None
        return verify_stored_decision(self.store.ledger, self.store.lifecycle, self.store.signing, stored)

    def stored_evaluation(self, scope: str, decision_id: str) -> StoredEvaluation | None:
        """A stored decision's facts (what its rulebook saw) and its stored result, or None
        when the decision is not in `scope`."""
        stored = self.store.ledger.decision(scope, decision_id)
        if stored is None:
            return None
        record = json.loads(stored.record_json)
        facts = facts_of(json.loads(stored.request_json), record)
        return {
            "decision_id": decision_id,
            "facts": facts if facts is not None else {},
            "stored": {"verdict": record.get("verdict"), "application_verdict": record.get("application_verdict"),
                       "reason_code": record.get("reason_code"), "matched_rule_id": record.get("matched_rule_id"),
                       "rulebook_version": (record.get("rulebook") or {}).get("version")},
        }
