"""Application services: the one place a use case is orchestrated in a transaction.

`DecisionService.decide` turns a request into a stored, signed Decision Record:
prepare (fail-closed checks) → input hash → idempotency fast path → compile/evaluate the
rulebook → bind the rulebook snapshot → build and sign the record → store it atomically with
its usage charge. The record is stored before it is returned; if the write fails nothing is
returned but an error, and nothing is approved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gate import vocabulary as C
from gate.adapters import AdapterRegistry, AdapterRun
from gate.advisory.request import is_advisory
from gate.chain.links import chain_id_for, new_link, record_audit_chain, scope_hash
from gate.chain.merkle import CompactRange
from gate.chain.rowseal import decision_row_hash, row_signature_payload
from gate.clock import Clock, IdSource, RandomIds, SystemClock, iso_ms
from gate.errors import (
    DuplicateIdempotencyKey,
    GateError,
    IdempotencyConflict,
    RulebookVersionConflict,
    SigningUnavailable,
    SnapshotRace,
)
from gate.keys.config import SigningSetup
from gate.ledger import (
    CapCharge,
    ChainAppend,
    ChainHead,
    ConfidenceRead,
    Ledger,
    StoredDecision,
)
from gate.ledger.confidence import Bucket
from gate.protocol.attestation import registry_entry, sign_registry_entry
from gate.protocol.canonical import canonical_text, sha256_bytes_hex, sha256_hex
from gate.protocol.confidence import attach_confidence, confidence_block
from gate.protocol.records import RulebookRecordInputs, attach_audit_chain, build_rulebook_record
from gate.protocol.requests import prepare_decision_request
from gate.rulebook import get_evaluator, schema_hash
from gate.rulebook.budget import check_evaluation_cost, check_facts

CREATED = "created"
REPLAYED = "replayed"


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated API key, resolved to its scope and effective limits."""

    key_id: str
    scope: str
    plan: str
    rate_limit: int
    monthly_cap: int


@dataclass(frozen=True, slots=True)
class DecideResult:
    record: dict[str, Any]
    idempotency_status: str  # created | replayed
    monthly_used: int | None
    response_view: str | None


