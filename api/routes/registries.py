"""Public registries and readiness: status, receipt keys, policy bundles; keyed rulebook metadata."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import NotRequired, TypedDict

from flask import Response, request

from api import openapi_params as P
from api.errors import json_response
from api.limits import RateLimiter
from api.routing import AUTH_ERRORS, Endpoint, Routes
from api.runtime import keyed
from gate import __version__
from gate import vocabulary as C
from gate.errors import GateError
from gate.keys.config import FIX_MISSING_KEYRING, LiveSigning, SigningSetup
from gate.protocol.canonical import CanonicalJSONError, parse_strict, sha256_hex
from gate.protocol.types import RulebookContract
from gate.rulebook import schema_hash
from gate.services.decide import Caller, DecisionService
from gate.services.periodic import PeriodicWorker, WorkerHealth
from gate.settings import Settings

routes = Routes("registries", __name__)

_HASH = re.compile(r"^[0-9a-f]{64}$")


def rulebook_contract(schema_url: str) -> RulebookContract:
    return {
        "schema_version": C.RULEBOOK_SCHEMA_VERSION,
        "schema_url": schema_url,
        "schema_hash": schema_hash(),
        "evaluator_version": C.EVALUATOR_VERSION,
    }


@routes.route(Endpoint(
    "get", "/api/decision/status", "Readiness: signing, ledger, idempotency, limits, auth, registries.",
    False, {200: "ready", 503: "degraded (same body shape)"}, tags=("registries",), budget="public",
))
def status(*, service: DecisionService, settings: Settings, signing: SigningSetup | LiveSigning,
           current_limiter: Callable[[], RateLimiter], workers: Callable[[], list[PeriodicWorker]]) -> Response:
    limiter = current_limiter()  # read per request: the app may swap it (api.runtime._NOT_FOR_ROUTES)
    ledger_ok = service.ledger_ready()
    limiter_ok = limiter.ping()
    signer = signing.receipt_signer()
    signing_ok = signing.ready()
    fixes = []  # {problem, fix}: each problem beside the step that resolves it
    if not ledger_ok:
        fixes.append({"problem": "ledger is not reachable",
                      "fix": "check GATE_DATABASE_URL and that the database answers; then `gate db upgrade`"})
    if not limiter_ok:
        fixes.append({"problem": "rate limiter backend is not reachable",
                      "fix": "check GATE_REDIS_URL and that Redis answers"})
    signing_problem = signing_fix = None
    if not signing_ok:
        signing_problem = signing.problem or "no receipt signing key is configured"
        signing_fix = signing.fix or FIX_MISSING_KEYRING
        fixes.append({"problem": signing_problem, "fix": signing_fix})
    problems = [entry["problem"] for entry in fixes]
    ready = not problems
    body = {
        "ok": ready,
        "status": "ready" if ready else "degraded",
        "service_version": __version__,
        "interface_version": C.INTERFACE_VERSION,
        "decision_protocol_version": C.DECISION_PROTOCOL_VERSION,
        "decision_record_version": C.DECISION_RECORD_VERSION,
        "rulebook_contract": rulebook_contract(settings.schema_url),
        "supported_modes": [C.MODE_RULEBOOK, *(C.LEGACY_MODES if service.advisory is not None else ())],
        "advisory_modes": {"enabled": service.advisory is not None, "production_verdict": False,
                           "modes": list(C.LEGACY_MODES) if service.advisory is not None else []},
        "supported_binding_modes": list(C.SUPPORTED_BINDING_MODES),
        "signing": {
            "ready": signing_ok,
            "required": signing.required,
            "receipt_signature_algorithm": signer.algorithm if signer else None,
            "receipt_key_id": signer.key_id if signer else None,
            "registry_signing": signing.attestation_key() is not None,
            "problem": signing_problem,
            "fix": signing_fix,
        },
        "ledger": {"ready": ledger_ok, "dialect": service.ledger_dialect},
        "idempotency": {"ready": ledger_ok, "backend": "ledger_unique_constraint"},
        "rate_limits": {"ready": limiter_ok, "backend": limiter.backend, "window_seconds": 60},
        "auth": {"ready": ledger_ok, "scheme": "api_key", "headers": ["x-api-key", "Authorization: Bearer"]},
        "registries": {
            "receipt_keys": "/api/decision/receipt-keys",
            "policy_bundles": "/api/decision/policy-bundles",
            "rulebooks": "/api/decision/rulebooks",
            "adapters": "/api/decision/adapters",
            "policy_patterns": "/api/decision/policy-patterns",
        },
        "problems": problems,
        "fixes": fixes,
        "workers": workers_view(workers()),
    }
    return json_response(200 if ready else 503, body)


class WorkersView(TypedDict):
    """The readiness answer's `workers`: healthy when every worker is."""

    healthy: bool
    workers: list[WorkerHealth]


