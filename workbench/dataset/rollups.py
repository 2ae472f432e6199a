"""Report rollups: each engine's partial aggregate per dataset partition, kept in the dataset.

The report engines are written as `partial → merge → finalize` (`workbench.engines.common`):
a partial is the additive state of a set of decisions and *all* outcome records of those
decisions, and `finalize(merge(partials))` equals the report over their union. A rollup is that
partial, computed once per **rollup partition** (`policy_id`, `policy_version`, decision
`scope`, decision `month`) and stored beside the rows, so a whole-history report reads a few
thousand small rows instead of every decision and outcome:

    DIR/rollups/run-<run>/<kind>.<state>.parquet

one file per engine state (`effectiveness.sample`, `anomalies.segments`, …), every partition's
rows in it, the partition in the key columns `rollup_policy_id`, `rollup_policy_version`,
`rollup_scope`, `rollup_month` (prefixed: several states have their own `scope`, `month` or
`policy_version` column).

Keeping them current (`update`, called by the export and the synthetic generator before they
commit the manifest): a run recomputes exactly the decision partitions it touched, the
(scope, month) directories it wrote decisions into and those holding the decisions of the
outcome records it wrote (a late outcome changes its decision's partition, not the month it
was reported in; the export looks those decisions up in the ledger by id), and copies every
other partition's rows from the previous run's rollups.
Everything is recomputed when the manifest has no rollups, or rollups of another version or of
another mapping of outcome statuses to effectiveness classes.

Reading (`RollupView`, made by `workbench.dataset.load.from_dataset` for a whole-history query): the
rows of the requested policy, version and scopes, stacked into one partial per engine, which
the engine's own `merge` and `finalize` turn into the report. So a report from rollups is, by
the engines' partition law, the report from the rows (a test holds them equal), and every
figure is still computed by one engine.

Memory: at most `BATCH_DECISIONS` decisions of one scope are read at a time (whole row groups;
a larger partition is split, its chunks' partials stored side by side, which the engines' merge
combines when they are read), with their outcomes and the facts columns the engines read,
whatever the size of the dataset or of one partition.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from workbench.dataset.convert import frame_of
from workbench.dataset.facts import facts_rows_of
from workbench.dataset.integrity import ListedFile, check_files, describe_file, iter_all
from workbench.dataset.location import DatasetError, Location, open_location
from workbench.dataset.manifest import DatasetManifest, FileEntry, RollupDigest, RollupsMember
from workbench.dataset.partwriter import WrittenFile
from workbench.dataset.schema import DECISION_ANALYSIS_COLUMNS
from workbench.engines import anomalies, benchmarks, effectiveness, fact_moments
from workbench.engines import fact_columns as fc

ROLLUP_VERSION = "report_rollups_v1"
ROLLUPS_DIR = "rollups"
KEYS = ("rollup_policy_id", "rollup_policy_version", "rollup_scope", "rollup_month")
BATCH_DECISIONS = 50_000  # decisions of one scope read together while rollups are computed

OUTCOME_COLUMNS = ("decision_id", "reported_at", "receipt_id", "status")

__all__ = [
    "BATCH_DECISIONS",
    "KEYS",
    "ROLLUPS_DIR",
    "ROLLUP_VERSION",
    "Chunk",
    "RollupView",
    "RunChecks",
    "RunChunks",
    "chunk_partials",
    "chunk_rows",
    "classes_hash",
    "current",
    "fact_moment_column",
    "files_by_partition",
    "partition_partials",
    "plan_chunks",
    "remove_runs",
    "update",
]


def classes_hash(classes: Mapping[str, str]) -> str:
    """sha256 of the status → effectiveness class mapping the partials were computed with."""
    return hashlib.sha256(json.dumps(dict(sorted(classes.items())), separators=(",", ":")).encode()).hexdigest()


def run_dir(run: int) -> str:
    return f"{ROLLUPS_DIR}/run-{run:06d}"


# --------------------------------------------------------------------------- computing


def partition_partials(decisions: pl.DataFrame, outcomes: pl.DataFrame, facts: Mapping[str, pl.DataFrame],
                       classes: Mapping[str, str]) -> dict[str, list[pl.DataFrame]]:
    """The rollup rows of some decisions of one scope (any months, policies and versions).

    `decisions`: rows in the dataset contract (`scope`, `month` included); `outcomes`: every
    outcome record of those decisions; `facts`: per rulebook id, its typed facts rows of those
    decisions (with `month`), absent when the dataset has no facts file for them. Each engine
    computes the partials of every partition at once (`partial(…, by=KEYS)`, every policy
    together); the facts' moments one policy at a time (each policy has its own facts table).
    Returns `{"<kind>.<state>": [frames, KEYS first]}`."""
    out: dict[str, list[pl.DataFrame]] = defaultdict(list)
    keyed = decisions.filter(pl.col("policy_id").is_not_null()).with_columns(
        pl.col("policy_id").alias(KEYS[0]), pl.col("policy_version").alias(KEYS[1]),
        pl.col("scope").alias(KEYS[2]), pl.col("month").alias(KEYS[3]))
    by = list(KEYS)
    # The outcomes of decisions without a policy are in `outcomes` too: the engines join them to
    # the decisions by id, so they never count.
    every, mine = keyed.lazy(), outcomes.lazy()
    partials = [
        ("effectiveness", effectiveness.partial(every, mine, by=by)),
        ("anomalies", anomalies.outcome_partial(every, mine, classes, by=by)),
        ("benchmarks", benchmarks.partial(every, mine, classes, own_scope=None, by=by)),
    ]
    for policy_id in sorted(keyed[KEYS[0]].unique().to_list()):
        part = keyed.filter(pl.col(KEYS[0]) == policy_id).lazy()
        rows = facts.get(policy_id)
        typed = None if rows is None else facts_rows_of(part, rows.lazy(), every_decision=False, carry=by)
        partials.append(("anomalies", fact_moments.facts_partial(part, typed, by)))
    for kind, state in partials:
        for name, frame in state.items():
            if frame.height:
                out[f"{kind}.{name}"].append(frame)
    return out


# --------------------------------------------------------------------------- reading files


def _parse(path: str) -> tuple[str, str, str] | None:
    """(table, scope, month) of a part file path relative to the dataset root."""
    parts = path.split("/")
    if len(parts) < 4 or not parts[-3].startswith("scope=") or not parts[-2].startswith("month="):
        return None
    table = "/".join(parts[:-3])
    return table, unquote(parts[-3][len("scope="):]), parts[-2][len("month="):]


def _read(location: Location, paths: Sequence[str], columns: Sequence[str] | Callable[[str], bool] | None,
          where: ds.Expression | None = None) -> pa.Table | None:
    """The files' rows (`where`) and columns: those named, those a predicate accepts, or all."""
    tables = []
    for path in paths:
        dataset = ds.dataset(location.path(path), format="parquet", filesystem=location.fs)
        if columns is None:
            names = dataset.schema.names
        elif callable(columns):
            names = [c for c in dataset.schema.names if columns(c)]
        else:
            names = [c for c in columns if c in dataset.schema.names]
        tables.append(dataset.to_table(columns=names, filter=where))
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="default")