class DecisionService:
    """Decide and read decisions for authenticated callers."""

    def __init__(
        self,
        ledger: Ledger,
        signing: SigningSetup,
        *,
        schema_url: str = C.RULEBOOK_SCHEMA_PATH,
        clock: Clock | None = None,
        ids: IdSource | None = None,
        adapters: AdapterRegistry | None = None,
        confidence: bool = True,
        advisory: Any = None,
    ) -> None:
        self.ledger = ledger
        self.signing = signing
        self.schema_url = schema_url
        self.clock = clock or SystemClock()
        self.ids = ids or RandomIds()
        self.adapters = adapters or AdapterRegistry()
        self.confidence = confidence
        self._snapshots: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.advisory = advisory  # gate.services.advisory.AdvisoryService; None: 422 LEGACY_MODE_UNAVAILABLE

    # ------------------------------------------------------------------ decide

    def decide(
        self,
        caller: Caller,
        body: Any,
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
    ) -> DecideResult:
        if self.advisory is not None and is_advisory(body):  # the advisory legacy modes (gate/advisory/)
            return self.advisory.decide(self, caller, body, idempotency_key=idempotency_key, request_id=request_id)
        prepared = prepare_decision_request(body)
        request_text = canonical_text(prepared.request)
        input_hash = sha256_bytes_hex(request_text.encode("utf-8"))

        if idempotency_key is not None:
            existing = self.ledger.decision_by_idempotency(caller.scope, idempotency_key)
            if existing is not None:
                return self._replay(existing, idempotency_key, input_hash, prepared.response_view)

        adapter = None
        if prepared.adapter is not None:
            # Raises TRUSTED_ADAPTER_INVALID / _NOT_REGISTERED / _MANIFEST_MISMATCH: no adapter
            # runs unregistered or under another manifest than the caller pinned.
            self.adapters.resolve(prepared.adapter)

        rulebook_hash = sha256_hex(prepared.rulebook)
        evaluator = get_evaluator(prepared.rulebook, rulebook_hash)  # raises RULEBOOK_INVALID

        # SECURITY: reference facts §3 — when signing is required and no key is usable,
        # refuse (503) rather than emit an unsigned record.
        receipt_signer = self.signing.receipt_signer()
        if receipt_signer is None and self.signing.required:
            raise SigningUnavailable()

        if prepared.adapter is not None:
            # One-shot isolated worker; facts = schema-validated input plus derived output.
            adapter = self.adapters.run(prepared.adapter)
            check_facts(adapter.facts)  # the adapter's facts obey the same size limits
            facts = adapter.facts
        else:
            facts = prepared.facts if prepared.facts is not None else {}

        # SECURITY: bounded evaluation work; 422 before evaluating (gate/rulebook/budget.py).
        check_evaluation_cost(prepared.rulebook, rulebook_hash, facts)
        evaluation = evaluator.evaluate(facts)
        for attempt in range(2):
            try:
                return self._store_new(
                    caller, prepared, evaluation, facts, rulebook_hash, input_hash, request_text,
                    idempotency_key, request_id, receipt_signer, adapter,
                )
            except SnapshotRace:
                if attempt:
                    raise GateError("LEDGER_UNAVAILABLE", "rulebook snapshot registration raced twice")
            except DuplicateIdempotencyKey:
                existing = self.ledger.decision_by_idempotency(caller.scope, idempotency_key or "")
                if existing is None:  # pragma: no cover - the winner's row must be visible
                    raise GateError("LEDGER_UNAVAILABLE", "idempotency claim could not be read")
                return self._replay(existing, idempotency_key or "", input_hash, prepared.response_view)
        raise AssertionError("unreachable")  # pragma: no cover

    def _store_new(
        self, caller, prepared, evaluation, facts, rulebook_hash, input_hash, request_text,
        idempotency_key, request_id, receipt_signer, adapter: AdapterRun | None = None,
    ) -> DecideResult:
        created_at = iso_ms(self.clock.now())
        registry, snapshot_row = self._registry_for(
            caller.scope, prepared.rulebook, rulebook_hash, created_at,
            adapter.adapter.dependency() if adapter is not None else None)
        decision_id = self.ids.decision_id()
        record: dict[str, Any] = dict(build_rulebook_record(RulebookRecordInputs(
            decision_id=decision_id,
            request_id=request_id or self.ids.request_id(),
            idempotency_key=idempotency_key,
            created_at=created_at,
            input_hash=input_hash,
            facts=facts,
            rulebook=prepared.rulebook,
            rulebook_hash=rulebook_hash,
            evaluation=evaluation,
            binding_mode=prepared.binding_mode,
            rulebook_registry=registry,
            schema_url=self.schema_url,
            schema_hash=schema_hash(),
            context=prepared.context,
            trusted_adapter=adapter.trusted_adapter if adapter is not None else None,
            adapter_facts=adapter.adapter_facts if adapter is not None else None,
        ), attestation_key=self.signing.attestation_key(), receipt_signer=receipt_signer))
        used = self.store_sealed(caller, record, input_hash=input_hash, rulebook_hash=rulebook_hash,
                                 request_text=request_text, idempotency_key=idempotency_key,
                                 receipt_signer=receipt_signer, snapshot_row=snapshot_row,
                                 confidence=self._confidence_read(caller.scope, record, receipt_signer))
        return DecideResult(record, CREATED, used, prepared.response_view)

    def store_sealed(
        self, caller: Caller, record: dict[str, Any], *, input_hash: str, rulebook_hash: str, request_text: str,
        idempotency_key: str | None, receipt_signer, snapshot_row: dict[str, Any] | None = None,
        confidence: ConfidenceRead | None = None,
    ) -> int | None:
        """Store a built record with its row seal, chain link, tree nodes, snapshot (if new) and
        monthly-cap charge in one transaction; returns the key's monthly usage. Shared by the
        rulebook path and the advisory modes (`gate.services.advisory`), so every decision is
        sealed and chained the same way. Raises `DuplicateIdempotencyKey` when a concurrent
        request claimed the key first."""
        decision_id, created_at = record["decision_id"], record["created_at"]
        row = {
            "decision_id": decision_id,
            "scope": caller.scope,
            "key_id": caller.key_id,
            "idempotency_key": idempotency_key,
            "input_hash": input_hash,
            "record_hash": record["record_hash"],
            "receipt_hash": record["receipt_hash"],
            "policy_bundle_hash": record.get("policy_bundle_hash"),
            # The rulebook's hash; an advisory record's `policy_hash` (its advisor panel), which
            # gate.verify.ledger_rows checks the column against.
            "rulebook_hash": rulebook_hash,
            "policy_id": record.get("policy_id"),
            "policy_version": record.get("policy_version"),
            "verdict": record["verdict"],
            "created_at": created_at,
            "record_json": "",  # written by `seal` once the chain position is known
            "request_json": request_text,
        }
        # The row's own seal: its columns hashed, and signed with the receipt key (gate.chain.rowseal).
        row["row_hash"] = decision_row_hash(row)
        row["row_signature"] = (receipt_signer.sign_payload(row_signature_payload(row["row_hash"], receipt_signer.key_id))
                                if receipt_signer is not None else None)
        chain_id = chain_id_for(caller.scope)

        def seal(head: ChainHead):
            """Runs under the chain head lock: link the record and complete its tree nodes."""
            link = new_link(
                chain_id=chain_id,
                chain_position=head.size + 1,
                previous_link_hash=head.head_link_hash,
                previous_merkle_root=head.merkle_root,
                decision_id=decision_id,
                record_hash=record["record_hash"],
                receipt_hash=record["receipt_hash"],
                policy_id=record.get("policy_id"),
                policy_version=record.get("policy_version"),
                created_at=created_at,
            )
            # The chain member is outside record_hash: it is signed on its own (gate.verify).
            attach_audit_chain(record, record_audit_chain(link), receipt_signer)
            tree, completed = CompactRange(head.size, head.tree_peaks).append(link["leaf_hash"])
            sealed_row = dict(row, record_json=json.dumps(record, ensure_ascii=False, separators=(",", ":")))
            return sealed_row, link, [(n.level, n.index, n.hash) for n in completed], tree.peaks

        return self.ledger.store_decision(
            row,
            snapshot=snapshot_row,
            charge=CapCharge(caller.key_id, created_at[:7], caller.monthly_cap),
            chain=ChainAppend(chain_id, caller.scope, seal),
            confidence=confidence,
        )

    def _confidence_read(self, scope: str, record: dict[str, Any], receipt_signer) -> ConfidenceRead | None:
        """`decision_confidence` from the scope's outcome counters for this policy, verdict and
        action, read in the transaction that stores the decision (one indexed read; the record
        carries no block while the scope has no Outcome Record for the policy). The block is
        outside record_hash, so it is signed on its own (gate.protocol.confidence). None when decide-time
        confidence is off."""
        if not self.confidence:
            return None
        bucket = Bucket(scope, record["policy_id"], record["verdict"], record["action"], record["policy_version"])

        def apply(counts) -> None:
            if counts is not None:
                attach_confidence(record, confidence_block(counts, policy_version=record["policy_version"]),
                                  receipt_signer)

        return ConfidenceRead(bucket, apply)

    def _registry_for(
        self, scope: str, rulebook: dict, rulebook_hash: str, now: str,
        adapter_dependency: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The scope's registry entry for this rulebook, and a snapshot row when it is new.

        The first binding of (id, version) also pins its facts source: the trusted adapter
        dependency of an adapter-mode decide, or none. Using the pair later with another (or
        without / with a first) adapter dependency is `RULEBOOK_VERSION_CONFLICT`
        (compatibility rule 3: an adapter change needs a new rulebook version)."""
        rulebook_id, version = rulebook["rulebook_id"], rulebook["version"]
        stored = self._snapshot(scope, rulebook_id, version)
        if stored is not None:
            if stored["rulebook_hash"] != rulebook_hash:
                raise RulebookVersionConflict(rulebook_id, version, stored["rulebook_hash"], rulebook_hash)
            registry = json.loads(stored["registry_json"])
            bound = registry.get("trusted_adapter_dependency")
            if (bound or None) != (adapter_dependency or None):
                raise RulebookVersionConflict(rulebook_id, version, stored["rulebook_hash"], rulebook_hash,
                                              registered_dependency=bound, supplied_dependency=adapter_dependency)
            return registry, None
        registry = sign_registry_entry(
            registry_entry(
                rulebook_id=rulebook_id,
                version=version,
                rulebook_hash=rulebook_hash,
                scope_hash=scope_hash(scope),
                registered_at=now,
                adapter_dependency=adapter_dependency,
            ),
            self.signing.attestation_key(),
        )
        snapshot_row = {
            "scope": scope,
            "rulebook_id": rulebook_id,
            "version": version,
            "rulebook_hash": rulebook_hash,
            "evaluator_version": C.EVALUATOR_VERSION,
            "schema_hash": schema_hash(),
            "registered_at": now,
            "body_json": canonical_text(rulebook),
            "registry_json": canonical_text(registry),
        }
        return registry, snapshot_row

    def _snapshot(self, scope: str, rulebook_id: str, version: str) -> dict[str, Any] | None:
        """The bound snapshot for (scope, id, version). Bindings are immutable once stored
        (compatibility rule 2), so a found binding is cached in-process; absence is not."""
        cache_key = (scope, rulebook_id, version)
        stored = self._snapshots.get(cache_key)
        if stored is None:
            stored = self.ledger.rulebook_snapshot(scope, rulebook_id=rulebook_id, version=version)
            if stored is not None:
                if len(self._snapshots) >= 4096:
                    self._snapshots.clear()
                self._snapshots[cache_key] = stored
        return stored

    def _replay(
        self, existing: StoredDecision, idempotency_key: str, input_hash: str, view: str | None
    ) -> DecideResult:
        if existing.input_hash != input_hash:
            raise IdempotencyConflict(idempotency_key, existing.decision_id, input_hash, existing.input_hash)
        return DecideResult(json.loads(existing.record_json), REPLAYED, None, view)

    # ------------------------------------------------------------------ promotion

    def register_rulebook(self, scope: str, rulebook: Any) -> tuple[dict[str, Any], bool]:
        """Promote a rulebook: bind it in `scope` as an immutable snapshot, which makes it the
        scope's current version of its id. Returns (registry entry, newly bound).

        It validates first (`RULEBOOK_INVALID`, nothing bound); a version already bound to
        another hash is `RULEBOOK_VERSION_CONFLICT` (compatibility rule 2: publish a new
        version); the same content again is a no-op. History is never edited.
        """
        rulebook_hash = sha256_hex(rulebook) if isinstance(rulebook, dict) else ""
        get_evaluator(rulebook, rulebook_hash)  # raises RULEBOOK_INVALID for anything invalid
        registry, snapshot_row = self._registry_for(scope, rulebook, rulebook_hash,
                                                    iso_ms(self.clock.now()))
        if snapshot_row is None:
            return registry, False
        try:
            created = self.ledger.register_snapshot(snapshot_row)
        except SnapshotRace:  # a concurrent promotion of the same content won
            created = False
        if not created:
            stored = self.ledger.rulebook_snapshot(scope, rulebook_id=rulebook["rulebook_id"],
                                                   version=rulebook["version"])
            return json.loads(stored["registry_json"]), False
        return registry, True

    # ------------------------------------------------------------------ reads

    def stored_record(self, caller: Caller, decision_id: str) -> dict[str, Any] | None:
        """The full stored record, or None when absent, in another scope, or not bound to its row."""
        stored = self.bound_decision(caller, decision_id)
        return json.loads(stored.record_json) if stored else None

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
