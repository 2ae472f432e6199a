"""`gate migration check`: a `rulebook_migration_v1` manifest against the golden replay corpus.

Steps (compatibility rule 7: a migration is checked before evaluator, adapter or rulebook
routing changes, and its manifest makes the expected drift and approval machine-readable):

1. The manifest must validate against `gate/schemas/rulebook-migration-v1.schema.json`.
2. The candidate is the manifest's `to` rulebook (`to.rulebook_hash`): the body comes from
   `--rulebook` (its hash must be `to.rulebook_hash`) or from a corpus snapshot with that hash,
   evaluated by this gate's evaluator and adapters.
3. Every corpus fixture is replayed: fixtures of `to.rulebook_id` under the candidate, all others
   historically. The corpus must hold at least one fixture of `to.rulebook_id`.
4. Lineage the manifest does not cover fails the gate: a fixture whose historical replay is
   refused for evaluator or adapter lineage is replayed under the current runtime only when the
   manifest's `compatibility_class` covers that component (`evaluator`/`adapter`, or `mixed`);
   a rulebook change needs `rulebook` or `mixed`. A historical fixture that does not match
   exactly is unexpected drift.
5. Observed drift (the union of the outcome fields that changed in any fixture) must equal
   `expected_drift.fields`, and `expected_drift.policy` must be `requires_approval` exactly when
   there is drift.
6. The manifest must be approved: `status: approved`, and `approval.status: approved` (or
   `not_required` when no drift is expected).

A dry-run's manifest (it carries the `dry_run` member: `gate dry-run`, the workbench's export)
is checked against its own evidence instead (`dry_run_problems`, issue 42): it re-evaluated the
rulebook's real history, which the golden corpus does not hold, and it says `proposed` because
the approval of its drift is the release's approval, not an edit of the file.

Result: `{ok, gate_passed, problems[], manifest{…}, observed_drift[], fixtures[]}`. `ok` is false
when the check could not run (invalid manifest, no candidate, empty corpus); `gate_passed` only
when every step holds.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, NotRequired, TypedDict

import jsonschema

from gate import vocabulary as C
from gate.errors import GateError
from gate.keys.anchors import TrustAnchors
from gate.keys.detached import signature_holds
from gate.protocol.canonical import canonical_bytes, sha256_hex
from gate.replay.golden import (
    CORPUS_DIR,
    CorpusError,
    Fixture,
    FixtureResult,
    load_corpus,
    replay_fixture,
    shipped_adapters,
)
from gate.replay.historical import Snapshot
from gate.resources import schemas_path
from gate.rulebook import get_evaluator
from gate.strict_json import JsonValue

MIGRATION_SCHEMA = schemas_path("rulebook-migration-v1.schema.json")
CLASS_COVERS = {"evaluator": {"evaluator"}, "adapter": {"adapter"}, "rulebook": {"rulebook"},
                "public_response": set(), "mixed": {"evaluator", "adapter", "rulebook"}}


class ManifestSummary(TypedDict):
    """The manifest as the result names it (its members as the manifest states them)."""

    migration_id: str
    status: str
    compatibility_class: str
    to: dict[str, JsonValue]
    expected_drift: dict[str, JsonValue]
    approval_status: str


class MigrationCheck(TypedDict):
    """`check_migration`'s result (module doc): `manifest` once the manifest is valid,
    `checked_against: "dry_run"` for a dry-run's manifest."""

    ok: bool
    gate_passed: bool
    problems: list[str]
    observed_drift: list[str]
    fixtures: list[FixtureResult]
    manifest: NotRequired[ManifestSummary]
    checked_against: NotRequired[str]


@functools.lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(MIGRATION_SCHEMA.read_text(encoding="utf-8"))
    return schema