def fact_moment_column(name: str) -> bool:
    """The facts table's columns the anomaly engine's fact moments read: the row's identity and
    state, the JSON of partial rows, and each path's kind and number (`fact_moments._typed`)."""
    return name in ("decision_id", fc.STATE_COLUMN, "facts_json") or name.endswith(("::t", "::n"))


def files_by_partition(manifest: DatasetManifest, table: str) -> dict[tuple[str, str], list[FileEntry]]:
    """The table's listed Parquet files by (scope, month). An Iceberg dataset keeps no rollups and
    its rows are read through its catalog: refused here (DatasetError), never read as empty, so a
    rebuild or a cluster report over it fails instead of writing or trusting empty figures."""
    if manifest.get("layout") == "iceberg":
        raise DatasetError("this dataset is in the Iceberg layout, which keeps no report rollups and whose rows "
                           "are read through its catalog: rebuilding rollups and cluster reports need the "
                           "Parquet layout (gate export --format parquet into another location)")
    out: dict[tuple[str, str], list[FileEntry]] = defaultdict(list)
    entries = manifest["tables"][table]["files"] if table in manifest["tables"] else []
    for entry in entries:
        parsed = _parse(entry["path"])
        if parsed is not None:
            out[(parsed[1], parsed[2])].append(entry)
    return out


