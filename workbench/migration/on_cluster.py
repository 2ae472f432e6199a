"""The dry-run's passes over a dataset's history on a cluster.

`cluster_history(client, DIR, draft, rulebook_id, scope, …)` returns what
`workbench.migration.run.load_history` returns for a dataset (the `History` the summary names:
its versions and source) and the `Passes` that `workbench.migration.compute.compute` takes
instead of reading the rows itself:

1. one task per unit, one export run's files in one (scope, month) partition (`_partitions`,
   `replay_partition`): it checks every listed file of its unit (decisions, outcomes, the
   rulebook's facts) as the single-process read checks every file, reads the unit's history
   exactly as `workbench.migration.history` reads the whole (`history_of_files`), counts its
   versions, and when the unit is in the dry-run's scope makes the replay passes
   (`_replay_passes`: the decisions counted by stored outcome, month and the draft's pick; the
   rows that flip or go to the scalar evaluator);
2. the client adds the counts and stacks the rows (`ClusterPasses.replay`), and compute goes on
   as in one process;
3. the flipped decisions' latest outcomes: per batch of units of their scopes (about
   OUTCOME_ROWS_PER_TASK outcome records each), the latest record of each flipped decision it
   holds (`latest_outcomes_of`; the ids handed to the cluster once), then on the client the
   latest of those (the latest of a union is the latest of the parts' latest).

The draft travels as its JSON and is compiled once per worker process (`load_draft`), as on the client.
The tasks are the dry-run's own; `workbench.cluster` only maps them over the workers (`run_all`),
so the dry-run sits above the cluster and the cluster knows nothing of it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from functools import partial as bind
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import polars as pl

from workbench.cluster import run_all
from workbench.dataset.integrity import ListedFile, check_files, listed_files
from workbench.dataset.location import DatasetError, open_location
from workbench.dataset.manifest import DatasetManifest
from workbench.dataset.partwriter import run_of
from workbench.engines import rulebook_polars as rp
from workbench.migration import compute as dry_run_compute
from workbench.migration.draft import Draft, load_draft
from workbench.migration.errors import DryRunError
from workbench.migration.history import (
    OUTCOME_COLUMNS,
    History,
    _scan,
    dataset_source,
    history_of_files,
    holds_of_files,
    read_manifest,
    replay_base,
    scans_of_files,
)

if TYPE_CHECKING:
    from workbench.cluster import Client

__all__ = ["ClusterPasses", "Partition", "cluster_history", "latest_outcomes_of", "replay_partition"]


@dataclass(frozen=True)
class Partition:
    """The listed files of one export run in one (scope, month) partition that a dry-run reads."""

    scope: str
    month: str
    decisions: list[ListedFile]
    outcomes: list[ListedFile]
    facts: list[ListedFile]


@dataclass(frozen=True)
class Replayed:
    """A partition's versions (`summarize_decisions`) and, in scope, its replay passes."""

    versions: pl.DataFrame
    grouped: pl.DataFrame | None
    selected: pl.DataFrame | None


def _checked(uri: str, entries: Sequence[ListedFile]) -> list[str]:
    try:
        return check_files(open_location(uri), entries)
    except DatasetError as error:
        raise DryRunError("DATASET_INVALID", str(error)) from None


@lru_cache(maxsize=4)
def _compiled(draft_json: str, rulebook_id: str) -> Draft:
    """The draft compiled once per worker process and dry-run (its JSON is the key)."""
    return load_draft(json.loads(draft_json), rulebook_id)


def replay_partition(uri: str, draft_json: str, rulebook_id: str, scope: str | None, part: Partition) -> Replayed:
    """On a worker: check the unit's files, read its history, count its versions and, in the
    dry-run's scope, make the replay passes of `compute` over it (`draft_json`: the draft as JSON)."""
    decision_files, facts_files = _checked(uri, part.decisions), _checked(uri, part.facts)
    _checked(uri, part.outcomes)  # read later, by `latest_outcomes_of`
    compiled = _compiled(draft_json, rulebook_id)
    history = history_of_files(rulebook_id, None, compiled.polars.paths, decision_files=decision_files,
                               outcome_files=[], facts_files=facts_files, source=None)
    if not history.versions.height or (scope is not None and part.scope != scope):
        return Replayed(history.versions, None, None)
    grouped, selected = dry_run_compute._replay_passes(history, compiled, rp.outcome_table(compiled.polars))
    return Replayed(history.versions, grouped, selected)


def latest_outcomes_of(uri: str, entries: Sequence[ListedFile], *, decision_ids: pl.Series) -> pl.DataFrame:
    """On a worker: in these outcome files (checked by `replay_partition`), the latest outcome
    record of each of `decision_ids` they hold (`decision_id`, `reported_at`, `receipt_id`,
    `status`). The latest of a decision's records is the latest of the files' latest ones."""
    location = open_location(uri)
    outcomes = _scan([location.path(entry.path) for entry in entries], OUTCOME_COLUMNS)
    return (outcomes.filter(pl.col("decision_id").is_in(decision_ids.implode()))
            .group_by("decision_id").agg(pl.col("reported_at", "receipt_id", "status")
                                         .sort_by(["reported_at", "receipt_id"]).last())
            .collect(engine="streaming"))