def workers_view(workers: list[PeriodicWorker]) -> WorkersView:
    """This process's background workers (docs/operating.md, "Background workers"): healthy when
    every one is. A worker's trouble is shown here and in `/metrics`, and does not make the gate
    degraded: decides, holds and verification still answer; what lags is the work in the background."""
    shown = [worker.health() for worker in workers]
    return {"healthy": all(w["healthy"] for w in shown), "workers": shown}


@routes.route(Endpoint(
    "get", "/api/decision/receipt-keys", "Public receipt key registry (active and retired Ed25519 keys).",
    False, {200: "key registry"}, tags=("registries",), budget="public",
))
def receipt_keys(*, signing: SigningSetup | LiveSigning) -> Response:
    signer = signing.receipt_signer()
    body = {
        "ok": True,
        "receipt_key_registry_version": C.RECEIPT_KEY_REGISTRY_VERSION,
        "active_receipt_key_id": signer.key_id if signer else None,
        "active_receipt_signature_algorithm": signer.algorithm if signer else None,
        "keys": signing.registry_entries(),
    }
    if signing.hmac_key is not None:
        # The secret is never disclosed: HMAC receipts are verifiable only by its holders.
        body["hmac_keys"] = [
            {"key_id": signing.hmac_key.key_id, "algorithm": C.SIG_HMAC_SHA256, "status": "active"}
        ]
    return json_response(200, body)