def _facts_files(manifest: DatasetManifest) -> dict[str, dict[tuple[str, str], list[str]]]:
    out: dict[str, dict[tuple[str, str], list[str]]] = {}
    for rulebook_id, item in manifest.get("facts", {}).items():
        per = out.setdefault(rulebook_id, defaultdict(list))
        for entry in item["files"]:
            parsed = _parse(entry["path"])
            if parsed is not None:
                per[(parsed[1], parsed[2])].append(entry["path"])
    return out


def _decisions(location: Location, pieces: Sequence[tuple[str, str, list[int]]], scope: str) -> pl.DataFrame | None:
    """The decisions of some row groups of some decision files of one scope, with `scope` and `month`."""
    frames = []
    for month, path, groups in pieces:
        with location.fs.open_input_file(location.path(path)) as handle:
            parquet = pq.ParquetFile(handle)
            names = [c for c in DECISION_ANALYSIS_COLUMNS if c in parquet.schema_arrow.names]
            table = parquet.read_row_groups(groups, columns=names)
        if table.num_rows:
            frames.append(frame_of(table).with_columns(pl.lit(scope).alias("scope"), pl.lit(month).alias("month")))
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


# --------------------------------------------------------------------------- update


def _of_last_run(manifest: DatasetManifest) -> RollupsMember | None:
    """The manifest's rollups when they are of this version and of its last committed run."""
    rollups = manifest.get("rollups")
    if (isinstance(rollups, dict) and rollups.get("version") == ROLLUP_VERSION
            and rollups.get("run") == manifest.get("runs") and isinstance(rollups.get("files"), dict)):
        return rollups
    return None


def current(manifest: DatasetManifest, classes: Mapping[str, str]) -> bool:
    """Whether the manifest's rollups can be used and carried over: `_of_last_run`, computed
    with this mapping of outcome statuses to effectiveness classes."""
    rollups = _of_last_run(manifest)
    return rollups is not None and rollups.get("classes_hash") == classes_hash(classes)


def update(location: Location, manifest: DatasetManifest, run: int, new_files: Sequence[WrittenFile],
           classes: Mapping[str, str],
           *, outcome_partitions: Iterable[tuple[str, str]],
           progress: Callable[[int, int], None] | None = None, every_partition: bool = False,
           run_chunks: RunChunks | None = None, run_checks: RunChecks | None = None) -> RollupsMember:
    """Recompute the rollups of the partitions this run touched and write `rollups/run-<run>/`.

    `manifest` already lists this run's files (`record_files`) but is not written yet; it may
    hold the previous run's `rollups` member. `outcome_partitions`: the (scope, month)
    partitions of the decisions of this run's new outcome records (the export asks the ledger;
    unused when every partition is recomputed: a first run, or rollups that cannot be carried
    over). Returns the new `rollups` member (the caller puts it into the manifest it commits).
    `every_partition`: recompute every partition (a rebuild). `run_chunks`: computes the chunks'
    partials (`chunk_partials` of each, in order) elsewhere, on a cluster (`workbench.cluster`);
    `run_checks` checks the earlier files there (`check_files`, raising DatasetError alike)."""
    reuse = current(manifest, classes) and not every_partition
    decision_files = files_by_partition(manifest, "decisions")
    todo = _partitions_to_recompute(new_files, outcome_partitions, decision_files, reuse)
    _check_earlier_files(location, manifest, run, todo, reuse, run_checks)
    fresh = _recompute(location, manifest, todo, decision_files, classes, progress, run_chunks)
    carried = manifest["rollups"]["files"] if reuse else {}
    files, digests, rows = _write_states(location, run, fresh, carried, todo)
    return {"version": ROLLUP_VERSION, "run": run, "classes_hash": classes_hash(classes), "files": files,
            "file_digests": digests, "rows": rows, "decision_partitions": len(decision_files),
            "recomputed_partitions": len(todo)}


