"""The `rulebook_migration_v1` manifest of a dry-run: built, hashed, signed and verified.

The manifest names what was tested against what: `to.rulebook_hash` (the draft, sha256 of its
canonical JSON) and `dry_run.source.hash` (the sha256 of the dataset manifest's raw bytes, or
of the ledger's chain heads). `dry_run.result_hash` is the sha256 of the canonical dry-run
result without it: the same draft over the same history always gives the same result hash.

Signing: `migration_hash` = sha256(canon(manifest without `migration_hash` and `signature`));
the service's receipt key (`gate.keys.config.SigningSetup.receipt_signer`, Ed25519 from the
keyring or the HMAC secret) signs canon({key_id, migration_hash}), in the same
`<algorithm>:<signature>` form as a receipt signature. `verify_manifest` recomputes every
hash and checks the signature against trust anchors only (never a key carried by the file).
"""

from __future__ import annotations

import copy
import functools
import hmac
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

import jsonschema

from gate.keys.anchors import TrustAnchors
from gate.keys.signing import ReceiptSigner, b64url_decode, ed25519_verify
from gate.protocol.canonical import canonical_bytes, sha256_bytes_hex, sha256_hex
from gate.resources import schemas_path
from gate.strict_json import JsonValue
from gate.vocabulary import SIG_ED25519, SIG_HMAC_SHA256
from workbench.dataset import iceberg, integrity
from workbench.dataset.location import DatasetError, open_location
from workbench.dataset.manifest import DatasetManifest
from workbench.migration.summary import DryRunResult

__all__ = [
    "MIGRATION_SCHEMA_VERSION",
    "SCHEMA_FILE",
    "build_manifest",
    "migration_schema",
    "sign_manifest",
    "signature_payload",
    "verify_manifest",
]

