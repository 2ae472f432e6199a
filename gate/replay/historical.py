"""Replay of stored rulebook decisions: historical or current. Pure over its inputs; never writes.

Historical replay (`replay_mode: "historical"`, the default for rulebook decisions) rebuilds
the record from what was bound when it was decided, and nothing else:

* the immutable rulebook snapshot of the record's (scope, rulebook id, version), whose hash
  must be the record's `rulebook.hash` and whose body must hash to it;
* the canonical request text stored with the record, which must hash to `input_hash`;
* the evaluator version the record names, which must be the one this gate runs (a gate never
  reinterprets a stored record with another evaluator: compatibility rule 1);
* the pinned adapter invocation: the adapter is re-run through the registry and its
  implementation, manifest and output hashes must equal the stored `trusted_adapter` ones;
* the stored lineage labels (engine label, schema URL and hash, registry entry, attestation
  signature over an equal bundle hash), so that an unchanged decision replays to the same
  `record_hash`.

Any of these unavailable is `REPLAY_LINEAGE_UNAVAILABLE` (409); any of them different is
`REPLAY_LINEAGE_MISMATCH` (409). A caller's `input` override is `REPLAY_INPUT_OVERRIDE_FORBIDDEN`
(422) in historical mode; a stored input that is missing or does not hash to `input_hash` is
`REPLAY_INPUT_UNAVAILABLE` (422).

Current replay (`replay_mode: "current"`, and `/diff`) evaluates the same facts (or the
caller's `input` override) with the scope's current rulebook for the record's rulebook id and
this gate's evaluator and adapters. Differences are drift, reported, not refused.

Both compare `verdict`, `evidence`, `record_hash` and `policy_bundle_hash` of the stored and
the replayed record (`drift[]`, `replay_status` matched | drifted). The replayed record is
never signed, stored or chained: it has no receipt signature and no audit chain.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, Protocol, TypedDict, cast

from gate import vocabulary as C
from gate.adapters import AdapterRun
from gate.errors import GateError
from gate.protocol.canonical import clone, sha256_bytes_hex, sha256_hex
from gate.protocol.fact_limits import check_facts
from gate.protocol.records import RulebookRecordInputs, build_rulebook_record, project_view
from gate.protocol.requests import (
    PreparedRequest,
    forbidden_output_fields,
    prepare_decision_request,
)
from gate.protocol.types import (
    RecordMembers,
    RulebookReference,
    SignedRegistryEntry,
    SnapshotLineage,
    TrustedAdapter,
)
from gate.rulebook import get_evaluator
from gate.rulebook.budget import check_evaluation_cost
from gate.strict_json import JsonValue

REPLAY_HISTORICAL = "historical"
REPLAY_CURRENT = "current"
REPLAY_MODES = (REPLAY_HISTORICAL, REPLAY_CURRENT)
COMPARED_FIELDS = ("verdict", "evidence", "record_hash", "policy_bundle_hash")
AGAINST_SNAPSHOT = "stored_rulebook_snapshot"
AGAINST_CURRENT = "current_rulebook"
MATCHED = "matched"
DRIFTED = "drifted"
REQUEST_MEMBERS = ("replay_mode", "input", "response_view")

# Engine labels each evaluator version has written into records. A label is a name, not
# semantics: a record written under an older label of the same evaluator replays unchanged.
ENGINE_LABELS: dict[str, frozenset[str]] = {
    C.EVALUATOR_VERSION: frozenset({"svc_rulebook_engine", C.EVALUATOR_VERSION}),
}
# Adapter errors that mean "this adapter lineage is not available here" during a replay.
_ADAPTER_UNAVAILABLE = ("TRUSTED_ADAPTER_NOT_REGISTERED", "TRUSTED_ADAPTER_INVALID")
_ADAPTER_MISMATCH = ("TRUSTED_ADAPTER_MANIFEST_MISMATCH",)
_ADAPTER_LINEAGE = ("implementation_hash", "manifest_hash", "output_hash")
_BODY_HASHES: dict[int, tuple[object, str]] = {}  # snapshot object id -> (snapshot, body hash)


class AdapterRunner(Protocol):
    """What replay needs of the adapter registry (`gate.adapters.AdapterRegistry`)."""

    def run(self, invocation: dict[str, JsonValue]) -> AdapterRun: ...


class Snapshot(SnapshotLineage):
    """A bound rulebook snapshot as the ledger (or a corpus fixture) holds it, its body and
    registry entry parsed (the ledger's `SnapshotRow` holds them as text)."""

    body: dict[str, JsonValue]  # the rulebook document as stored (validated again before it is evaluated)
    registry: SignedRegistryEntry | None  # None: a candidate, registered nowhere (gate.replay.migration_check)


def snapshot_from_row(row: Mapping[str, Any]) -> Snapshot:
    """The snapshot of a ledger row (`gate.ledger.SnapshotRow`): its lineage, the body and the
    registry entry parsed."""
    return Snapshot(rulebook_id=row["rulebook_id"], version=row["version"], rulebook_hash=row["rulebook_hash"],
                    evaluator_version=row["evaluator_version"], schema_hash=row["schema_hash"],
                    registered_at=row["registered_at"], body=json.loads(row["body_json"]),
                    registry=json.loads(row["registry_json"]))


def snapshot_body_hash(snapshot: Snapshot) -> str:
    """sha256 of the snapshot's canonical body, computed once per snapshot object."""
    cached = _BODY_HASHES.get(id(snapshot))
    if cached is None or cached[0] is not snapshot:
        cached = (snapshot, sha256_hex(snapshot["body"]))
        if len(_BODY_HASHES) >= 1024:
            _BODY_HASHES.clear()
        _BODY_HASHES[id(snapshot)] = cached
    return cached[1]


@dataclass(frozen=True, slots=True)
class StoredMaterial:
    """One stored decision: the full record and the canonical request text it was made from."""

    record: dict[str, Any]
    request_text: str | None


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    mode: str
    input: dict[str, JsonValue] | None
    response_view: str | None
    mode_given: bool = True  # False: the caller sent no replay_mode (the default applies)


class ComparedField(TypedDict):
    """One compared field of a replay summary: its stored and replayed values, and whether they match."""

    stored: object
    replayed: object
    matched: bool


class Drift(TypedDict):
    """A compared field whose replayed value differs from the stored one."""

    field: str
    stored: object
    replayed: object


class AdapterSummary(TypedDict):
    """Which adapter lineage a replay ran: the re-run adapter's identity and hashes."""

    adapter_id: str
    version: str
    implementation_hash: str
    manifest_hash: str
    output_hash: str


class SnapshotAgainst(TypedDict):
    """`replay_against` of a rulebook replay: the snapshot's rulebook, this gate's evaluator, and
    the adapter lineage the replay ran (None in direct mode)."""

    kind: str
    rulebook: RulebookReference
    evaluator_version: str
    registered_at: str
    trusted_adapter: AdapterSummary | None


class PanelAgainst(TypedDict):
    """`replay_against` of an advisory replay (`gate.advisory.replay`): the panel that answered now."""

    kind: str
    advisors: list[dict[str, str]]  # each advisor's identity
    policy_id: str
    policy_version: str
    policy_hash: str
    rulebook: None
    trusted_adapter: None


class ReplaySummary(TypedDict):
    """A replay's summary body (without `ok`): what was compared, the drift, and the replayed
    record in the requested view. `replay_against` says what it was replayed against (a rulebook
    snapshot, or the advisory panel: `gate.advisory.replay`); `replay_label` only historically."""

    decision_id: str
    replay_mode: str
    replay_against: SnapshotAgainst | PanelAgainst
    input_source: str
    compared_fields: list[str]
    compared: dict[str, ComparedField]
    replay_status: str
    drift: list[Drift]
    simulation_only: bool
    decision: dict[str, JsonValue]
    replay_label: NotRequired[str]


@dataclass(frozen=True, slots=True)
class Runtime:
    """What a current-mode replay evaluates against (the gate's present configuration)."""

    snapshot: Snapshot | None  # the scope's current snapshot of the record's rulebook id
    schema_url: str
    schema_hash: str


# --------------------------------------------------------------------------- request


def _bad_request(field: str, code: str, message: str) -> GateError:
    return GateError("REQUEST_INVALID", message, errors=[{"field": field, "code": code, "message": message}])


def parse_replay_request(body: Any, *, forced_mode: str | None = None) -> ReplayRequest:
    """The `ReplayRequest` of a replay (or diff, `forced_mode="current"`) body; None is `{}`.

    400 `REQUEST_INVALID` for a body that is not an object, unknown members, a member sent as
    `null`, a non-object `input` or an unknown `response_view`; 422 `REPLAY_MODE_INVALID` for a mode outside
    historical | current (or anything but current on /diff).
    """
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise _bad_request("$", "invalid_type", "body must be a JSON object")
    unknown = sorted(set(body) - set(REQUEST_MEMBERS))
    if unknown:
        raise GateError("REQUEST_INVALID", f"unknown member(s): {', '.join(unknown)}",
                        errors=[{"field": name, "code": "unknown_field", "message": "not accepted"} for name in unknown])
    nulls = [name for name in REQUEST_MEMBERS if name in body and body[name] is None]
    if nulls:  # null is not "absent": omit a member to take its default
        raise GateError("REQUEST_INVALID", f"{', '.join(nulls)} must not be null (omit a member for its default)",
                        errors=[{"field": name, "code": "invalid_type", "message": "null is not accepted"}
                                for name in nulls])
    view = body.get("response_view")
    if view is not None and view not in C.VIEWS:
        raise _bad_request("response_view", "invalid_value", f"response_view must be one of {', '.join(C.VIEWS)}")
    override = body.get("input")
    if override is not None and not isinstance(override, dict):
        raise _bad_request("input", "invalid_type", "input must be an object of facts")
    allowed = (forced_mode,) if forced_mode else REPLAY_MODES
    mode = body.get("replay_mode")
    if mode is None:
        mode = forced_mode or REPLAY_HISTORICAL
    if not isinstance(mode, str) or mode not in allowed:
        raise GateError("REPLAY_MODE_INVALID", f"replay_mode must be one of {', '.join(allowed)}",
                        replay_mode=mode, supported_replay_modes=list(allowed))
    if override is not None and mode == REPLAY_HISTORICAL:
        # SECURITY: compatibility rule 1 — a historical replay runs on the stored input only.
        raise GateError("REPLAY_INPUT_OVERRIDE_FORBIDDEN",
                        "historical replay uses the stored canonical input; send replay_mode 'current' "
                        "(or use /diff) to evaluate an input override", replay_mode=mode)
    if override is not None:
        check_facts(override)  # 422 EVALUATION_INPUT_TOO_LARGE before any walk
        forbidden = forbidden_output_fields({"context": {"inputs": override}})
        if forbidden:
            raise GateError("RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN",
                            "the input override carries response-only decision material; remove it",
                            forbidden_fields=[name.replace("context.inputs", "input", 1) for name in forbidden])
    return ReplayRequest(mode=mode, input=override, response_view=view,
                         mode_given=body.get("replay_mode") is not None or forced_mode is not None)


# --------------------------------------------------------------------------- lineage errors


def lineage_unavailable(component: str, message: str, **details: Any) -> GateError:
    return GateError("REPLAY_LINEAGE_UNAVAILABLE", message, lineage_component=component, **details)


def lineage_mismatch(component: str, message: str, **details: Any) -> GateError:
    return GateError("REPLAY_LINEAGE_MISMATCH", message, lineage_component=component, **details)


def input_unavailable(message: str) -> GateError:
    return GateError("REPLAY_INPUT_UNAVAILABLE", message)


# --------------------------------------------------------------------------- stored input


def stored_request(material: StoredMaterial) -> PreparedRequest:
    """The stored canonical request, checked against the record's `input_hash` and re-prepared.

    422 `REPLAY_INPUT_UNAVAILABLE` when the text is missing, does not hash to `input_hash`, or
    no longer passes preparation (it did when the record was made)."""
    text = material.request_text
    if not text:
        raise input_unavailable("the stored canonical input of this decision is not available")
    if sha256_bytes_hex(text.encode("utf-8")) != material.record.get("input_hash"):
        raise input_unavailable("the stored canonical input does not hash to the record's input_hash")
    try:
        return prepare_decision_request(json.loads(text))
    except (ValueError, GateError) as exc:
        raise input_unavailable("the stored canonical input cannot be prepared for replay") from exc


def _rulebook_ref(record: Mapping[str, Any]) -> RulebookReference:
    ref = record.get("rulebook")
    if not isinstance(ref, dict) or not all(isinstance(ref.get(k), str) for k in ("id", "version", "hash")):
        raise lineage_unavailable("rulebook", "this decision carries no rulebook lineage; only rulebook "
                                  "decisions can be replayed")
    # A stored record's `rulebook` member (the builder's RulebookReference), its id, version and
    # hash just checked to be text.
    return cast(RulebookReference, ref)


# --------------------------------------------------------------------------- adapters


def run_adapter(adapters: AdapterRunner | None, invocation: dict[str, JsonValue]) -> AdapterRun:
    """Re-run the pinned invocation; registry refusals become lineage errors (409)."""
    if adapters is None or not hasattr(adapters, "run"):
        raise lineage_unavailable("adapter", "no trusted adapter registry is available for this replay",
                                  adapter_id=invocation.get("adapter_id"), version=invocation.get("version"))
    try:
        if hasattr(adapters, "resolve"):
            adapters.resolve(invocation)
        return adapters.run(invocation)
    except GateError as exc:
        if exc.code in _ADAPTER_UNAVAILABLE:
            raise lineage_unavailable("adapter", f"the pinned adapter is not available: {exc.message}",
                                      adapter_id=invocation.get("adapter_id"),
                                      version=invocation.get("version")) from exc
        if exc.code in _ADAPTER_MISMATCH:
            raise lineage_mismatch("adapter", f"the pinned adapter manifest does not match: {exc.message}",
                                   adapter_id=invocation.get("adapter_id"),
                                   version=invocation.get("version")) from exc
        raise


def check_adapter_lineage(stored: Any, replayed: TrustedAdapter) -> None:
    """409 `REPLAY_LINEAGE_MISMATCH` unless the re-run adapter has the stored implementation,
    manifest and output hashes (the adapter is re-run; its output is compared, never trusted)."""
    stored = stored if isinstance(stored, dict) else {}
    for name in _ADAPTER_LINEAGE:
        if stored.get(name) != replayed.get(name):
            raise lineage_mismatch("adapter", f"adapter drift: the re-run adapter's {name} differs from the record's",
                                   field=f"trusted_adapter.{name}", expected=stored.get(name),
                                   actual=replayed.get(name))


# --------------------------------------------------------------------------- record rebuild


def rebuild_record(
    record: Mapping[str, Any], prepared: PreparedRequest, *, rulebook: dict[str, JsonValue], rulebook_hash: str,
    facts: dict[str, JsonValue], registry: SignedRegistryEntry | None, schema_url: str, schema_hash: str,
    engine: str, input_hash: str, adapter_run: AdapterRun | None = None,
) -> RecordMembers:
    """The record these inputs give, with the stored record's identity (id, request id,
    idempotency key, time), so that only a changed outcome or lineage changes its hashes.

    The attestation is rebuilt unsigned; when its bundle hash equals the stored one, the stored
    attestation signature (which signs exactly that hash) is kept. Never receipt-signed."""
    evaluator = get_evaluator(rulebook, rulebook_hash)  # validates the stored body: typed from here
    check_evaluation_cost(evaluator.document, rulebook_hash, facts)  # 422 before evaluating (bounded work)
    evaluation = evaluator.evaluate(facts)
    rebuilt = build_rulebook_record(RulebookRecordInputs(
        decision_id=record["decision_id"], request_id=record["request_id"],
        idempotency_key=record.get("idempotency_key"), created_at=record["created_at"], input_hash=input_hash,
        facts=facts, rulebook=rulebook, rulebook_hash=rulebook_hash, evaluation=evaluation,
        binding_mode=prepared.binding_mode,
        rulebook_registry=registry, schema_url=schema_url, schema_hash=schema_hash, context=prepared.context,
        engine=engine,
        trusted_adapter=adapter_run.trusted_adapter if adapter_run is not None else None,
        adapter_facts=adapter_run.adapter_facts if adapter_run is not None else None,
        stored_attestation=record.get("rulebook_attestation") if isinstance(record.get("rulebook_attestation"), dict)
        else None,
    ), attestation_key=None, receipt_signer=None).copy()
    return rebuilt


# --------------------------------------------------------------------------- replay


def bound_snapshot(record: Mapping[str, Any], snapshot: Snapshot | None) -> Snapshot:
    """The snapshot the record was bound to; 409 `REPLAY_LINEAGE_UNAVAILABLE` when there is none."""
    ref = _rulebook_ref(record)
    if snapshot is None:
        raise lineage_unavailable("rulebook", "the rulebook snapshot this decision was bound to is not available",
                                  rulebook_id=ref["id"], version=ref["version"])
    return snapshot


def historical_inputs(material: StoredMaterial, snapshot: Snapshot | None,
                      evaluator_version: str = C.EVALUATOR_VERSION) -> tuple[PreparedRequest, str]:
    """Check the stored lineage for a historical replay; returns (prepared request, engine label).

    Raises the 409 / 422 errors of the module doc."""
    record = material.record
    ref = _rulebook_ref(record)
    snapshot = bound_snapshot(record, snapshot)
    if snapshot["rulebook_hash"] != ref["hash"] or snapshot_body_hash(snapshot) != ref["hash"]:
        raise lineage_mismatch("rulebook", "the stored rulebook snapshot does not match the record's rulebook hash",
                               expected=ref["hash"], actual=snapshot["rulebook_hash"])
    stored_evaluator = record.get("evaluator_version")
    if stored_evaluator != evaluator_version or snapshot["evaluator_version"] != evaluator_version:
        # SECURITY: compatibility rule 1 — never reinterpret a stored record with another evaluator.
        raise lineage_unavailable("evaluator", f"this decision was evaluated by {stored_evaluator!r}; this gate "
                                  f"runs {evaluator_version!r} and never reinterprets stored records with it",
                                  expected=stored_evaluator, actual=evaluator_version)
    attestation = record.get("rulebook_attestation")
    bundle = attestation.get("bundle") if isinstance(attestation, dict) else None
    # Stored and untrusted until the membership check below proves it one of the labels.
    engine: Any = bundle.get("engine") if isinstance(bundle, dict) else None
    if engine not in ENGINE_LABELS.get(evaluator_version, ()):
        raise lineage_mismatch("evaluator", "the record's engine label is not one of this evaluator's",
                               expected=sorted(ENGINE_LABELS.get(evaluator_version, ())), actual=engine)
    stated_contract = record.get("rulebook_contract")
    contract = stated_contract if isinstance(stated_contract, dict) else {}
    if contract.get("schema_hash") != snapshot["schema_hash"]:
        raise lineage_mismatch("rulebook_schema", "the record's rulebook schema hash differs from its snapshot's",
                               expected=contract.get("schema_hash"), actual=snapshot["schema_hash"])
    # The stored request's own rulebook is not used: the snapshot is (it hashes to the record's).
    return stored_request(material), engine


@dataclass(frozen=True, slots=True)
class _Basis:
    """What a replay evaluates against: the stored request as prepared, the snapshot, and the
    lineage labels the rebuilt record carries."""

    prepared: PreparedRequest
    against: str
    snapshot: Snapshot
    engine: str
    schema_url: Any
    schema_hash: str


def _historical_basis(material: StoredMaterial, snapshot: Snapshot | None) -> _Basis:
    """The record's own bound snapshot and stored lineage (the 409 / 422 errors of the module doc)."""
    bound = bound_snapshot(material.record, snapshot)
    prepared, engine = historical_inputs(material, bound)
    contract = material.record["rulebook_contract"]
    return _Basis(prepared, AGAINST_SNAPSHOT, bound, engine, contract.get("schema_url"), contract["schema_hash"])


def _current_basis(material: StoredMaterial, runtime: Runtime) -> _Basis:
    """The scope's current snapshot and this gate's labels; 409 without a current rulebook."""
    ref = _rulebook_ref(material.record)
    if runtime.snapshot is None:
        raise lineage_unavailable("rulebook", "the scope has no current rulebook for this decision's rulebook id",
                                  rulebook_id=ref["id"])
    prepared = stored_request(material)  # an override replaces the facts; the context stays
    return _Basis(prepared, AGAINST_CURRENT, runtime.snapshot, C.ENGINE, runtime.schema_url, runtime.schema_hash)


@dataclass(frozen=True, slots=True)
class _ReplayFacts:
    """The facts a replay evaluates, the `input_hash` they stand for, and the adapter run they
    came from (None: not from an adapter)."""

    prepared: PreparedRequest
    facts: dict[str, JsonValue]
    input_hash: str
    adapter_run: AdapterRun | None = None


def _replay_facts(material: StoredMaterial, request: ReplayRequest, prepared: PreparedRequest,
                  adapters: AdapterRunner | None) -> _ReplayFacts:
    """The caller's override, the re-run pinned adapter's facts (checked against the stored
    lineage in historical mode), or the stored request's facts."""
    record = material.record
    if request.input is not None:
        return _ReplayFacts(_as_direct(prepared), clone(request.input), _override_input_hash(prepared, request.input))
    if prepared.adapter is not None:
        adapter_run = run_adapter(adapters, prepared.adapter)
        check_facts(adapter_run.facts)  # the adapter's facts obey the same size limits as decide's
        if request.mode == REPLAY_HISTORICAL:
            check_adapter_lineage(record.get("trusted_adapter"), adapter_run.trusted_adapter)
        return _ReplayFacts(prepared, adapter_run.facts, record["input_hash"], adapter_run)
    return _ReplayFacts(prepared, prepared.facts or {}, record["input_hash"])


def replay(
    material: StoredMaterial, request: ReplayRequest, *, snapshot: Snapshot | None, runtime: Runtime,
    adapters: AdapterRunner | None,
) -> ReplaySummary:
    """The replay summary body (without `ok`) for one stored decision. `snapshot` is the
    record's own bound snapshot (historical); `runtime.snapshot` the scope's current one."""
    record = material.record
    basis = (_historical_basis(material, snapshot) if request.mode == REPLAY_HISTORICAL
             else _current_basis(material, runtime))
    source = _replay_facts(material, request, basis.prepared, adapters)
    used = basis.snapshot
    replayed = rebuild_record(
        record, source.prepared, rulebook=used["body"], rulebook_hash=used["rulebook_hash"], facts=source.facts,
        registry=used["registry"], schema_url=basis.schema_url, schema_hash=basis.schema_hash, engine=basis.engine,
        input_hash=source.input_hash, adapter_run=source.adapter_run,
    )
    summary = replay_summary(record, replayed, request, request.mode, {
        "kind": basis.against,
        "rulebook": {"schema_version": used["body"].get("schema_version"), "id": used["rulebook_id"],
                     "version": used["version"], "hash": used["rulebook_hash"]},
        "evaluator_version": C.EVALUATOR_VERSION,
        "registered_at": used["registered_at"],
        "trusted_adapter": _adapter_summary(source.adapter_run),
    })
    if request.mode == REPLAY_HISTORICAL:
        summary["replay_label"] = C.HISTORICAL_REPLAY_LABEL
    return summary


def replay_summary(record: Mapping[str, Any], replayed: Mapping[str, Any], request: ReplayRequest, mode: str,
                   against: SnapshotAgainst | PanelAgainst) -> ReplaySummary:
    """The summary body shared by every kind of replay: what was compared, the drift, and the
    replayed record in the requested view (simulation only: never signed, stored or chained)."""
    compared, drift = compare(record, replayed)
    return {
        "decision_id": record["decision_id"],
        "replay_mode": mode,
        "replay_against": against,
        "input_source": "override" if request.input is not None else "stored",
        "compared_fields": list(COMPARED_FIELDS),
        "compared": compared,
        "replay_status": DRIFTED if drift else MATCHED,
        "drift": drift,
        "simulation_only": True,
        "decision": project_view(replayed, request.response_view or C.DEFAULT_VIEW),
    }


def compare(stored: Mapping[str, Any], replayed: Mapping[str, Any]) -> tuple[dict[str, ComparedField], list[Drift]]:
    """Per compared field `{stored, replayed, matched}`, and the drift list of the mismatches."""
    compared: dict[str, ComparedField] = {}
    drift: list[Drift] = []
    for name in COMPARED_FIELDS:
        before, after = stored.get(name), replayed.get(name)
        compared[name] = {"stored": before, "replayed": after, "matched": before == after}
        if before != after:
            drift.append({"field": name, "stored": before, "replayed": after})
    return compared, drift


def _adapter_summary(run: AdapterRun | None) -> AdapterSummary | None:
    if run is None:
        return None
    block = run.trusted_adapter
    return {"adapter_id": block["adapter_id"], "version": block["version"],
            "implementation_hash": block["implementation_hash"], "manifest_hash": block["manifest_hash"],
            "output_hash": block["output_hash"]}


def _as_direct(prepared: PreparedRequest) -> PreparedRequest:
    """The request with its facts source replaced by `context.inputs` (an override is direct facts)."""
    return PreparedRequest(request=prepared.request, rulebook=prepared.rulebook, facts=None, adapter=None,
                           binding_mode=C.BINDING_DIRECT, context=prepared.context,
                           response_view=prepared.response_view)


def _override_input_hash(prepared: PreparedRequest, facts: dict[str, JsonValue]) -> str:
    """`input_hash` of the request the override stands for: the stored request with
    `context.inputs` = the override (and no adapter invocation)."""
    request = {k: v for k, v in prepared.request.items() if k not in ("adapter", "binding_mode")}
    context = dict(prepared.context)
    context["inputs"] = facts
    request["context"] = context
    return sha256_hex(request)
