"""What a dry-run compares the draft with: the version production runs, or the stored history.

A dry-run answers "what changes if I ship this draft instead of what runs today". Its *baseline*
is the old side of every comparison (transitions, flips, impact, review load):

- a version (`kind` "version"): the scope's active release version, or where the rulebook has no
  release the newest version callers sent inline (`WorkbenchStore.current_rulebook`,
  `gate dry-run --baseline current`), or a rulebook file (`--baseline FILE`). It is replayed over
  the same history as the draft, so an unchanged draft changes nothing;
- the history (`kind` "history"): the verdicts each decision got when it was made, by whichever
  version ran then. Over a history that mixes versions this counts the differences between the
  draft and every past version; it is kept as a second, named view (the Migration page's
  "against history", `--baseline history`).

Outcomes are those observed in the history either way: a decision the history blocked was never
executed, so its outcome stays unobservable whatever the baseline says
(`workbench.migration.flips`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Literal, TypedDict

import polars as pl

from workbench.engines import rulebook_polars as rp
from workbench.migration.compute import replay
from workbench.migration.draft import Draft, load_draft
from workbench.migration.errors import DryRunError
from workbench.migration.history import OLD_NAMES, History

__all__ = ["HISTORY", "Baseline", "against", "compared_with", "compiled", "describe"]

class HistoryBaseline(TypedDict):
    """`dry_run.baseline` against the stored history."""

    kind: Literal["history"]
    description: str


class VersionBaseline(TypedDict):
    """`dry_run.baseline` against a version replayed over the same history."""

    kind: Literal["version"]
    version: str
    rulebook_hash: str
    source: str
    description: str


Baseline = HistoryBaseline | VersionBaseline

HISTORY: HistoryBaseline = {
    "kind": "history",
    "description": "the verdicts stored when each decision was made, by the version that ran then",
}
# The baseline's replayed column → the replay base's old column it stands for.
_AS_OLD = {"new_verdict": "old_verdict", "new_rule": "old_rule", "new_reason": "old_reason",
           "new_application_verdict": "old_application_verdict", "new_action": "old_action"}


def compiled(baseline: object, rulebook_id: str) -> Draft | None:
    """The compiled baseline version (a parsed rulebook of `rulebook_id`), or None for the stored
    history (BASELINE_INVALID when it is not a valid version of that rulebook)."""
    if baseline is None:
        return None
    try:
        return load_draft(baseline, rulebook_id)
    except DryRunError as exc:
        raise DryRunError("BASELINE_INVALID", f"the baseline version: {exc.message}", exc.errors) from None


def describe(baseline: Draft | None, source: str | None) -> Baseline:
    """The `dry_run.baseline` member: which baseline the figures are against. `source` says where
    a version came from (active release, newest inline version, a file)."""
    if baseline is None:
        return HISTORY.copy()
    return {"kind": "version", "version": baseline.rulebook["version"], "rulebook_hash": baseline.rulebook_hash,
            "source": source or "given",
            "description": f"version {baseline.rulebook['version']} ({source or 'given'}) replayed over the same history"}


def against(history: History, baseline: Draft) -> History:
    """`history` with its old side replaced by `baseline` replayed over it (vector and scalar rows
    alike, `compute.replay`); a decision without facts keeps its stored side (no version can
    replay it, and the draft counts it as unreplayable). The base keeps its row order."""
    replayed, _ = replay(history, baseline)
    ran = pl.col("replay") != rp.REPLAY_NONE
    sides = replayed.select("decision_id", ran.alias("_ran"), *(pl.col(new).alias(f"_{old}") for new, old in _AS_OLD.items()))
    old_columns = list(OLD_NAMES.values())
    base = history.base.join(sides, on="decision_id", how="left", maintain_order="left").with_columns(
        pl.when(pl.col("_ran")).then(pl.col(f"_{old}")).otherwise(pl.col(old)).alias(old) for old in old_columns
    ).drop("_ran", *(f"_{old}" for old in old_columns))
    return replace(history, base=base)


def compared_with(baseline: Mapping[str, Any] | None) -> str:
    """"Compared with …": the line the pages, the CLI and the reports print above the figures (a
    result from before the member compared with the history)."""
    if not baseline or baseline.get("kind") != "version":
        return f"compared with the history ({HISTORY['description']})"
    return f"compared with {baseline.get('description')}"