@dataclass(frozen=True)
class ClusterPasses:
    """`compute`'s passes from the partitions' results (`Passes`)."""

    client: Client
    uri: str
    replayed: list[Replayed]
    outcome_files: Mapping[str, list[list[ListedFile]]]  # per scope, its units' outcome files

    def replay(self, history: History, draft: Draft, table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        done = [r for r in self.replayed if r.grouped is not None and r.selected is not None]
        return (pl.concat([r.grouped for r in done if r.grouped is not None], how="vertical_relaxed"),
                pl.concat([r.selected for r in done if r.selected is not None], how="vertical_relaxed"))

    def latest_outcomes(self, flipped: pl.DataFrame) -> pl.DataFrame:
        """The flipped decisions' latest outcome status: each unit's latest records of them (one
        task per unit of their scopes, the ids handed to the cluster once), then the latest of those."""
        scopes = sorted(set(flipped["scope"].to_list()) & set(self.outcome_files))
        batches = [batch for scope in scopes for batch in _batches(self.outcome_files[scope])]
        found = run_all(self.client, bind(latest_outcomes_of, self.uri), batches, decision_ids=flipped["decision_id"])
        empty = pl.DataFrame(schema={name: OUTCOME_COLUMNS[name] for name in ("decision_id", "reported_at",
                                                                             "receipt_id", "status")})
        latest = pl.concat([empty, *found], how="vertical_relaxed").lazy()
        return dry_run_compute.latest_outcomes(latest).collect()


OUTCOME_ROWS_PER_TASK = 1_000_000  # outcome records one task of the flips' outcome lookup reads, about


def _batches(units: Sequence[Sequence[ListedFile]]) -> list[list[ListedFile]]:
    """Units' outcome files in consecutive batches of about OUTCOME_ROWS_PER_TASK records (by
    the manifest's row counts): few tasks for a small history, bounded tasks for a large one."""
    batches: list[list[ListedFile]] = [[]]
    rows = 0
    for files in units:
        if batches[-1] and rows >= OUTCOME_ROWS_PER_TASK:
            batches.append([])
            rows = 0
        batches[-1].extend(files)
        rows += sum(max(entry.rows, 0) for entry in files)
    return [batch for batch in batches if batch]


def _partitions(manifest: DatasetManifest, rulebook_id: str) -> list[Partition]:
    """The dry-run's units: the files of one export run in one (scope, month) partition, of the
    decisions, the outcomes and the rulebook's facts. A run writes a decision's facts row beside
    it (same run, same partition), so each unit's facts are exactly those of its decisions, and a
    unit is bounded by one run's rows whatever the size of a month."""
    found: dict[tuple[str, str, int], dict[str, list[ListedFile]]] = defaultdict(lambda: defaultdict(list))
    for kind, name in (("decisions", None), ("outcomes", None), ("facts", rulebook_id)):
        for entry in listed_files(manifest, kind, name):
            keys = dict(part.split("=", 1) for part in entry.path.split("/") if part.startswith(("scope=", "month=")))
            run = run_of(entry.path.rsplit("/", 1)[-1])
            found[(keys.get("scope", ""), keys.get("month", ""), -1 if run is None else run)][kind].append(entry)
    return [Partition(unquote(scope), month, files["decisions"], files["outcomes"], files["facts"])
            for (scope, month, _run), files in sorted(found.items())]


def _merged_versions(replayed: Sequence[Replayed]) -> pl.DataFrame:
    """The partitions' versions added up: per scope, version and rulebook hash."""
    return pl.concat([r.versions for r in replayed], how="vertical_relaxed").group_by(
        ["scope", "policy_version", "rulebook_hash"]).agg(
        pl.col("decisions").sum(), pl.col("first").min(), pl.col("last").max())


def cluster_history(client: Client, dataset: str | Path, draft: object, rulebook_id: str, scope: str | None, *,
                    anchors: Any = None) -> tuple[History, ClusterPasses]:
    """The dataset's history of the rulebook (its versions and source; its rows stay on the
    workers, so its frames are empty) and the passes over it made on the cluster."""
    root = str(dataset)
    manifest, raw, trusted = read_manifest(root, anchors)
    try:
        partitions = _partitions(manifest, rulebook_id)
    except DatasetError as error:
        raise DryRunError("DATASET_INVALID", str(error)) from None
    draft_json = json.dumps(draft, sort_keys=True, ensure_ascii=False)
    replayed = run_all(client, bind(replay_partition, str(root), draft_json, rulebook_id, scope), partitions)
    outcome_files: dict[str, list[list[ListedFile]]] = defaultdict(list)
    for part in partitions:
        outcome_files[part.scope].append(part.outcomes)
    versions = _merged_versions(replayed) if replayed else pl.DataFrame(
        schema={"scope": pl.String, "policy_version": pl.String, "rulebook_hash": pl.String, "decisions": pl.Int64,
                "first": pl.Datetime("ms", "UTC"), "last": pl.Datetime("ms", "UTC")})
    # The history's frames for whoever reads them after the run: lazy scans of the files the
    # workers checked (nothing is read here), the base in its general (joined) form.
    location = open_location(str(root))

    def files(kind: str) -> list[str]:
        return [location.path(entry.path) for part in partitions for entry in getattr(part, kind)]

    _every, decisions, outcomes, facts = scans_of_files(
        rulebook_id, scope, load_draft(draft, rulebook_id).polars.paths, decision_files=files("decisions"),
        outcome_files=files("outcomes"), facts_files=files("facts"))
    # The holds are few (one per held decision): read on the client, for the measured cost of a hold.
    holds = holds_of_files(_checked(str(root), listed_files(manifest, "holds")), rulebook_id, scope)
    history = History(rulebook_id, scope, decisions, replay_base(decisions, facts, covered=False), outcomes,
                      dataset_source(dataset, manifest, raw, trusted), versions, holds)
    return history, ClusterPasses(client, str(root), replayed, dict(outcome_files))
