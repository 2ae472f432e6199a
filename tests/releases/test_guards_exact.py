"""gate/releases/guards.py pinned by value: when a dry-run manifest allows moving a version (its
own check by `gate migration check`, the version it tested, how fresh its history is). The
manifest check itself is gate.replay.migration_check's (a stand-in records what it is asked
here); test_guarded_activation.py walks a real dry-run end to end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from gate.releases import guards
from gate.releases.guards import dataset_as_of, manifest_problems, staleness_problem
from gate.releases.model import Version

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
HASH = "a" * 64
ANCHORS = object()


def _manifest(**changes: Any) -> dict[str, Any]:
    manifest = {"to": {"rulebook_id": "pricing_exception", "rulebook_hash": HASH},
                "dry_run": {"history_versions": [{"last": "2026-11-26T11:00:00.000Z"}]}}
    manifest.update(changes)
    return manifest


class MigrationCheck:
    """Stands in for gate.replay.migration_check.check_migration."""

    def __init__(self, ok: bool = True, problems: list[str] | None = None) -> None:
        self.answer = {"ok": ok, "problems": problems or []}
        self.calls: list[tuple[Any, Any]] = []

    def __call__(self, manifest, *, anchors):
        self.calls.append((manifest, anchors))
        return self.answer


@pytest.fixture
def check(monkeypatch):
    def install(**answer: Any) -> MigrationCheck:
        stand_in = MigrationCheck(**answer)
        monkeypatch.setattr(guards, "check_migration", stand_in)
        return stand_in
    return install


def _problems(manifest: Any, version: Version | None = None, max_age: int = 3600) -> list[str]:
    return manifest_problems(manifest, "pricing_exception", version or Version("v2", HASH), ANCHORS, NOW,
                             max_age)  # type: ignore[arg-type]


def test_a_fresh_manifest_of_the_version_passes_its_own_check(check):
    stand_in = check()
    manifest = _manifest()
    assert _problems(manifest) == []
    [(asked, anchors)] = stand_in.calls
    assert asked == manifest and asked is not manifest and type(asked) is dict and anchors is ANCHORS


@pytest.mark.parametrize("manifest", [None, [], "x", {"to": {}}, {"dry_run": None}, {"dry_run": []}])
def test_only_a_dry_runs_manifest_is_read(check, manifest):
    stand_in = check()
    assert _problems(manifest) == [("migration_manifest must be a dry-run's signed manifest (rulebook_migration_v1 "
                                   "with dry_run)")]
    assert stand_in.calls == []


def test_a_manifest_its_check_cannot_run_over_says_why(check):
    check(ok=False, problems=["not a rulebook_migration_v1", "no to"])
    assert _problems(_manifest()) == ["gate migration check: not a rulebook_migration_v1", "gate migration check: no to"]
    check(ok=False)
    assert _problems(_manifest()) == ["gate migration check could not run"]


def test_a_failed_check_another_version_and_a_stale_history_are_each_named(check):
    check(problems=["migration_hash does not match the manifest (edited)"])
    stale = _manifest(dry_run={"history_versions": [{"last": "2026-11-26T10:00:00.000Z"}]},
                      to={"rulebook_id": "pricing_exception", "rulebook_hash": "b" * 64})
    assert _problems(stale) == [
        "gate migration check: migration_hash does not match the manifest (edited)",
        "the dry-run tested another rulebook: to.rulebook_hash is not the hash of version 'v2'",
        ("the history the dry-run ran over ends 7200 s ago, staler than the scope's bound of 3600 s "
        "(dry_run_max_age_seconds): run the dry-run again")]


@pytest.mark.parametrize("to", [{"rulebook_id": "other", "rulebook_hash": HASH},
                                {"rulebook_id": "pricing_exception", "rulebook_hash": "b" * 64},
                                {"rulebook_hash": HASH}, {}])
def test_a_manifest_of_another_rulebook_or_version_is_refused(check, to):
    check()
    assert _problems(_manifest(to=to)) == [
        "the dry-run tested another rulebook: to.rulebook_hash is not the hash of version 'v2'"]


def test_the_history_must_end_within_the_bound(check):
    check()
    assert _problems(_manifest(), max_age=3600) == []
    assert _problems(_manifest(), max_age=3599) == [
        ("the history the dry-run ran over ends 3600 s ago, staler than the scope's bound of 3599 s "
        "(dry_run_max_age_seconds): run the dry-run again")]
    assert _problems(_manifest(dry_run={})) == ["the dry-run states no decision time for the history it ran over"]


def test_the_history_ends_at_its_newest_readable_decision_time():
    assert dataset_as_of({}) is None
    assert dataset_as_of({"history_versions": None}) is None
    assert dataset_as_of({"history_versions": [{"last": None}, {"last": 5}, {"first": "2026-01-01"}, "x"]}) is None
    naive = dataset_as_of({"history_versions": [{"last": "2026-11-26T09:00:00"}]})
    assert naive == datetime(2026, 11, 26, 9, tzinfo=UTC)
    zoned = dataset_as_of({"history_versions": [{"last": "2026-11-26T09:00:00+05:00"}, {"last": "2026-11-26T05:00Z"}]})
    assert zoned == datetime(2026, 11, 26, 5, tzinfo=UTC)
    assert zoned.tzinfo == timezone(timedelta(0))


def test_staleness_is_measured_to_the_second_and_allowed_at_the_bound():
    dry_run = {"history_versions": [{"last": "2026-11-26T11:00:00.000Z"}]}
    assert staleness_problem(dry_run, NOW, 3600) is None
    late = NOW + timedelta(milliseconds=500)
    assert staleness_problem(dry_run, late, 3600) == (
        "the history the dry-run ran over ends 3600 s ago, staler than the scope's bound of 3600 s "
        "(dry_run_max_age_seconds): run the dry-run again")
    assert staleness_problem(dry_run, NOW - timedelta(hours=2), 60) is None  # a history from the future is fresh