def _partitions_to_recompute(new_files: Sequence[WrittenFile],
                             outcome_partitions: Iterable[tuple[str, str]],
                             decision_files: Mapping[tuple[str, str], list[FileEntry]],
                             reuse: bool) -> list[tuple[str, str]]:
    """The (scope, month) partitions to recompute, sorted: those this run wrote decisions into
    and those of its new outcomes' decisions, or every partition when nothing is carried over."""
    if not reuse:
        return sorted(decision_files)
    touched = {(p[1], p[2]) for p in (_parse(f["path"]) for f in new_files if f["table"] == "decisions") if p}
    touched |= set(outcome_partitions) & set(decision_files)
    return sorted(touched)


@dataclass(frozen=True)
class Chunk:
    """One unit of rollup work (`_chunks`): some decisions of one scope (`pieces`: month, file,
    row groups), the scope's outcome files, and per rulebook id the facts files of their months."""

    scope: str
    completed: int  # partitions this chunk completes (progress)
    pieces: list[tuple[str, str, list[int]]]
    outcome_paths: list[str]
    facts_paths: dict[str, dict[str, list[str]]]


# The chunks → each chunk's `chunk_partials`, in order (a cluster's map; `workbench.cluster`).
RunChunks = Callable[[list[Chunk]], Iterable[dict[str, list[pl.DataFrame]]]]
# Listed files → checked against their digests (`check_files`), elsewhere (a cluster's map).
RunChecks = Callable[[list[ListedFile]], object]


def plan_chunks(location: Location, manifest: DatasetManifest, todo: Sequence[tuple[str, str]],
                decision_files: Mapping[tuple[str, str], list[FileEntry]]) -> list[Chunk]:
    """The chunks of the partitions in `todo` (`_chunks`), each naming the files it reads."""
    outcome_files = files_by_partition(manifest, "outcomes")
    facts_files = _facts_files(manifest)
    planned = []
    for scope, completed, pieces in _chunks(location, todo, decision_files):
        months = sorted({month for month, _path, _groups in pieces})
        outcomes = [e["path"] for (s, _m), entries in outcome_files.items() if s == scope for e in entries]
        facts = {rulebook_id: {month: per.get((scope, month), []) for month in months}
                 for rulebook_id, per in facts_files.items()}
        planned.append(Chunk(scope, completed, pieces, outcomes, facts))
    return planned


def chunk_partials(location: Location, chunk: Chunk, classes: Mapping[str, str],
                   policy_id: str | None = None) -> dict[str, list[pl.DataFrame]]:
    """The rollup rows of one chunk's decisions (of one policy when `policy_id` is given):
    `partition_partials` of the decisions, all their outcome records and their facts rows."""
    rows = chunk_rows(location, chunk, policy_id)
    if rows is None:
        return {}
    decisions, outcomes, mine = rows
    wanted = chunk.facts_paths if policy_id is None else {
        k: v for k, v in chunk.facts_paths.items() if k == policy_id}
    facts = _chunk_facts(location, wanted, mine)
    fresh = {name: [_compact(frame) for frame in frames]
             for name, frames in partition_partials(decisions, outcomes, facts, classes).items()}
    del decisions, outcomes, facts
    pa.default_memory_pool().release_unused()  # the chunk's read buffers back to the system
    return fresh


def chunk_rows(location: Location, chunk: Chunk, policy_id: str | None = None
               ) -> tuple[pl.DataFrame, pl.DataFrame, ds.Expression] | None:
    """A chunk's decisions (of one policy when `policy_id` is given; the analysis columns with
    `scope` and `month`), every outcome record of them, and the filter that selects their rows
    (by decision id); None when the chunk has no such decision."""
    decisions = _decisions(location, chunk.pieces, chunk.scope)
    if decisions is not None and policy_id is not None:
        decisions = decisions.filter(pl.col("policy_id") == policy_id)
    if decisions is None or not decisions.height:
        return None
    mine = ds.field("decision_id").isin(pa.array(decisions["decision_id"].to_list(), pa.string()))
    return decisions, _chunk_outcomes(location, chunk.outcome_paths, mine), mine