def version_order_key(version: str) -> tuple[tuple[int, int, str], ...]:
    """Natural order of version labels: digit runs compare as numbers, other runs as text
    ("2026-08-01" > "2026-05-01", "1.10.0" > "1.9.0")."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.findall(r"\d+|\D+", version))


class Superseded(TypedDict):
    version: str
    hash: str


class PublishedBundle(TypedDict):
    """One operator-published rulebook as a policy bundle entry; a historical one names its successor."""

    id: str
    version: str
    hash: str
    hash_algorithm: str
    canonicalization: str
    source: str
    kind: str
    status: str
    superseded_by: NotRequired[Superseded]


@lru_cache(maxsize=4)
def _published_bundles(policy_dir: str | None) -> tuple[PublishedBundle, ...]:
    """Operator-published rulebooks (GATE_POLICY_DIR), as policy bundle entries.

    Per rulebook id, the highest version (natural order, `version_order_key`) is `active`; the
    other published versions are `historical`, listed with `superseded_by`."""
    if not policy_dir:
        return ()
    bundles: list[PublishedBundle] = []
    for path in sorted(Path(policy_dir).glob("*.json")):
        try:
            rulebook = parse_strict(path.read_bytes())
        except (OSError, CanonicalJSONError):
            continue
        if not isinstance(rulebook, dict) or rulebook.get("schema_version") != C.RULEBOOK_SCHEMA_VERSION:
            continue
        rulebook_id, version = rulebook.get("rulebook_id"), rulebook.get("version")
        if not isinstance(rulebook_id, str) or not isinstance(version, str):
            continue
        bundles.append(
            {
                "id": rulebook_id,
                "version": version,
                "hash": sha256_hex(rulebook),
                "hash_algorithm": C.HASH_ALGORITHM,
                "canonicalization": C.CANONICALIZATION,
                "source": f"rulebook:{path.name}",
                "kind": "published_rulebook",
                "status": "active",
            }
        )
    latest: dict[str, PublishedBundle] = {}
    for bundle in bundles:
        best = latest.get(bundle["id"])
        if best is None or version_order_key(bundle["version"]) > version_order_key(best["version"]):
            latest[bundle["id"]] = bundle
    for bundle in bundles:
        active = latest[bundle["id"]]
        if bundle is not active:
            bundle["status"] = "historical"
            bundle["superseded_by"] = {"version": active["version"], "hash": active["hash"]}
    bundles.sort(key=lambda b: (b["id"], version_order_key(b["version"])))
    return tuple(bundles)


@routes.route(Endpoint(
    "get", "/api/decision/policy-bundles", "Policy bundle registry; `?hash=` resolves one bundle.",
    False, {200: "registry or one bundle", 400: "malformed hash", 404: "unknown bundle hash"},
    errors=("REQUEST_INVALID", "POLICY_BUNDLE_NOT_FOUND"),
    query=(("hash", "string", "64-hex bundle hash to resolve",
            {"type": "string", "pattern": f"^{P.SPACES}*[0-9A-Fa-f]{{64}}{P.SPACES}*$",
             "description": "64-hex bundle hash to resolve (case and surrounding space ignored)"}),),
    tags=("registries",), budget="public",
))
def policy_bundles(*, settings: Settings, service: DecisionService) -> Response:
    policy_dir = str(settings.policy_dir) if settings.policy_dir else None
    bundles = list(_published_bundles(policy_dir))
    wanted = request.args.get("hash")
    if wanted is None:
        return json_response(200, {
            "ok": True, "count": len(bundles),
            "active_count": sum(1 for b in bundles if b["status"] == "active"),
            "historical_count": sum(1 for b in bundles if b["status"] == "historical"),
            "policy_bundles": bundles,
        })
    wanted = wanted.strip().lower()
    if not _HASH.fullmatch(wanted):
        raise GateError("REQUEST_INVALID", "hash must be 64 lowercase hex characters",
                              errors=[{"field": "hash", "code": "invalid_value",
                                       "message": "64 hex characters"}])
    for bundle in bundles:
        if bundle["hash"] == wanted:
            return json_response(200, {"ok": True, "policy_bundle": bundle})
    known = service.bundle_lineage(wanted)
    if known is not None:
        # Decision bundle attestation hashes resolve to lineage only; no tenant data.
        lineage = {
            "hash": wanted,
            "hash_algorithm": C.HASH_ALGORITHM,
            "canonicalization": C.CANONICALIZATION,
            "kind": "rulebook_attestation_bundle",
            "id": known["policy_id"],
            "version": known["policy_version"],
            "rulebook_hash": known["rulebook_hash"],
            "first_seen_at": known["created_at"],
            "status": "historical",
        }
        return json_response(200, {"ok": True, "policy_bundle": lineage})
    raise GateError("POLICY_BUNDLE_NOT_FOUND", "no policy bundle has this hash")


@routes.route(Endpoint(
    "get", "/api/decision/rulebooks", "Rulebook snapshot metadata in the caller's scope (never the body).",
    True, {200: "{ok, rulebook}", 400: "lookup needs exactly hash, or rulebook_id and version",
           401: "missing or invalid key", 403: "disabled key", 404: "not in scope"},
    errors=AUTH_ERRORS + ("RULEBOOK_LOOKUP_INVALID", "RULEBOOK_NOT_FOUND"),
    query=(("hash", "string", "rulebook hash"), ("rulebook_id", "string", "with version"),
           ("version", "string", "with rulebook_id")),
    tags=("registries",),
))
@keyed("SVC_API_UNAUTHORIZED", ci=True)
def rulebooks(caller: Caller, *, service: DecisionService) -> Response:
    wanted_hash = request.args.get("hash")
    rulebook_id = request.args.get("rulebook_id")
    version = request.args.get("version")
    by_hash = wanted_hash is not None and rulebook_id is None and version is None
    by_pair = wanted_hash is None and rulebook_id is not None and version is not None
    if not (by_hash or by_pair):
        raise GateError(
            "RULEBOOK_LOOKUP_INVALID",
            "look up a rulebook by exactly `hash`, or by both `rulebook_id` and `version`",
        )
    if wanted_hash is not None:  # by hash (the check above leaves no other case with a hash)
        snapshot = service.rulebook_snapshot(caller, rulebook_hash=wanted_hash.strip().lower())
    else:
        snapshot = service.rulebook_snapshot(caller, rulebook_id=rulebook_id, version=version)
    if snapshot is None:
        raise GateError("RULEBOOK_NOT_FOUND", "no rulebook snapshot matches in this scope")
    metadata = json.loads(snapshot["registry_json"])
    # SECURITY: the snapshot body is never disclosed (spec "Registries and patterns").
    metadata["snapshot"] = {"stored": True, "body_disclosed": False, "schema_hash": snapshot["schema_hash"]}
    # The bound trusted adapter dependency is part of the signed entry (null for direct-mode
    # snapshots); `adapter_dependency_registered` says whether this gate can still run it.
    dependency = metadata.get("trusted_adapter_dependency")
    metadata["trusted_adapter_dependency"] = dependency
    if isinstance(dependency, dict):
        adapter_id, adapter_version = dependency.get("adapter_id"), dependency.get("version")
        # The gate writes both as strings; anything else names no registered adapter.
        adapter = (service.adapters.get(adapter_id, adapter_version)
                   if isinstance(adapter_id, str) and isinstance(adapter_version, str) else None)
        metadata["adapter_dependency_registered"] = bool(
            adapter is not None and adapter.manifest_hash == dependency.get("manifest_hash"))
    return json_response(200, {"ok": True, "rulebook": metadata})


_SEMVER = re.compile(r"^\d+\.\d+\.\d+$")


@routes.route(Endpoint(
    "get", "/api/decision/adapters", "Trusted adapter registry (public): manifests with closed input and "
    "output JSON Schemas, implementation_hash, manifest_hash and the execution contract, so a caller can "
    "build an `adapter` invocation. `?adapter_id=` filters; with `&version=` it answers one `adapter`.",
    False, {200: "{ok, trusted_adapter_registry_version, count, adapters} or {ok, adapter}",
            400: "version without adapter_id, or not semver", 404: "no registered adapter matches"},
    errors=("REQUEST_INVALID", "TRUSTED_ADAPTER_NOT_FOUND"),
    query=(("adapter_id", "string", "adapter id"),
           ("version", "string", "semver, with adapter_id", {"type": "string", "pattern": P.SEMVER})),
    tags=("registries",), budget="public",
))
def adapters(*, service: DecisionService) -> Response:
    """Public registry of trusted adapter manifests, so a caller can build an invocation."""
    registry = service.adapters
    adapter_id = request.args.get("adapter_id")
    version = request.args.get("version")
    if version is not None and (adapter_id is None or not _SEMVER.fullmatch(version)):
        raise GateError("REQUEST_INVALID", "version needs adapter_id and must be semver X.Y.Z",
                              errors=[{"field": "version", "code": "invalid_value",
                                       "message": "semver X.Y.Z, with adapter_id"}])
    manifests = registry.manifests()
    if adapter_id is not None:
        manifests = [m for m in manifests if m["adapter_id"] == adapter_id]
    if version is not None:
        for manifest in manifests:
            if manifest["version"] == version:
                return json_response(200, {"ok": True, "adapter": manifest})
        raise GateError("TRUSTED_ADAPTER_NOT_FOUND", "no registered adapter has this id and version",
                              adapter_id=adapter_id, version=version)
    if adapter_id is not None and not manifests:
        raise GateError("TRUSTED_ADAPTER_NOT_FOUND", "no registered adapter has this id",
                              adapter_id=adapter_id)
    return json_response(200, {
        "ok": True,
        "trusted_adapter_registry_version": C.ADAPTER_REGISTRY_VERSION,
        "manifest_version": C.ADAPTER_MANIFEST_VERSION,
        "entry_point_group": C.ADAPTER_ENTRY_POINT_GROUP,
        "count": len(manifests),
        "adapters": manifests,
    })