MIGRATION_SCHEMA_VERSION = "rulebook_migration_v1"
SCHEMA_FILE = schemas_path("rulebook-migration-v1.schema.json")
_DRIFT_FIELDS = ("status", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id")


@functools.lru_cache(maxsize=1)
def migration_schema() -> dict[str, JsonValue]:
    schema: dict[str, JsonValue] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return schema


class HistoryVersionRef(TypedDict):
    policy_version: str
    rulebook_hash: str
    decisions: int


class MigrationFrom(TypedDict):
    """`from`: the rulebook's versions in the history the dry-run read."""

    rulebook_id: str
    versions: list[HistoryVersionRef]


class MigrationTo(TypedDict):
    """`to`: the draft."""

    rulebook_id: str
    version: str
    rulebook_hash: str


class ExpectedDrift(TypedDict):
    policy: Literal["requires_approval", "none"]
    fields: list[str]


class Approval(TypedDict):
    status: Literal["pending", "not_required"]


class MigrationSignature(TypedDict):
    """`signature`: `value` signs canon({key_id, migration_hash}) (`sign_manifest`)."""

    algorithm: str
    key_id: str
    signed_field: Literal["migration_hash"]
    value: str
    public_key_fingerprint: NotRequired[str]


class ManifestDryRun(DryRunResult):
    """The manifest's `dry_run`: the result, how many replayed decisions each outcome field
    changed for, and the sha256 of the canonical result without `result_hash`."""

    field_changes: dict[str, int]
    result_hash: str


# The migration manifest (`rulebook_migration_v1`, schemas/rulebook-migration-v1.schema.json) as
# `build_manifest` and `sign_manifest` write it. `from` is a keyword: declared by call. `dry_run`
# is a copy of the `DryRunResult` with its `field_changes` and `result_hash`.
MigrationManifest = TypedDict("MigrationManifest", {
    "schema_version": str, "migration_id": str, "rulebook_id": str, "status": str, "compatibility_class": str,
    "from": MigrationFrom, "to": MigrationTo, "expected_drift": ExpectedDrift, "approval": Approval,
    "created_at": str, "dry_run": ManifestDryRun,
    "migration_hash": NotRequired[str], "signature": NotRequired[MigrationSignature],
})


class Verification(TypedDict):
    """`verify_manifest`'s answer: every check by name, and why each failed one failed."""

    valid: bool
    checks: dict[str, bool]
    problems: list[str]


def _unsigned(manifest: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """A manifest (as read: any JSON object) without its seal, as `migration_hash` hashes it."""
    return {k: v for k, v in manifest.items() if k not in ("migration_hash", "signature")}


def build_manifest(result: DryRunResult, changes: dict[str, int], created_at: str) -> MigrationManifest:
    """The unsigned manifest of a dry-run result. `changes`: how many replayed decisions each
    outcome field changed for (the fields that drift are those with a nonzero count)."""
    body = copy.deepcopy(result)  # the manifest's own value: nothing it shares changes it later
    field_changes = {name: int(changes.get(name, 0)) for name in _DRIFT_FIELDS}
    dry_run: ManifestDryRun = {**body, "field_changes": field_changes,
                               "result_hash": sha256_hex({**body, "field_changes": field_changes})}
    drifting = [name for name in _DRIFT_FIELDS if changes.get(name, 0)]
    against = result["baseline"].get("rulebook_hash")  # a version baseline names another comparison
    migration_id = "mig_" + sha256_hex({"draft": result["draft"]["rulebook_hash"], "source": result["source"]["hash"],
                                        "scope": result["scope"], **({"baseline": against} if against else {})})[:24]
    return {
        "schema_version": MIGRATION_SCHEMA_VERSION,
        "migration_id": migration_id,
        "rulebook_id": result["rulebook_id"],
        "status": "proposed",
        "compatibility_class": "rulebook",
        "from": {"rulebook_id": result["rulebook_id"],
                 "versions": [{"policy_version": v["policy_version"], "rulebook_hash": v["rulebook_hash"],
                               "decisions": v["decisions"]} for v in result["history_versions"]]},
        "to": {"rulebook_id": result["draft"]["rulebook_id"], "version": result["draft"]["version"],
               "rulebook_hash": result["draft"]["rulebook_hash"]},
        "expected_drift": {"policy": "requires_approval" if drifting else "none", "fields": drifting},
        "approval": {"status": "pending" if drifting else "not_required"},
        "created_at": created_at,
        "dry_run": dry_run,
    }


def signature_payload(key_id: str, migration_hash: str) -> bytes:
    return canonical_bytes({"key_id": key_id, "migration_hash": migration_hash})


def sign_manifest(manifest: MigrationManifest, signer: ReceiptSigner) -> MigrationManifest:
    """A copy with `migration_hash` and the receipt key's `signature`."""
    signed = manifest.copy()
    signed.pop("migration_hash", None)
    signed.pop("signature", None)
    digest = sha256_hex(signed)
    signature: MigrationSignature = {"algorithm": signer.algorithm, "key_id": signer.key_id, "signed_field": "migration_hash",
                 "value": signer.sign_payload(signature_payload(signer.key_id, digest))}
    if signer.algorithm == SIG_ED25519 and signer.public_key_fingerprint:
        signature["public_key_fingerprint"] = signer.public_key_fingerprint
    signed["migration_hash"], signed["signature"] = digest, signature
    return signed


def _signature_ok(signature: Any, digest: str, anchors: TrustAnchors) -> tuple[bool, str | None]:
    if not isinstance(signature, dict):
        return False, "the manifest is not signed"
    algorithm, key_id, value = signature.get("algorithm"), signature.get("key_id"), signature.get("value")
    if algorithm not in (SIG_ED25519, SIG_HMAC_SHA256) or not isinstance(key_id, str) \
            or not isinstance(value, str) or not value.startswith(algorithm + ":"):
        return False, "signature fields are malformed"
    payload, body = signature_payload(key_id, digest), value[len(algorithm) + 1:]
    if algorithm == SIG_HMAC_SHA256:
        secret = anchors.select_hmac(key_id)
        if secret is None:
            return False, f"no trusted HMAC secret for key id {key_id!r}"
        expected = hmac.new(secret.secret, payload, "sha256").hexdigest()
        return hmac.compare_digest(expected, body), None
    key = anchors.select_ed25519(key_id, signature.get("public_key_fingerprint"))
    if key is None:
        return False, f"no trusted Ed25519 key for key id {key_id!r}"
    try:
        raw = b64url_decode(body)
    except (ValueError, TypeError):
        return False, "signature is not base64url"
    return len(raw) == 64 and ed25519_verify(key.public_key_raw, payload, raw), None


def _check_dataset(raw: bytes, root: str | Path, source: Mapping[str, JsonValue], anchors: TrustAnchors,
                   checks: dict[str, bool], problems: list[str]) -> None:
    """`dataset_signature` and `dataset_files` of `verify_manifest` (offline: the anchors only)."""
    try:
        dataset: DatasetManifest | None = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        dataset = None
    if not isinstance(dataset, dict):
        checks["dataset_signature"] = checks["dataset_files"] = False
        problems.append("dataset_signature: the dataset manifest is not a JSON object")
        return
    why = integrity.signature_problem(dataset, anchors)
    if why is None and dataset.get("dataset_hash") != source.get("dataset_hash"):
        why = "the dry-run names another dataset_hash"
    checks["dataset_signature"] = why is None
    if why is not None:
        problems.append(f"dataset_signature: {why}")
    try:
        integrity.check_files(open_location(str(root)), integrity.iter_all(dataset))
        if iceberg.is_iceberg(dataset):  # the record tables: their snapshots and data files
            iceberg.check_tables(dataset)
        checks["dataset_files"] = True
    except DatasetError as exc:
        checks["dataset_files"] = False
        problems.append(f"dataset_files: {exc}")


def verify_manifest(manifest: Any, anchors: TrustAnchors, *, draft: object = None,
                    dataset_manifest: bytes | None = None, dataset_root: str | Path | None = None) -> Verification:
    """Check a migration manifest: `{valid, checks, problems}`.

    checks: `schema` (valid against the published schema), `result_hash`, `migration_hash`,
    `signature` (by a trusted key), and, when given, `draft_hash` (the draft file is the one
    tested) and `dataset_hash` (the dataset manifest's bytes are the history it ran on); with
    `dataset_root` (the dataset folder those bytes are the manifest of), `dataset_signature`
    (its manifest's `dataset_hash` is the one the dry-run names and is signed by a trusted key)
    and `dataset_files` (every file it lists matches its size, sha256, rows and schema).
    """
    checks: dict[str, bool] = {}
    problems: list[str] = []
    if not isinstance(manifest, dict):
        return {"valid": False, "checks": {"schema": False}, "problems": ["the manifest is not a JSON object"]}
    schema_errors = sorted(jsonschema.Draft202012Validator(migration_schema()).iter_errors(manifest), key=str)
    checks["schema"] = not schema_errors
    problems += [f"schema: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in schema_errors[:5]]
    dry_run = found if isinstance(found := manifest.get("dry_run"), dict) else {}
    stated = dry_run.get("result_hash")
    checks["result_hash"] = stated == sha256_hex({k: v for k, v in dry_run.items() if k != "result_hash"})
    digest = sha256_hex(_unsigned(manifest))
    checks["migration_hash"] = manifest.get("migration_hash") == digest
    ok, why = _signature_ok(manifest.get("signature"), digest, anchors)
    checks["signature"] = ok
    if why:
        problems.append(why)
    if draft is not None:
        checks["draft_hash"] = sha256_hex(draft) == (manifest.get("to") or {}).get("rulebook_hash") \
            == (dry_run.get("draft") or {}).get("rulebook_hash")
    if dataset_manifest is not None:
        checks["dataset_hash"] = sha256_bytes_hex(dataset_manifest) == (dry_run.get("source") or {}).get("hash")
        if dataset_root is not None:
            _check_dataset(dataset_manifest, dataset_root, dry_run.get("source") or {}, anchors, checks, problems)
    for name, passed in checks.items():
        if not passed and not any(p.startswith(name) for p in problems):
            problems.append(f"{name} does not match")
    return {"valid": all(checks.values()), "checks": checks, "problems": problems}
