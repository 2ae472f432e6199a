"""A dry-run's flips, streamed through Parquet files so that memory does not grow with them.

At 100M decisions a draft can flip millions of them (8.6M in the benchmark's history); each
needs its latest outcome, its effectiveness class and a row in `flips.parquet`, and the whole
set feeds the outcome cube, the impact tally and the listed flips. Held in memory, they took
about 3 GiB beside the rest of the run. Here, instead (`workbench.migration.compute` drives it):

1. The replay pass writes the rows it selects (the flips and the partial rows) to a file of
   the run's own folder (`spill_folder`) as it finds them.
2. One streaming pass over the outcomes keeps the records whose decision id's hash may be a
   selected one's (`outcome_records`: a bitmap indexed by the hash's low bits, not a set of the
   ids), written to a second file: every record of a selected decision, and some records of
   other decisions (about one in `BITS_PER_SELECTED`, whose hashes share the bits of a selected
   one's; the exact join of step 3 drops them).
3. The flips are classified in buckets of about FLIPS_PER_BUCKET selected rows (by a hash of
   the decision id; one bucket for a smaller history): a bucket's flips, their latest outcome
   (the latest of the bucket's records) and its class, appended to the flips file
   (`write_flips`).
4. The outcome cube, the impact tally and the newest flips are aggregated bucket by bucket
   and then added up (`workbench.migration.compute`).

Only one bucket's flips and outcome records are in memory at a time. The figures do not
depend on the buckets (each flip is in exactly one, with all of its outcome records); the
flips file lists each bucket's flips in the history's order (the vector rows, then the
scalar ones), so with one bucket its rows are in the order of the history.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import polars as pl
import pyarrow.parquet as pq

from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from workbench.engines.common import latest_rows

__all__ = ["BITS_PER_SELECTED", "FLIPS_PER_BUCKET", "FLIP_COLUMNS", "NO_OUTCOME", "SPILL_COMPRESSION", "SPILL_PREFIX", "UNOBSERVABLE", "buckets_for",
           "in_bucket", "latest_outcomes", "may_be_selected", "outcome_records", "spill_folder", "write_flips"]

FLIP_COLUMNS = ["decision_id", "created_at", "scope", "old_verdict", "new_verdict", "old_rule", "new_rule",
                "old_reason", "new_reason", "outcome_status", "outcome_class"]
UNOBSERVABLE, NO_OUTCOME = "unobservable", "none"
FLIPS_PER_BUCKET = 2_000_000  # selected rows classified at once (about 0.5 GiB at the peak)
SPILL_PREFIX = ".dry-run-"  # a run's own folder of intermediate files (`spill_folder`)
SPILL_COMPRESSION: Final = "lz4"  # of those files: read once or a few times, soon after they are written
_SEED = 0x5EED  # of the decision ids' hash: any fixed value, the same on both sides of a lookup
_RECORD_COLUMNS = ["decision_id", "reported_at", "receipt_id", "status"]
BITS_PER_SELECTED = 32  # the outcome pass's bitmap: bits per selected row (a power of two at least)
_MAX_BITS = 1 << 31  # 256 MiB: beyond, more records of other decisions pass (still exact)

# Given some of one bucket's flips (in memory) and the bucket's `in_bucket(...)`: the flips with
# `outcome_status`, the status of each one's latest outcome (null without one), in their order.
Lookup = Callable[[pl.DataFrame, pl.Expr], pl.DataFrame]


@contextmanager
def spill_folder(beside: Path | None) -> Iterator[Path]:
    """A new, empty folder for one run's intermediate files: in the folder of `beside` (the
    flips file's, so they share its disk) or the system's temporary folder; removed when the
    run ends, whether it succeeds or raises. A run that is killed leaves its folder behind,
    but no run reads a folder it did not just create (each name is new)."""
    folder = Path(tempfile.mkdtemp(prefix=SPILL_PREFIX, dir=None if beside is None else beside.parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def latest_outcomes(outcomes: pl.LazyFrame) -> pl.LazyFrame:
    """The latest outcome status per decision (by reported_at, then receipt_id)."""
    return outcomes.group_by("decision_id").agg(
        pl.col("status").sort_by(["reported_at", "receipt_id"]).last().alias("outcome_status"))


def _id_hash() -> pl.Expr:
    return pl.col("decision_id").hash(_SEED)


def buckets_for(rows: int) -> int:
    """How many buckets `rows` selected rows are classified in (at least one)."""
    return max(1, -(-rows // FLIPS_PER_BUCKET))


def in_bucket(bucket: int, buckets: int) -> pl.Expr:
    """Whether a row's decision is in `bucket` of `buckets` (every row when there is one)."""
    return pl.lit(True) if buckets == 1 else _id_hash() % buckets == bucket


