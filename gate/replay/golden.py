"""The golden replay corpus (`rulebook_v1_golden_replay_v1`) and its replay.

A corpus is a folder with `index.json` and one file per fixture. A fixture is the stored
material of one real decision, exactly as the ledger held it, plus the record it produced:

* `request_text`: the canonical request text (what `input_hash` covers);
* `snapshot`: the bound rulebook snapshot (id, version, hash, evaluator version, schema hash,
  registration time, body and signed registry entry);
* `expected_record`: the full Decision Record as issued.

Replaying a fixture historically (`historical_rulebook_replay_v1`, `gate.replay.historical`) must give
back `expected_record`'s verdict, evidence, record hash and policy bundle hash: zero drift.
The index lists every fixture with the sha256 of its file's bytes, so a corpus cannot be
edited silently. The corpus builder is `gate_cli/golden_build.py`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from gate import vocabulary as C
from gate.errors import CodedError, GateError
from gate.protocol.canonical import sha256_bytes_hex
from gate.replay.historical import (
    REPLAY_CURRENT,
    REPLAY_HISTORICAL,
    ReplayRequest,
    Runtime,
    Snapshot,
    StoredMaterial,
    replay,
)
from gate.resources import schemas_path
from gate.rulebook import schema_hash
from gate.strict_json import JsonValue

CORPUS_DIR = schemas_path("golden-replay")
INDEX_FILE = "index.json"
OUTCOME_FIELDS = ("status", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id")
FIXTURE_MEMBERS = ("fixture_id", "description", "request_text", "snapshot", "expected_record")


class CorpusError(CodedError):
    """The corpus cannot be read, or a fixture is not the file its index names."""

    CODE = "REPLAY_CORPUS_INVALID"


@dataclass(frozen=True)
class Fixture:
    fixture_id: str
    description: str
    request_text: str
    snapshot: Snapshot
    expected_record: dict[str, JsonValue]

    @property
    def rulebook_id(self) -> str:
        return self.snapshot["rulebook_id"]


class FixtureResult(TypedDict):
    """One fixture's replay (`replay_fixture`): its status and either the comparison or the
    lineage refusal (`error`: code, message and the refusal's lineage details). A migration
    check (`gate.replay.migration_check`) adds `migrated`, and `lineage_changed` or `problem`."""

    fixture_id: str
    rulebook_id: str
    mode: str
    replay_status: str
    error: NotRequired[dict[str, JsonValue]]
    compared: NotRequired[dict[str, bool]]
    drift_fields: NotRequired[list[str]]
    candidate_rulebook_hash: NotRequired[str]
    migrated: NotRequired[bool]
    lineage_changed: NotRequired[str]
    problem: NotRequired[str]


class CorpusReplay(TypedDict):
    """`replay_corpus`: ok only when every fixture matched."""

    ok: bool
    replay_label: str
    fixtures: list[FixtureResult]
    unexpected_drift: list[str]


def _snapshot(data: Snapshot) -> Snapshot:
    """The fixture's `snapshot` member (read as JSON: its members are those of a `Snapshot`)."""
    return Snapshot(rulebook_id=data["rulebook_id"], version=data["version"], rulebook_hash=data["rulebook_hash"],
                    evaluator_version=data["evaluator_version"], schema_hash=data["schema_hash"],
                    registered_at=data["registered_at"], body=data["body"], registry=data["registry"])


def load_corpus(directory: Path = CORPUS_DIR) -> tuple[dict[str, JsonValue], list[Fixture]]:
    """(index, fixtures). Raises `CorpusError` for a missing file, a hash that does not match
    the index, or a fixture without the required members."""
    directory = Path(directory)
    try:
        index = json.loads((directory / INDEX_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorpusError(f"cannot read {directory / INDEX_FILE}: {exc}") from exc
    if index.get("corpus_version") != C.GOLDEN_REPLAY_CORPUS_VERSION:
        raise CorpusError(f"corpus_version must be {C.GOLDEN_REPLAY_CORPUS_VERSION}")
    fixtures = []
    for entry in index.get("fixtures", []):
        path = directory / entry["path"]
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise CorpusError(f"cannot read fixture {entry['path']}: {exc}") from exc
        if sha256_bytes_hex(raw) != entry.get("sha256"):
            raise CorpusError(f"fixture {entry['path']} does not match the sha256 in the index")
        data = json.loads(raw)
        missing = [name for name in FIXTURE_MEMBERS if name not in data]
        if missing or data["fixture_id"] != entry.get("fixture_id"):
            raise CorpusError(f"fixture {entry['path']} lacks {missing or ['its indexed fixture_id']}")
        fixtures.append(Fixture(data["fixture_id"], data["description"], data["request_text"],
                                _snapshot(data["snapshot"]), data["expected_record"]))
    return index, fixtures


def replay_fixture(fixture: Fixture, *, adapters: Any = None, candidate: Snapshot | None = None) -> FixtureResult:
    """Replay one fixture: historically (no candidate), or under a candidate rulebook (the
    current evaluator and adapters, as a migration would run). Lineage refusals are values
    (`error`), never exceptions: a corpus run always reports every fixture.

    Result: `{fixture_id, rulebook_id, mode, replay_status, compared, drift_fields, error?}` where
    `drift_fields` are the outcome fields (`OUTCOME_FIELDS`) that differ from the expected record."""
    material = StoredMaterial(record=fixture.expected_record, request_text=fixture.request_text)
    mode = REPLAY_HISTORICAL if candidate is None else REPLAY_CURRENT
    kind = "historical" if candidate is None else "candidate"
    try:
        summary = replay(material, ReplayRequest(mode=mode, input=None, response_view=C.VIEW_FULL),
                         snapshot=fixture.snapshot, runtime=Runtime(candidate, C.RULEBOOK_SCHEMA_PATH, schema_hash()),
                         adapters=adapters)
    except GateError as exc:
        return {"fixture_id": fixture.fixture_id, "rulebook_id": fixture.rulebook_id, "mode": kind,
                "replay_status": "error", "error": {"code": exc.code, "message": exc.message,
                                                    **{k: v for k, v in exc.details.items()
                                                       if k in ("lineage_component", "field", "expected", "actual")}}}
    replayed = summary["decision"]
    result: FixtureResult = {
        "fixture_id": fixture.fixture_id, "rulebook_id": fixture.rulebook_id, "mode": kind,
        "replay_status": summary["replay_status"],
        "compared": {name: value["matched"] for name, value in summary["compared"].items()},
        "drift_fields": [name for name in OUTCOME_FIELDS if replayed.get(name) != fixture.expected_record.get(name)],
    }
    if candidate is not None:
        result["candidate_rulebook_hash"] = candidate["rulebook_hash"]
    return result


def shipped_adapters() -> Any:
    """The adapters shipped with the gate (no plugins, workers started cold): what the corpus's
    adapter fixtures were decided with, so what replaying them re-runs by default."""
    # Imported here for start-up time: the adapters take about a second to import, and the CLI
    # reads this module's CORPUS_DIR without running any adapter.
    from gate.adapters import default_registry

    return default_registry(pool_size=0, plugins=False)


def replay_corpus(directory: Path = CORPUS_DIR, *, adapters: Any = None) -> CorpusReplay:
    """Historical replay of every fixture: `{ok, fixtures, unexpected_drift}`; ok only when every
    fixture matched (zero drift, no lineage refusal). `adapters` defaults to this installation's
    shipped adapters (the corpus holds decisions made with them; each re-run is compared)."""
    adapters = shipped_adapters() if adapters is None else adapters
    _, fixtures = load_corpus(directory)
    results = [replay_fixture(fixture, adapters=adapters) for fixture in fixtures]
    unexpected = [r["fixture_id"] for r in results if r["replay_status"] != "matched"]
    return {"ok": not unexpected and bool(results), "replay_label": C.HISTORICAL_REPLAY_LABEL,
            "fixtures": results, "unexpected_drift": unexpected}