def _recompute(location: Location, manifest: DatasetManifest, todo: Sequence[tuple[str, str]],
               decision_files: Mapping[tuple[str, str], list[FileEntry]], classes: Mapping[str, str],
               progress: Callable[[int, int], None] | None,
               run_chunks: RunChunks | None = None) -> dict[str, list[pl.DataFrame]]:
    """The partials of the partitions in `todo`, chunk by chunk (`_chunks`): per state, its frames.
    Here one chunk at a time, or by `run_chunks` (a cluster); the frames in the chunks' order."""
    chunks = plan_chunks(location, manifest, todo, decision_files)
    results = run_chunks(chunks) if run_chunks is not None else (
        chunk_partials(location, chunk, classes) for chunk in chunks)
    fresh: dict[str, list[pl.DataFrame]] = defaultdict(list)
    done = 0
    for chunk, partials in zip(chunks, results, strict=True):
        for name, frames in partials.items():
            fresh[name].extend(frames)
        done += chunk.completed
        if progress is not None:
            progress(done, len(todo))
    return fresh


def _chunk_outcomes(location: Location, paths: Sequence[str], mine: ds.Expression) -> pl.DataFrame:
    """The outcome records of a chunk's decisions (`mine`), from every outcome file of their scope."""
    table = _read(location, paths, OUTCOME_COLUMNS, mine)
    if table is not None and table.num_rows:
        return frame_of(table)
    return pl.DataFrame(schema={"decision_id": pl.String, "reported_at": pl.Datetime("ms", "UTC"),
                                "receipt_id": pl.String, "status": pl.String})


def _chunk_facts(location: Location, facts_paths: Mapping[str, Mapping[str, Sequence[str]]],
                 mine: ds.Expression) -> dict[str, pl.DataFrame]:
    """Per rulebook id, the typed facts rows of a chunk's decisions (`mine`) that the anomaly
    engine's fact moments read, with their `month`; a rulebook without such rows is absent."""
    facts: dict[str, pl.DataFrame] = {}
    for rulebook_id, per in facts_paths.items():
        frames = []
        for month, paths in sorted(per.items()):
            table = _read(location, paths, fact_moment_column, mine)
            if table is not None and table.num_rows:
                frames.append(frame_of(table).with_columns(pl.lit(month).alias("month")))
        if frames:
            facts[rulebook_id] = pl.concat(frames, how="diagonal_relaxed")
    return facts


def _write_states(location: Location, run: int, fresh: Mapping[str, list[pl.DataFrame]],
                  carried: Mapping[str, str], todo: Sequence[tuple[str, str]]
                  ) -> tuple[dict[str, str], dict[str, RollupDigest], int]:
    """Write `rollups/run-<run>/<state>.parquet`: each state's fresh rows and the carried-over
    rows of every partition not recomputed. Returns the files, their digests and the row count."""
    target = run_dir(run)
    location.fs.create_dir(location.path(target), recursive=True)
    recomputed = pl.DataFrame({KEYS[2]: [s for s, _ in todo], KEYS[3]: [m for _, m in todo]},
                              schema={KEYS[2]: pl.String, KEYS[3]: pl.String})
    files: dict[str, str] = {}
    digests: dict[str, RollupDigest] = {}
    rows = 0
    for name in sorted(set(fresh) | set(carried)):
        frames = list(fresh.get(name, []))
        if name in carried:  # the previous run's rows of every partition not recomputed
            kept = frame_of(_read(location, [carried[name]], None))
            kept = kept.join(recomputed, on=[KEYS[2], KEYS[3]], how="anti")
            if kept.height:
                frames.insert(0, kept)
        if not frames:
            continue
        frame = pl.concat(frames, how="diagonal_relaxed").sort(list(KEYS), nulls_last=True, maintain_order=True)
        path = f"{target}/{name}.parquet"
        pq.write_table(frame.to_arrow(), location.path(path), filesystem=location.fs, compression="zstd")
        files[name] = path
        digests[name] = {"rows": frame.height, **describe_file(location, path)}
        rows += frame.height
    return files, digests, rows


