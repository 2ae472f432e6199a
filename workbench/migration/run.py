"""The dry-run as one library call (the CLI and the dashboard call this), and its writer.

`dry_run(draft, rulebook_id, scope=…, dataset=… | ledger=…)` checks every input before any
work (draft with exact schema paths, history source, rulebook known, history not empty) and
returns a `DryRun`: the typed result and its unsigned `rulebook_migration_v1` manifest.
`write_dry_run(out, manifest, signer)` signs the manifest and writes `migration.json`,
`report.md` and `report.html`; `flips.parquet` (every decision whose verdict flips) is written
by the dry-run itself when it is given a `flips_path` (`workbench.migration.compute`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from gate.keys.signing import ReceiptSigner
from workbench.migration import baseline as baselines
from workbench.migration.compute import compute
from workbench.migration.draft import Draft, load_draft
from workbench.migration.errors import DryRunError
from workbench.migration.history import History, from_dataset, from_ledger, scope_head_of
from workbench.migration.impact import CostModel
from workbench.migration.manifest import MigrationManifest, build_manifest, sign_manifest
from workbench.migration.report import render_html, render_markdown
from workbench.migration.summary import DryRunResult, summarize

__all__ = ["DryRun", "checked_history", "dry_run", "load_history", "write_dry_run"]

OUTPUT_FILES = ("migration.json", "report.md", "report.html", "flips.parquet")


@dataclass(frozen=True)
class DryRun:
    result: DryRunResult
    manifest: MigrationManifest  # unsigned
    history: History
    draft: Draft


def load_history(rulebook_id: str, scope: str | None, *, dataset: str | Path | None, ledger: Any,
                 paths: tuple[str, ...], anchors: Any = None) -> History:
    """The rulebook's history in `scope`, refusing an unknown rulebook and an empty history.
    `anchors`: a dataset's manifest must be signed by one of those keys. A ledger's history of one
    scope states the scope's chain head it covered (`source.scope_head`)."""
    head = None
    if dataset is not None:
        history = from_dataset(dataset, rulebook_id, scope, paths, anchors)
    elif ledger is not None:
        if scope is not None:  # read before the decisions: the history covers at least this head (issue 64)
            from gate.ledger import stream

            head = scope_head_of(stream.chain_heads_of(ledger, scope))
        history = from_ledger(ledger, rulebook_id, None)
    else:
        raise ValueError("give a dataset or a ledger")
    checked = checked_history(history, rulebook_id, scope)
    if ledger is not None and dataset is None and scope is not None and checked.source is not None:
        checked.source["scope_head"] = head  # the scope's chain head it covered, signed with the manifest
    return checked


def checked_history(history: History, rulebook_id: str, scope: str | None) -> History:
    """The history of `scope`, refusing an unknown rulebook and an empty history (RULEBOOK_UNKNOWN,
    HISTORY_EMPTY); a history read for every scope is narrowed to `scope`."""
    per_scope = history.per_scope()
    if not per_scope:
        raise DryRunError("RULEBOOK_UNKNOWN", f"no decision of rulebook {rulebook_id!r} in the history "
                          + (f"({history.source['kind']} {history.source['location']})" if history.source else ""))
    if scope is not None and not per_scope.get(scope):
        raise DryRunError("HISTORY_EMPTY", f"rulebook {rulebook_id!r} has no decision in scope {scope!r} "
                          f"(it has decisions in {len(per_scope)} other scope(s))")
    if scope is None or history.scope == scope:
        return history
    in_scope = pl.col("scope") == scope  # the ledger was read for every scope
    return replace(history, scope=scope, decisions=history.decisions.filter(in_scope),
                   base=history.base.filter(in_scope), outcomes=history.outcomes.filter(in_scope),
                   holds=None if history.holds is None else history.holds.filter(in_scope))


def dry_run(draft: object, rulebook_id: str, *, scope: str | None = None, dataset: str | Path | None = None,
            ledger: Any = None, created_at: str, flips_limit: int = 200,
            flips_path: Path | None = None, anchors: Any = None, cost: CostModel | None = None,
            cluster: Any = None, baseline: Any = None, baseline_source: str | None = None) -> DryRun:
    """Re-evaluate every historical decision of `rulebook_id` under `draft` (a parsed rulebook).

    Raises DryRunError for bad input before reading any history. `created_at` is the
    manifest's timestamp (the caller's clock); everything else is a function of the draft and
    the history, so the same inputs give the same `dry_run.result_hash`. `cost`: the author's
    cost model and outcome horizon for `dry_run.impact` (defaults when None). `anchors`
    (`gate.verify.TrustAnchors`): the dataset's manifest must be signed by one of those keys
    (DATASET_INVALID otherwise); its listed files are checked either way. `cluster`: a Dask
    client (`workbench.cluster.connect`) that reads and replays a dataset's partitions on its
    workers (`workbench.migration.on_cluster`); the result is the same. `baseline`: the version the
    draft is compared with (a parsed rulebook of the same id, replayed over the same history:
    `workbench.migration.baseline`; BASELINE_INVALID when it is not one), `baseline_source` where it
    came from; None compares with the stored history. A version baseline is replayed in this
    process (a cluster replays against the history only).
    """
    compiled = load_draft(draft, rulebook_id)
    base = baselines.compiled(baseline, rulebook_id)
    passes = None
    if cluster is not None and dataset is not None and base is None:
        from workbench.migration.on_cluster import cluster_history  # lazy: Dask only with a cluster

        loaded, passes = cluster_history(cluster, dataset, draft, rulebook_id, scope, anchors=anchors)
        history = checked_history(loaded, rulebook_id, scope)
    else:
        paths = tuple(dict.fromkeys(compiled.polars.paths + (base.polars.paths if base is not None else ())))
        history = load_history(rulebook_id, scope, dataset=dataset, ledger=ledger, paths=paths, anchors=anchors)
    replayed = baselines.against(history, base) if base is not None else history
    cost = cost or CostModel()
    computed = compute(replayed, compiled, flips_limit=flips_limit, flips_path=flips_path,
                       horizon_days=cost.outcome_horizon_days, passes=passes)
    result = summarize(history, compiled, computed, cost, baselines.describe(base, baseline_source))
    return DryRun(result, build_manifest(result, computed.changes, created_at), history, compiled)


def write_dry_run(out: str | Path, manifest: MigrationManifest, signer: ReceiptSigner | None) -> MigrationManifest:
    """Sign (when a signer is given) and write `migration.json`, `report.md`, `report.html`
    into `out` (created if needed; each file written to a temporary name, then renamed).
    Returns the manifest as written."""
    final = sign_manifest(manifest, signer) if signer is not None else manifest
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = {
        "migration.json": json.dumps(final, indent=2, ensure_ascii=False, sort_keys=True) + "\n",
        "report.md": render_markdown(final),
        "report.html": render_html(final),
    }
    for name, text in files.items():
        temporary = out / f".{name}.{os.getpid()}.tmp"
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, out / name)
    return final
