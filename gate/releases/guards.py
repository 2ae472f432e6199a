"""Guarded activation, pure rules (issue 42, docs/releases.md "Guarded activation").

Where a scope's policy sets `require_dry_run`, an activation (and a canary above
`dry_run_canary_percent`) carries the dry-run manifest (`rulebook_migration_v1`, the workbench's
export or `gate dry-run`'s) of exactly the version it moves, signed by a trusted key, over a
history whose newest decision is within `dry_run_max_age_seconds`, and accepted by
`gate migration check` (gate.replay.migration_check). `manifest_problems` names what is wrong.

The manifest is bound to the scope and the history it covered (issue 64), from what it signs:
its `dry_run.scope` is the activation's scope (a dry-run of another scope, or of every scope, is
refused), and the scope's chain head a ledger dry-run read (`dry_run.source.scope_head`) is one
this scope's chain had: a prefix of the chain now, whose first decision left out has been in the
ledger no longer than `dry_run_max_age_seconds` (`head_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gate.keys.anchors import TrustAnchors
from gate.releases.model import Version
from gate.replay.migration_check import check_migration
from gate.strict_json import JsonValue


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


def staleness_problem(dry_run: Mapping[str, JsonValue], now: datetime, max_age_seconds: int) -> str | None:
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


def scope_problem(dry_run: Mapping[str, JsonValue], scope: str) -> str | None:
    """Why a dry-run does not cover `scope`'s history (None when it does): it ran over another
    scope, or over every scope (`dry_run.scope` null)."""
    covered = dry_run.get("scope")
    if covered == scope:
        return None
    what = "every scope's history" if covered is None else "another scope's history"
    return f"the dry-run ran over {what}, not this scope's (dry_run.scope): run it with --scope {scope}"


def stated_head(dry_run: Mapping[str, JsonValue]) -> Mapping[str, JsonValue] | None:
    """The scope's chain head the dry-run states it covered (`dry_run.source.scope_head`), if any."""
    source = dry_run.get("source")
    head = source.get("scope_head") if isinstance(source, Mapping) else None
    return head if isinstance(head, Mapping) else None


def head_problem(head: Mapping[str, Any], current: Mapping[str, Any] | None, covered_link_hash: str | None,
                 first_left_out: datetime | None, now: datetime, max_age_seconds: int) -> str | None:
    """Why the head a dry-run covered is not this scope's, or older than the policy allows:
    `current` is the scope's chain head now, `covered_link_hash` the link hash at the covered
    size, `first_left_out` when the first decision after it was made (None: none)."""
    size = head.get("size")
    if current is None or head.get("chain_id") != current["chain_id"] or not isinstance(size, int) \
            or isinstance(size, bool) or size > int(current["size"]) or covered_link_hash != head.get("head_link_hash"):
        return "the dry-run covered a history this scope's audit chain does not hold (dry_run.source.scope_head)"
    if first_left_out is None:
        return None
    moment = first_left_out if first_left_out.tzinfo else first_left_out.replace(tzinfo=UTC)
    age = (now - moment).total_seconds()
    if age > max_age_seconds:
        return (f"the dry-run covered the scope's chain up to {size} of {current['size']} decisions; the first one "
                f"it left out is {int(age)} s old, older than the scope's bound of {max_age_seconds} s "
                "(dry_run_max_age_seconds): run the dry-run again")
    return None