def may_be_selected(hashes: pl.Series) -> pl.Expr:
    """Whether a row's decision id may be one of those whose 64-bit hashes are `hashes`: true for
    each of them, and for a few others (about one in BITS_PER_SELECTED). The low bits of a hash
    index a bitmap with the bits of `hashes` set (at least BITS_PER_SELECTED bits per hash, a
    power of two, at most _MAX_BITS): one gather per row, where a lookup in a set of the hashes
    took about twice the CPU (at 100M, 50M records: 3.5 against 6.1 s, reading included)."""
    bits = min(_MAX_BITS, 1 << max(16, (BITS_PER_SELECTED * max(1, hashes.len()) - 1).bit_length()))
    mask = bits - 1
    table = pl.zeros(bits, pl.Boolean, eager=True).scatter(hashes & mask, True)
    return pl.lit(table).gather(_id_hash() & mask)


def outcome_records(outcomes: pl.LazyFrame, selected: pl.LazyFrame, path: Path) -> Lookup:
    """Write to `path`, in one streaming pass over `outcomes`, every record of the decisions in
    `selected` (a `decision_id` column), and some records of other decisions (`may_be_selected`;
    the exact join by decision id of `classified` finds no flip for them); the lookup answers
    the latest status per decision of a bucket."""
    hashes = selected.select(_id_hash()).collect(engine="streaming").to_series()
    wanted = may_be_selected(hashes)
    del hashes
    outcomes.filter(wanted).select(_RECORD_COLUMNS).sink_parquet(path, compression=SPILL_COMPRESSION)
    del wanted
    records = pl.scan_parquet(path)

    def lookup(rows: pl.DataFrame, bucket: pl.Expr) -> pl.DataFrame:
        # `latest_rows`: the records matched to the rows' positions by the ids' hashes (checked
        # as text), the latest found by packed integer maxima: the status `latest_outcomes`
        # gives, at about 0.4 of the CPU of its group-by and a join by the ids' text.
        found = latest_rows(rows, records.filter(bucket))
        return found.drop("outcome_records").rename({"status": "outcome_status"})
    return lookup


def classified(flipped: pl.DataFrame) -> pl.DataFrame:
    """The flips (with `outcome_status`, from a `Lookup`, which finds a flip's outcome by its
    exact decision id: a record of another decision with the same hash finds no flip) with the
    effectiveness class of that status (`unobservable` for a decision that was no, NO_OUTCOME
    without an outcome), as FLIP_COLUMNS, in the flips' order."""
    classes = dict(OUTCOME_EFFECTIVENESS_CLASS)
    return flipped.with_columns(
        pl.when(pl.col("old_verdict") == "no").then(pl.lit(UNOBSERVABLE))
        .when(pl.col("outcome_status").is_null()).then(pl.lit(NO_OUTCOME))
        .otherwise(pl.col("outcome_status").replace_strict(classes, default="unknown", return_dtype=pl.String))
        .alias("outcome_class")).select(FLIP_COLUMNS)


def write_flips(path: Path, flipped: pl.LazyFrame, lookup: Lookup, buckets: int) -> Iterator[pl.DataFrame]:
    """Every flip of `flipped` classified (`classified`, its latest outcome from `lookup`), bucket by
    bucket, appended to the Parquet file `path` (one file, FLIP_COLUMNS); yields each bucket's
    flips once they are written (the file is complete when the last one is taken)."""
    writer: pq.ParquetWriter | None = None
    try:
        for bucket in range(buckets):
            chosen = in_bucket(bucket, buckets)
            frame = classified(lookup(flipped.filter(chosen).collect(), chosen))  # a bucket: small
            table = frame.to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(path, table.schema, compression="zstd")
            writer.write_table(table)
            del table
            yield frame
            del frame  # before the next bucket's: one bucket in memory at a time
    finally:
        if writer is not None:
            writer.close()
