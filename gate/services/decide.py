"""Application services: the one place a use case is orchestrated in a transaction.

`DecisionService.decide` turns a request into a stored, signed Decision Record:
prepare (fail-closed checks) → input hash → idempotency fast path → compile/evaluate the
rulebook → bind the rulebook snapshot → build and sign the record → store it atomically with
its usage charge. The steps every decide shares (replay, signer check, seal, store) live in
`gate.services.pipeline`; the advisory modes (`gate.services.advisory`) use the same ones. The record is stored before it is returned; if the write fails nothing is
returned but an error, and nothing is approved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gate import vocabulary as C
from gate.adapters import AdapterRegistry, AdapterRun
from gate.advisory.request import is_advisory_body
from gate.chain.links import chain_id_for, scope_hash
from gate.clock import Clock, IdSource, RandomIds, SystemClock
from gate.errors import GateError, SnapshotRace
from gate.keys.config import LiveSigning, SigningSetup
from gate.keys.signing import ReceiptSigner
from gate.ledger import Ledger, StoredDecision, StoredSnapshot
from gate.ledger.confidence import Bucket
from gate.ledger.releases import ReleaseDecision
from gate.ledger.store import DecisionExtra
from gate.protocol.canonical import sha256_hex
from gate.protocol.decision_record import DecisionRecord
from gate.protocol.fact_limits import check_facts
from gate.protocol.records import RulebookRecordInputs, build_rulebook_record
from gate.protocol.requests import PreparedRequest, prepare_decision_request
from gate.rulebook import RulebookDocument, get_evaluator, schema_hash
from gate.rulebook.budget import check_evaluation_cost
from gate.services.advisory import AdvisoryService
from gate.services.holds import HoldOpener
from gate.services.pipeline import (
    CREATED,
    REPLAYED,
    Caller,
    Claim,
    DecideResult,
    DecisionPipeline,
    fingerprint,
)
from gate.services.release_routing import ReleaseRouter, Routed
from gate.services.snapshots import RulebookSnapshots


@dataclass(frozen=True, slots=True)
class Evaluated:
    """A prepared rulebook request with its evaluation, ready to be built into a record."""

    prepared: PreparedRequest
    rulebook: RulebookDocument  # the request's rulebook, validated (its evaluator's `document`)
    rulebook_hash: str
    evaluation: Any
    facts: dict[str, Any]
    adapter: AdapterRun | None
    routed: Routed | None = None  # a decide by reference: where the release sent it
    notices: tuple[tuple[str, str], ...] = ()  # response headers (a superseded inline version)


class DecisionService:
    """Decide and read decisions for authenticated callers."""

    def __init__(
        self,
        ledger: Ledger,
        signing: SigningSetup | LiveSigning,
        *,
        schema_url: str = C.RULEBOOK_SCHEMA_PATH,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        adapters: AdapterRegistry | None = None,
        confidence: bool = True,
        advisory: AdvisoryService | None = None,
        hold_opener: HoldOpener,
        snapshots: RulebookSnapshots,
        releases: ReleaseRouter | None = None,
    ) -> None:
        """Built by the composition root (`gate.services.root.decision_services`), which builds
        the rulebook `snapshots` and the `hold_opener` once. `releases`: the release service's router
        (`ReleaseService.router`), which routes decides by reference and runs shadows and canaries
        (docs/releases.md), built on the same `snapshots`; None: inline decides only."""
        self.ledger = ledger
        self.signing = signing
        self.schema_url = schema_url
        self.clock = clock or SystemClock()
        self.ids = ids or RandomIds()
        self.adapters = adapters or AdapterRegistry()
        self.confidence = confidence
        self.snapshots = snapshots
        self.advisory = advisory  # None: the advisory modes are 422 LEGACY_MODE_UNAVAILABLE
        self.pipeline = DecisionPipeline(ledger, signing, self.clock, self.ids, hold_opener)
        self.releases = releases

    # ------------------------------------------------------------------ decide

    def decide(
        self,
        caller: Caller,
        body: Any,
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
    ) -> DecideResult:
        if self.advisory is not None and is_advisory_body(body):  # the advisory legacy modes (gate/advisory/)
            return self.advisory.decide(self.pipeline, caller, body, idempotency_key=idempotency_key,
                                        request_id=request_id)
        routed = None
        if self.releases is not None and isinstance(body, dict) and "rulebook_ref" in body:
            # Decide by reference (docs/releases.md): the request an inline decide of the version
            # the scope's release picks would be; everything after is the inline path.
            body, routed = self.releases.route(caller, body, idempotency_key)
        prepared = prepare_decision_request(body)
        claim = Claim(caller, idempotency_key, fingerprint(prepared.request))
        replayed = self.pipeline.replay_known(claim)
        if replayed is not None:
            return replayed
        if prepared.adapter is not None:
            # Raises TRUSTED_ADAPTER_INVALID / _NOT_REGISTERED / _MANIFEST_MISMATCH: no adapter
            # runs unregistered or under another manifest than the caller pinned.
            self.adapters.resolve(prepared.adapter)
        rulebook_hash = sha256_hex(prepared.rulebook)
        evaluator = get_evaluator(prepared.rulebook, rulebook_hash)  # raises RULEBOOK_INVALID
        notices = (self.releases.check_inline(caller.scope, prepared.rulebook, rulebook_hash)
                   if self.releases is not None and routed is None else ())
        receipt_signer = self.pipeline.receipt_signer()
        adapter, facts = self._facts(prepared)
        # SECURITY: bounded evaluation work; 422 before evaluating (gate/rulebook/budget.py).
        check_evaluation_cost(evaluator.document, rulebook_hash, facts)
        evaluated = Evaluated(prepared, evaluator.document, rulebook_hash, evaluator.evaluate(facts), facts, adapter,
                              routed, notices)
        return self._store_evaluated(claim, evaluated, request_id, receipt_signer)

    def _facts(self, prepared: PreparedRequest) -> tuple[AdapterRun | None, dict[str, Any]]:
        """The facts to evaluate: a trusted adapter's output, else the request's own facts."""
        if prepared.adapter is None:
            return None, prepared.facts if prepared.facts is not None else {}
        # One-shot isolated worker; facts = schema-validated input plus derived output.
        adapter = self.adapters.run(prepared.adapter)
        check_facts(adapter.facts)  # the adapter's facts obey the same size limits
        return adapter, adapter.facts

    def _store_evaluated(self, claim: Claim, evaluated: Evaluated, request_id: str | None,
                         receipt_signer: ReceiptSigner | None) -> DecideResult:
        """Build, seal and store (`DecisionPipeline.store`: the winner's replay when a concurrent
        request won the key); one retry when a concurrent first binding of the rulebook won the
        snapshot race."""
        for attempt in range(2):
            try:
                return self._store_new(claim, evaluated, request_id, receipt_signer)
            except SnapshotRace:
                if attempt:
                    raise GateError("LEDGER_UNAVAILABLE", "rulebook snapshot registration raced twice") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _store_new(self, claim: Claim, evaluated: Evaluated, request_id: str | None,
                   receipt_signer: ReceiptSigner | None) -> DecideResult:
        prepared, adapter = evaluated.prepared, evaluated.adapter
        stamp = self.pipeline.stamp(claim, request_id)
        registry, snapshot_row = self.snapshots.registry_for(
            claim.caller.scope, evaluated.rulebook, evaluated.rulebook_hash, stamp.created_at,
            adapter.adapter.dependency() if adapter is not None else None)
        built = DecisionRecord.built(build_rulebook_record(RulebookRecordInputs(
            decision_id=stamp.decision_id,
            request_id=stamp.request_id,
            idempotency_key=stamp.idempotency_key,
            created_at=stamp.created_at,
            input_hash=stamp.input_hash,
            facts=evaluated.facts,
            rulebook=prepared.rulebook,
            rulebook_hash=evaluated.rulebook_hash,
            evaluation=evaluated.evaluation,
            binding_mode=prepared.binding_mode,
            rulebook_registry=registry,
            schema_url=self.schema_url,
            schema_hash=schema_hash(),
            context=prepared.context,
            trusted_adapter=adapter.trusted_adapter if adapter is not None else None,
            adapter_facts=adapter.adapter_facts if adapter is not None else None,
        ), attestation_key=self.signing.attestation_key(), receipt_signer=receipt_signer))
        record, extra = self._observe_release(claim.caller.scope, built, evaluated, receipt_signer)
        return self.pipeline.store(
            claim, record, rulebook_hash=evaluated.rulebook_hash, receipt_signer=receipt_signer,
            snapshot_row=snapshot_row, confidence=self._confidence_bucket(claim.caller.scope, record),
            extra=extra, facts=evaluated.facts, headers=evaluated.notices)

    def _observe_release(self, scope: str, record: DecisionRecord, evaluated: Evaluated,
                         receipt_signer: ReceiptSigner | None) -> tuple[DecisionRecord, list[DecisionExtra]]:
        """The record with, for a decide by reference, its signed `release_arm` member (outside
        record_hash), and the release row stored with the decision (arm, shadow result)."""
        if self.releases is None:
            return record, []
        observed = self.releases.observe(scope, record, evaluated.facts, evaluated.routed)
        if observed.arm_block is not None:
            record = record.with_release_arm(observed.arm_block, receipt_signer)
        return record, [ReleaseDecision(observed.row)] if observed.row is not None else []

    def _confidence_bucket(self, scope: str, record: DecisionRecord) -> Bucket | None:
        """Where `decision_confidence` comes from: the scope's outcome counters for this policy,
        verdict and action, read in the transaction that stores the decision (one indexed read;
        the record carries no block while the scope has no Outcome Record for the policy). The
        block is outside record_hash, so it is signed on its own (gate.protocol.confidence). None
        when decide-time confidence is off."""
        if not self.confidence:
            return None
        return Bucket(scope, record.policy_id, record.verdict, record.action, record.policy_version)

    def bound_snapshot(self, scope: str, rulebook_id: str, version: str) -> StoredSnapshot | None:
        """The bound snapshot for (scope, id, version) (`RulebookSnapshots.bound_snapshot`)."""
        return self.snapshots.bound_snapshot(scope, rulebook_id, version)

    def monthly_used(self, caller: Caller, result: DecideResult) -> int:
        """The key's records this month, as the decide left it: counted by the store of a new
        record, read from the ledger for a replay (which charges nothing)."""
        if result.monthly_used is not None:
            return result.monthly_used
        return self.ledger.monthly_usage(caller.key_id, result.record.created_at[:7])

    # ------------------------------------------------------------------ promotion

    def register_rulebook(self, scope: str, rulebook: object) -> tuple[dict[str, Any], bool]:
        """Promote a rulebook in `scope` (`RulebookSnapshots.register_rulebook`)."""
        return self.snapshots.register_rulebook(scope, rulebook)

    # ------------------------------------------------------------------ reads

    def ledger_ready(self) -> bool:
        """Whether the ledger answers (status and readiness reads)."""
        return self.ledger.ping()

    @property
    def ledger_dialect(self) -> str:
        return self.ledger.dialect

    def rulebook_snapshot(self, caller: Caller, *, rulebook_hash: str | None = None, rulebook_id: str | None = None,
                          version: str | None = None) -> StoredSnapshot | None:
        """The caller's bound snapshot by hash, or by (id, version); None when not bound in its scope."""
        return self.ledger.rulebook_snapshot(caller.scope, rulebook_hash=rulebook_hash, rulebook_id=rulebook_id,
                                             version=version)

    def bundle_lineage(self, policy_bundle_hash: str) -> dict[str, Any] | None:
        """The lineage (policy id and version, rulebook hash, first use) of a decision's
        attestation bundle hash; no tenant data."""
        return self.ledger.bundle_hash_known(policy_bundle_hash)

    def stored_record(self, caller: Caller, decision_id: str) -> DecisionRecord | None:
        """The full stored record, or None when absent, in another scope, or not bound to its row."""
        stored = self.bound_decision(caller, decision_id)
        return DecisionRecord.stored(json.loads(stored.record_json), stored.record_json) if stored else None

    def stored_decision(self, caller: Caller, decision_id: str) -> StoredDecision | None:
        """The row filed under this id in the caller's scope, as stored (hosted verify reads it
        whatever it holds, and names what does not bind)."""
        return self.ledger.decision(caller.scope, decision_id)

    def bound_decision(self, caller: Caller, decision_id: str) -> StoredDecision | None:
        """The row, only when the record it holds is the one it is filed as (`record_bound_to_row`).

        SECURITY: a row holding another decision's record, or a row moved in from another
        scope, reads as absent (404), so no scope is served a record under a foreign id or
        another tenant's record. Hosted verify names the failure."""
        stored = self.ledger.decision(caller.scope, decision_id)
        if stored is None:
            return None
        try:
            record = json.loads(stored.record_json)
        except ValueError:
            return None
        return stored if record_bound_to_row(record, stored.decision_id, stored.scope) else None


def record_bound_to_row(record: Any, decision_id: str, scope: str) -> bool:
    """Cheap identity binding of a stored record to its row: the record's `decision_id` is the
    row's, its signed `audit_chain.chain_id` is the row scope's chain, and its registry entry
    names the row scope. Integrity (hashes, signatures) is hosted verify's work."""
    if not isinstance(record, dict) or record.get("decision_id") != decision_id:
        return False
    chain = record.get("audit_chain")
    if not isinstance(chain, dict) or chain.get("chain_id") != chain_id_for(scope):
        return False
    registry = record.get("rulebook_registry")
    return not isinstance(registry, dict) or registry.get("scope_hash") == scope_hash(scope)


__all__ = ["CREATED", "REPLAYED", "Caller", "DecideResult", "DecisionService", "record_bound_to_row"]
