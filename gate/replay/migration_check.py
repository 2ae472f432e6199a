"""`gate migration check`: a `rulebook_migration_v1` manifest against the golden replay corpus.

Steps (compatibility rule 7: a migration is checked before evaluator, adapter or rulebook
routing changes, and its manifest makes the expected drift and approval machine-readable):

1. The manifest must validate against `schemas/rulebook-migration-v1.schema.json`.
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

Result: `{ok, gate_passed, problems[], manifest{…}, observed_drift[], fixtures[]}`. `ok` is false
when the check could not run (invalid manifest, no candidate, empty corpus); `gate_passed` only
when every step holds.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

from gate import vocabulary as C
from gate.errors import GateError
from gate.protocol.canonical import sha256_hex
from gate.replay.golden import (
    CORPUS_DIR,
    CorpusError,
    Fixture,
    load_corpus,
    replay_fixture,
    shipped_adapters,
)
from gate.replay.historical import Snapshot
from gate.rulebook import SCHEMA_PATH, get_evaluator

MIGRATION_SCHEMA = SCHEMA_PATH.parent / "rulebook-migration-v1.schema.json"
CLASS_COVERS = {"evaluator": {"evaluator"}, "adapter": {"adapter"}, "rulebook": {"rulebook"},
                "public_response": set(), "mixed": {"evaluator", "adapter", "rulebook"}}


@functools.lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(MIGRATION_SCHEMA.read_text(encoding="utf-8"))
    return schema


def _schema_problems(manifest: Any) -> list[str]:
    errors = sorted(jsonschema.Draft202012Validator(_schema()).iter_errors(manifest), key=str)
    return [f"schema: {'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}" for e in errors[:10]]


def _candidate(manifest: dict[str, Any], fixtures: list[Fixture], rulebook: Any) -> tuple[Snapshot | None, list[str]]:
    to = manifest["to"]
    if rulebook is None:
        body = next((f.snapshot.body for f in fixtures if f.snapshot.rulebook_hash == to["rulebook_hash"]), None)
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
                    body=rulebook, registry={}), []


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
                adapters: Any) -> dict[str, Any]:
    migrated = fixture.rulebook_id == manifest["to"]["rulebook_id"]
    if migrated and candidate.rulebook_hash != fixture.snapshot.rulebook_hash:
        result = replay_fixture(fixture, adapters=adapters, candidate=candidate)
        result["migrated"] = True
        if "rulebook" not in covers:
            result["problem"] = "the candidate changes the rulebook but compatibility_class does not cover rulebook"
        return result
    result = replay_fixture(fixture, adapters=adapters)
    result["migrated"] = migrated
    component = (result.get("error") or {}).get("lineage_component")
    if component in ("evaluator", "adapter") and component in covers:
        # A declared evaluator or adapter migration: measure the drift under the current runtime.
        current = candidate if migrated else fixture.snapshot
        result = dict(replay_fixture(fixture, adapters=adapters, candidate=current), migrated=migrated,
                      lineage_changed=component)
    elif result["replay_status"] == "error":
        result["problem"] = (f"{component or 'replay'} lineage changed without a migration that covers it: "
                             f"{result['error']['message']}")
    elif result["replay_status"] != "matched":
        result["problem"] = "historical replay drifted: unexpected drift"
    return result


def check_migration(manifest: Any, *, corpus: Path = CORPUS_DIR, rulebook: Any = None, adapters: Any = None) -> dict[str, Any]:
    """Run the gate over a parsed manifest (see the module doc for every step). `adapters`
    defaults to the shipped adapters (`gate.replay.golden.shipped_adapters`)."""
    adapters = shipped_adapters() if adapters is None else adapters
    out: dict[str, Any] = {"ok": False, "gate_passed": False, "problems": [], "observed_drift": [], "fixtures": []}
    problems = _schema_problems(manifest)
    if problems:
        out["problems"] = problems
        return out
    declared = manifest["expected_drift"]["fields"]
    out["manifest"] = {"migration_id": manifest["migration_id"], "status": manifest["status"],
                       "compatibility_class": manifest["compatibility_class"], "to": manifest["to"],
                       "expected_drift": manifest["expected_drift"], "approval_status": manifest["approval"]["status"]}
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
    out.update(ok=True, gate_passed=not problems, problems=problems, observed_drift=observed, fixtures=results)
    return out


@functools.lru_cache(maxsize=1)
def _schema_fields() -> tuple[str, ...]:
    return tuple(_schema()["properties"]["expected_drift"]["properties"]["fields"]["items"]["enum"])