def _check_earlier_files(location: Location, manifest: DatasetManifest, run: int,
                         todo: Sequence[tuple[str, str]], reuse: bool, run_checks: RunChecks | None = None) -> None:
    """Refuse (DatasetError) before the rollups are recomputed when a file of an earlier run that
    they read (the touched partitions' decisions and facts, their scopes' outcomes, the rollups
    carried over) no longer matches its listed digest: the run would sign rollups of changed rows.
    This run's own files were hashed as they were listed; untouched partitions are not read."""
    scopes = {scope for scope, _ in todo}
    partitions = set(todo)
    wanted = []
    for entry in iter_all(manifest):
        parsed = _parse(entry.path)
        if entry.kind == "rollups":
            keep = reuse
        elif parsed is None or (parsed[0] not in ("decisions", "outcomes") and entry.kind != "facts"):
            keep = False
        elif entry.kind == "outcomes":
            keep = parsed[1] in scopes
        else:
            keep = (parsed[1], parsed[2]) in partitions
        if keep and not entry.path.split("/")[-1].startswith(f"part-{run:06d}-"):
            wanted.append(entry)
    if run_checks is not None:
        run_checks(wanted)
    else:
        check_files(location, wanted)


def _compact(frame: pl.DataFrame) -> pl.DataFrame:
    """A copy of a small partial that owns its strings: a string column selected out of a large
    frame still points into that frame's buffers (Arrow string views), so keeping a few evidence
    ids of every chunk would otherwise keep every chunk's decisions in memory."""
    return frame_of(frame.to_arrow(compat_level=pl.CompatLevel.oldest()))


def _chunks(location: Location, todo: Sequence[tuple[str, str]],
            decision_files: Mapping[tuple[str, str], list[FileEntry]]
            ) -> Iterator[tuple[str, int, list[tuple[str, str, list[int]]]]]:
    """The decisions of the partitions to recompute, in chunks of one scope of at most
    BATCH_DECISIONS decisions (whole row groups of at most 32,000 rows, so a month larger than
    a chunk is split: its chunks' partials are stored side by side and merged when read, as the
    engines' partition law allows). Yields (scope, partitions completed, [(month, file, row groups)])."""
    by_scope: dict[str, list[str]] = defaultdict(list)
    for scope, month in todo:
        by_scope[scope].append(month)
    for scope in sorted(by_scope):
        pieces: list[tuple[str, str, list[int]]] = []
        size, completed = 0, 0
        for month in sorted(by_scope[scope]):
            for entry in decision_files.get((scope, month), []):
                with location.fs.open_input_file(location.path(entry["path"])) as handle:
                    metadata = pq.ParquetFile(handle).metadata
                for group in range(metadata.num_row_groups):
                    rows = metadata.row_group(group).num_rows
                    if pieces and size + rows > BATCH_DECISIONS:
                        yield scope, completed, pieces
                        pieces, size, completed = [], 0, 0
                    if pieces and pieces[-1][:2] == (month, entry["path"]):
                        pieces[-1][2].append(group)
                    else:
                        pieces.append((month, entry["path"], [group]))
                    size += rows
            completed += 1
        if pieces or completed:
            yield scope, completed, pieces


def remove_runs(location: Location, *, newer_than: int | None = None, older_than: int | None = None) -> None:
    """Delete rollup run directories above `newer_than` (a failed run's) or below `older_than`
    (superseded: the committed run's and the one before it stay for readers of either manifest)."""
    if not location.exists(ROLLUPS_DIR):
        return
    for info in location.fs.get_file_info(pafs.FileSelector(location.path(ROLLUPS_DIR))):
        name = info.base_name
        if info.type != pafs.FileType.Directory or not (name.startswith("run-") and name[4:].isdigit()):
            continue
        run = int(name[4:])
        if (newer_than is not None and run > newer_than) or (older_than is not None and run < older_than):
            location.fs.delete_dir(info.path)


