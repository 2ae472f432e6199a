"""The dataset manifest's one home (`workbench.dataset.manifest`) says what the writers write: every
member of a manifest written by an export (with holds, two runs, signed), a rollup rebuild and the
synthetic generator is declared there with its type, and every required member is present. A
writer that adds, renames or retypes a member without declaring it fails here."""

from __future__ import annotations

import json
import types
import typing
from datetime import UTC, datetime

import pytest

from tests.workbench.hold_support import HoldWriter
from tests.workbench.test_export import fill
from tests.workbench.test_hold_export import seed
from workbench.dataset.export import export_ledger
from workbench.dataset.manifest import DatasetManifest
from workbench.dataset.rebuild import rebuild_rollups
from workbench.dataset.synth import synthesize


def problems(value: object, kind: object, where: str) -> list[str]:
    """Where `value` (parsed JSON) does not have the type `kind` (a TypedDict, dict[str, X],
    list[X], a union, a Literal or a plain type)."""
    if typing.is_typeddict(kind):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        # Read from the hints: under `from __future__ import annotations` a TypedDict's own
        # `__required_keys__` cannot see `NotRequired` (Python 3.11).
        hints = typing.get_type_hints(kind, include_extras=True)
        found = [f"{where}.{key}: not declared" for key in value if key not in hints]
        found += [f"{where}.{key}: missing" for key, hint in hints.items()
                  if typing.get_origin(hint) is not typing.NotRequired and key not in value]
        for key, item in value.items():
            if key in hints:
                found += problems(item, _unwrap(hints[key]), f"{where}.{key}")
        return found
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        return [p for key, item in value.items() for p in problems(item, args[1], f"{where}.{key}")]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: not a list"]
        return [p for index, item in enumerate(value) for p in problems(item, args[0], f"{where}[{index}]")]
    if origin in (typing.Union, types.UnionType):
        tried = [problems(value, option, where) for option in args]
        return [] if any(not found for found in tried) else [f"{where}: {value!r} is none of {kind}"]
    if origin is typing.Literal:
        return [] if value in args else [f"{where}: {value!r} is not one of {args}"]
    if kind is type(None):
        return [] if value is None else [f"{where}: {value!r} is not null"]
    if kind is float:
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{where}: not a number"]
    if kind is int and isinstance(value, bool):
        return [f"{where}: a boolean, not an integer"]
    return [] if isinstance(value, kind) else [f"{where}: {value!r} is not {kind}"]  # type: ignore[arg-type]


def _unwrap(kind: object) -> object:
    """The type inside `NotRequired[...]`."""
    return typing.get_args(kind)[0] if typing.get_origin(kind) is typing.NotRequired else kind


def read(root) -> dict:
    return json.loads((root / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture
def writer(database_url, tmp_path):
    writer = HoldWriter(database_url, tmp_path / "keys.json")
    yield writer
    writer.close()


def test_an_export_a_rebuild_and_a_synthetic_dataset_write_only_declared_members(writer, tmp_path):
    seed(writer)
    fill(writer, 8)
    root, signer = tmp_path / "ds", writer.signing.receipt_signer()
    export_ledger(writer.ledger, str(root), now=datetime(2026, 3, 1, tzinfo=UTC), settle_seconds=0, signer=signer)
    first = read(root)
    fill(writer, 4, start=20)
    export_ledger(writer.ledger, str(root), now=datetime(2026, 3, 2, tzinfo=UTC), settle_seconds=0, signer=signer)
    second = read(root)
    rebuild_rollups(str(root), signer=signer)
    rebuilt = read(root)
    synthetic = synthesize(str(tmp_path / "synthetic"), decisions=300, seed=2, chunk=200)
    assert {"hold_chains", "last_run", "rollups", "signature"} <= set(second)
    assert rebuilt["last_run"]["rollups_rebuilt"] is True and "synthesis" in synthetic
    for name, manifest in (("first", first), ("second", second), ("rebuilt", rebuilt), ("synthetic", synthetic)):
        assert problems(manifest, DatasetManifest, name) == []


def test_the_check_finds_an_undeclared_a_missing_and_a_mistyped_member():
    """The checker above can fail: each kind of disagreement is named."""
    manifest = {"dataset_schema_version": "decision_dataset_v1", "synthetic": False, "generator": "gate export",
                "created_at": "t", "updated_at": "t", "runs": "1", "tables": {}, "facts": {}, "chains": {},
                "ledger_head": {"decisions": 0, "scopes": 0, "rows": {}, "head_hash": "h"}, "extra": 1}
    assert sorted(problems(manifest, DatasetManifest, "m")) == [
        "m.extra: not declared", "m.runs: '1' is not <class 'int'>", "m.watermarks: missing"]
