"""Guarded activation, pure rules (issue 42, docs/releases.md "Guarded activation").

Where a scope's policy sets `require_dry_run`, an activation (and a canary above
`dry_run_canary_percent`) carries the dry-run manifest (`rulebook_migration_v1`, the workbench's
export or `gate dry-run`'s) of exactly the version it moves, signed by a trusted key, over a
history whose newest decision is within `dry_run_max_age_seconds`, and accepted by
`gate migration check` (gate.replay.migration_check). `manifest_problems` names what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gate.keys.anchors import TrustAnchors
from gate.releases.model import Version
from gate.replay.migration_check import check_migration


def dataset_as_of(dry_run: Mapping[str, Any]) -> datetime | None:
    """The newest decision time of the history a dry-run re-evaluated (None when it states none)."""
    times = []
    for entry in dry_run.get("history_versions") or ():
        last = entry.get("last") if isinstance(entry, Mapping) else None
        try:
            moment = datetime.fromisoformat(last) if isinstance(last, str) else None
        except ValueError:
            moment = None
        if moment is not None:
            times.append(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    return max(times) if times else None


def staleness_problem(dry_run: Mapping[str, Any], now: datetime, max_age_seconds: int) -> str | None:
    as_of = dataset_as_of(dry_run)
    if as_of is None:
        return "the dry-run states no decision time for the history it ran over"
    age = (now - as_of).total_seconds()
    if age > max_age_seconds:
        return (f"the history the dry-run ran over ends {int(age)} s ago, staler than the scope's bound of "
                f"{max_age_seconds} s (dry_run_max_age_seconds): run the dry-run again")
    return None


def manifest_problems(manifest: Any, rulebook_id: str, version: Version, anchors: TrustAnchors, now: datetime,
                      max_age_seconds: int) -> list[str]:
    """Why a dry-run manifest does not allow moving `version` (empty when it does)."""
    if not isinstance(manifest, Mapping) or not isinstance(manifest.get("dry_run"), Mapping):
        return ["migration_manifest must be a dry-run's signed manifest (rulebook_migration_v1 with dry_run)"]
    checked = check_migration(dict(manifest), anchors=anchors)
    problems = [f"gate migration check: {p}" for p in checked["problems"]]
    if not checked["ok"]:
        return problems or ["gate migration check could not run"]
    to = manifest["to"]
    if to.get("rulebook_id") != rulebook_id or to.get("rulebook_hash") != version.rulebook_hash:
        problems.append(f"the dry-run tested another rulebook: to.rulebook_hash is not the hash of version "
                        f"{version.version!r}")
    stale = staleness_problem(manifest["dry_run"], now, max_age_seconds)
    return problems + ([stale] if stale else [])