# --------------------------------------------------------------------------- reading


_EMPTY = {f"anomalies.{name}": frame for name, frame in fact_moments._empty().items()}


@dataclass(frozen=True)
class RollupView:
    """The rollup rows of one policy (optionally one version) and some scopes (all when None)."""

    root: str  # the dataset's location (a folder or an object-store URL)
    files: Mapping[str, str]
    classes_hash: str | None  # None (a manifest without it): never usable
    policy_id: str
    policy_version: str | None
    scopes: tuple[str, ...] | None
    # The states' rows in memory instead of in `files` (`in_memory`: computed on a cluster).
    frames: Mapping[str, pl.DataFrame] | None = None

    @classmethod
    def in_memory(cls, fresh: Mapping[str, Sequence[pl.DataFrame]], classes: Mapping[str, str], *,
                  policy_id: str, policy_version: str | None, scopes: Sequence[str] | None) -> RollupView:
        """A view of rollup rows computed just now (`chunk_partials` of every chunk), each state's
        rows stacked and ordered as `update` writes them."""
        frames = {name: pl.concat(list(parts), how="diagonal_relaxed").sort(list(KEYS), nulls_last=True,
                                                                           maintain_order=True)
                  for name, parts in fresh.items() if parts}
        return cls(".", dict.fromkeys(frames, ""), classes_hash(classes), policy_id, policy_version,
                   None if scopes is None else tuple(scopes), frames)

    @classmethod
    def of(cls, root: str | Path, manifest: DatasetManifest, *, policy_id: str, policy_version: str | None,
           scopes: Sequence[str] | None) -> RollupView | None:
        rollups = _of_last_run(manifest)
        if rollups is None:
            return None
        return cls(str(root), dict(rollups["files"]), rollups.get("classes_hash"), policy_id, policy_version,
                   None if scopes is None else tuple(scopes))

    def _url(self, path: str) -> str:
        location = open_location(self.root)
        return location.url(location.path(path))

    def usable(self, classes: Mapping[str, str]) -> bool:
        return self.classes_hash == classes_hash(classes)

    def _state(self, name: str, own_scope: str | None = None, keep: str | None = None) -> pl.DataFrame:
        path = self.files.get(name)
        if path is None:
            empty = _EMPTY.get(name, pl.DataFrame())
            return empty if keep is None else empty.with_columns(pl.lit(None, pl.String).alias(keep))
        where = pl.col(KEYS[0]) == self.policy_id
        if self.policy_version is not None:
            where &= pl.col(KEYS[1]) == self.policy_version
        if self.scopes is not None:
            where &= pl.col(KEYS[2]).is_in(list(self.scopes))
        if own_scope is not None:  # within the selection, as the rows' `scope == own_scope` filter
            where &= pl.col(KEYS[2]) == own_scope
        rows = pl.scan_parquet(self._url(path)) if self.frames is None else self.frames[name].lazy()
        return rows.filter(where).drop([k for k in KEYS if k != keep]).collect()

    def by_month(self, name: str) -> pl.DataFrame:
        """The selected rows of one state with their decision month (`rollup_month`) kept and
        the other key columns dropped (the monthly course merges each month's rows)."""
        return self._state(name, keep=KEYS[3])

    def partial(self, kind: str, *, own_scope: str | None = None) -> dict[str, pl.DataFrame]:
        """One partial of `kind` stacking every selected partition's rows (the engine's merge
        combines them). Benchmarks: the `sample` state is the caller's own scope only."""
        prefix = f"{kind}."
        names = {n[len(prefix):] for n in (*self.files, *_EMPTY) if n.startswith(prefix)}
        names |= set(_STATES[kind])
        return {name: self._state(prefix + name, own_scope if kind == "benchmarks" and name == "sample" else None)
                for name in sorted(names)}


_STATES = {
    "effectiveness": ("sample",),
    "anomalies": ("sample", "segments", "failed", "versions", "by_verdict", "months", "facts", "fact_high",
                  "fact_low"),
    "benchmarks": ("sample", "scopes"),
}