def _schema_problems(manifest: Any) -> list[str]:
    errors = sorted(jsonschema.Draft202012Validator(_schema()).iter_errors(manifest), key=str)
    return [f"schema: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:10]]


def _candidate(manifest: dict[str, Any], fixtures: list[Fixture], rulebook: object) -> tuple[Snapshot | None, list[str]]:
    to = manifest["to"]
    if rulebook is None:
        body = next((f.snapshot["body"] for f in fixtures if f.snapshot["rulebook_hash"] == to["rulebook_hash"]),
                    None)
        if body is None:
            return None, [f"candidate rulebook {to['rulebook_hash']} is not in the corpus; pass it with --rulebook"]
        rulebook = body
    if not isinstance(rulebook, dict) or sha256_hex(rulebook) != to["rulebook_hash"]:
        return None, ["the candidate rulebook does not hash to the manifest's to.rulebook_hash"]
    if rulebook.get("rulebook_id") != to["rulebook_id"] or rulebook.get("version") != to["version"]:
        return None, ["the candidate rulebook's id or version differs from the manifest's `to`"]
    try:
        get_evaluator(rulebook, to["rulebook_hash"])
    except GateError as exc:
        return None, [f"the candidate rulebook is invalid: {exc.message}"]
    return Snapshot(rulebook_id=to["rulebook_id"], version=to["version"], rulebook_hash=to["rulebook_hash"],
                    evaluator_version=C.EVALUATOR_VERSION, schema_hash="", registered_at="candidate",
                    body=rulebook, registry=None), []


def _approval_problems(manifest: dict[str, Any], drifting: bool) -> list[str]:
    approval = manifest["approval"]["status"]
    problems = []
    if manifest["status"] != "approved":
        problems.append(f"the manifest is not approved (status {manifest['status']!r})")
    allowed = ("approved",) if drifting else ("approved", "not_required")
    if approval not in allowed:
        problems.append(f"approval.status {approval!r} does not allow this migration (needs {' or '.join(allowed)})")
    return problems


def _replay_one(fixture: Fixture, manifest: dict[str, Any], candidate: Snapshot, covers: set[str],
                adapters: Any) -> FixtureResult:
    migrated = fixture.rulebook_id == manifest["to"]["rulebook_id"]
    if migrated and candidate["rulebook_hash"] != fixture.snapshot["rulebook_hash"]:
        result = replay_fixture(fixture, adapters=adapters, candidate=candidate)
        result["migrated"] = True
        if "rulebook" not in covers:
            result["problem"] = "the candidate changes the rulebook but compatibility_class does not cover rulebook"
        return result
    result = replay_fixture(fixture, adapters=adapters)
    result["migrated"] = migrated
    component = (result.get("error") or {}).get("lineage_component")
    if isinstance(component, str) and component in ("evaluator", "adapter") and component in covers:
        # A declared evaluator or adapter migration: measure the drift under the current runtime.
        current = candidate if migrated else fixture.snapshot
        result = replay_fixture(fixture, adapters=adapters, candidate=current)
        result["migrated"] = migrated
        result["lineage_changed"] = component
    elif result["replay_status"] == "error":
        result["problem"] = (f"{component or 'replay'} lineage changed without a migration that covers it: "
                             f"{result['error']['message']}")
    elif result["replay_status"] != "matched":
        result["problem"] = "historical replay drifted: unexpected drift"
    return result


def _dry_run_signature(manifest: dict[str, Any], anchors: TrustAnchors | None) -> str | None:
    """The problem of a dry-run manifest's signature by the service's receipt key, or None."""
    signature = manifest.get("signature")
    if anchors is None or anchors.empty:
        return "signature: not checked (no trusted key: pass --public-key, --hmac-secret-env or --key-registry)"
    if not isinstance(signature, dict):
        return "signature: the manifest is not signed"
    key_id = signature.get("key_id")
    held = signature_holds(anchors, signature.get("algorithm"), key_id, signature.get("public_key_fingerprint"),
                           signature.get("value"), canonical_bytes({"key_id": key_id,
                                                                    "migration_hash": manifest["migration_hash"]}))
    return None if held is True else f"signature: {'fails' if held is False else 'no trusted key can check it'}"


def dry_run_problems(manifest: dict[str, Any], anchors: TrustAnchors | None) -> list[str]:
    """A dry-run's manifest (`gate dry-run`, the workbench's export) is checked against its own
    evidence, not the golden corpus: the dry-run re-evaluated the rulebook's real history.
    Its hashes and signature hold, the drift it declares is the drift the dry-run measured, and
    its status is `proposed` (what a dry-run writes: the approval of its drift is the release's
    own approval, docs/releases.md) or `approved`; never `rejected` or `superseded`."""
    dry_run, drift = manifest["dry_run"], manifest["expected_drift"]
    problems = []
    if dry_run.get("result_hash") != sha256_hex({k: v for k, v in dry_run.items() if k != "result_hash"}):
        problems.append("dry_run.result_hash does not match the dry-run (edited)")
    if manifest.get("migration_hash") != sha256_hex({k: v for k, v in manifest.items()
                                                     if k not in ("migration_hash", "signature")}):
        problems.append("migration_hash does not match the manifest (edited)")
    else:
        problems += [p for p in (_dry_run_signature(manifest, anchors),) if p]
    if (dry_run.get("draft") or {}).get("rulebook_hash") != manifest["to"]["rulebook_hash"]:
        problems.append("the dry-run's draft is not the manifest's `to` rulebook")
    changes = dry_run.get("field_changes") if isinstance(dry_run.get("field_changes"), dict) else {}
    measured = {name for name, count in changes.items() if count}
    if measured != set(drift["fields"]):
        problems.append(f"the declared drift {sorted(drift['fields'])} is not the drift the dry-run measured "
                        f"{sorted(measured)}")
    if (drift["policy"] == "requires_approval") != bool(drift["fields"]):
        problems.append(f"expected_drift.policy {drift['policy']!r} contradicts the declared fields")
    if manifest["status"] not in ("proposed", "approved"):
        problems.append(f"the manifest is {manifest['status']}")
    if manifest["approval"]["status"] == "rejected":
        problems.append("the manifest's drift was rejected")
    if not isinstance(dry_run.get("decisions_evaluated"), int) or dry_run["decisions_evaluated"] < 1:
        problems.append("the dry-run re-evaluated no historical decision")
    return problems


def check_migration(manifest: Any, *, corpus: Path = CORPUS_DIR, rulebook: object = None, adapters: Any = None,
                    anchors: TrustAnchors | None = None) -> MigrationCheck:
    """Run the gate over a parsed manifest (see the module doc for every step). `adapters`
    defaults to the shipped adapters (`gate.replay.golden.shipped_adapters`). A dry-run's
    manifest (it carries `dry_run`) is checked by `dry_run_problems` with `anchors`."""
    out: MigrationCheck = {"ok": False, "gate_passed": False, "problems": [], "observed_drift": [], "fixtures": []}
    problems = _schema_problems(manifest)
    if problems:
        out["problems"] = problems
        return out
    declared = manifest["expected_drift"]["fields"]
    out["manifest"] = {"migration_id": manifest["migration_id"], "status": manifest["status"],
                       "compatibility_class": manifest["compatibility_class"], "to": manifest["to"],
                       "expected_drift": manifest["expected_drift"], "approval_status": manifest["approval"]["status"]}
    if isinstance(manifest.get("dry_run"), dict):
        problems = dry_run_problems(manifest, anchors)
        out.update({"ok": True, "gate_passed": not problems, "problems": problems, "observed_drift": sorted(declared),
                    "checked_against": "dry_run"})
        return out
    adapters = shipped_adapters() if adapters is None else adapters
    try:
        _, fixtures = load_corpus(corpus)
    except CorpusError as exc:
        out["problems"] = [str(exc)]
        return out
    candidate, problems = _candidate(manifest, fixtures, rulebook)
    if candidate is None:
        out["problems"] = problems
        return out
    if not any(f.rulebook_id == manifest["to"]["rulebook_id"] for f in fixtures):
        out["problems"] = [(f"the golden corpus has no fixture of rulebook {manifest['to']['rulebook_id']!r}; "
                            "the migration cannot be checked")]
        return out
    covers = CLASS_COVERS[manifest["compatibility_class"]]
    results = [_replay_one(f, manifest, candidate, covers, adapters) for f in fixtures]
    observed = sorted({name for r in results for name in r.get("drift_fields", [])},
                      key=lambda name: list(_schema_fields()).index(name) if name in _schema_fields() else 99)
    problems = [f"{r['fixture_id']}: {r['problem']}" for r in results if r.get("problem")]
    problems += [f"{r['fixture_id']}: {r['error']['code']}: {r['error']['message']}" for r in results
                 if r["replay_status"] == "error" and not r.get("problem")]
    if set(observed) != set(declared):
        problems.append(f"observed drift {observed} differs from the declared drift {sorted(declared)}")
    policy = manifest["expected_drift"]["policy"]
    if (policy == "requires_approval") != bool(declared):
        problems.append(f"expected_drift.policy {policy!r} contradicts the declared fields {sorted(declared)}")
    problems += _approval_problems(manifest, bool(declared) or bool(observed))
    out.update({"ok": True, "gate_passed": not problems, "problems": problems, "observed_drift": observed,
                "fixtures": results})
    return out


@functools.lru_cache(maxsize=1)
def _schema_fields() -> tuple[str, ...]:
    return tuple(_schema()["properties"]["expected_drift"]["properties"]["fields"]["items"]["enum"])
