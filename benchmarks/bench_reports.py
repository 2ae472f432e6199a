"""Policy reports over a large Parquet dataset: our Polars engines against the same aggregate
in SQL on PostgreSQL and in DuckDB over the same Parquet files, in one run.

    .venv/bin/python benchmarks/bench_reports.py                     # 10,000,000 decisions
    .venv/bin/python benchmarks/bench_reports.py --decisions 1000000 # smaller run
    .venv/bin/python benchmarks/bench_reports.py --skip-postgres     # no PostgreSQL load

The dataset is synthesized straight into the contract's schema (vectorized, seeded): 20
scopes, 12 months, one policy with two versions (v2 from month 9 blocks more), four rules,
numeric facts that drift in the last month (in `facts_json` and in the typed facts table, as
the export writes both), 0–2 outcome records per decision with timestamp ties. Its manifest
says `synthetic: true`. It is generated once per size and kept under
benchmarks/results/ (git-ignored).

What is timed (best of `--repeat` runs, wall clock, load average printed beside):

* ours: `workbench.reports.policy` over `workbench.dataset.load.from_dataset` (manifest, rollups,
  merge, finalize, envelope and hash), one figure per report: effectiveness, anomalies,
  benchmarks. A whole-history report merges the dataset's report rollups
  (`workbench.dataset.rollups`), which the export keeps current; building them for the whole dataset
  (what a first export or a full rebuild pays once) is timed and printed separately;
* ours from rows: the same reports with the rollups set aside, the engines over every decision
  and outcome (best of `--rows-repeat`, default 3, as many as the SQL twins): the frames
  `from_dataset(…, rollups=False)` gives (its typed facts table as it is, one row per decision);
  both must give identical reports, hashes included. Confidence has no rollups: it is always
  from rows;
* DuckDB: what each report from rows computes, in SQL over the same Parquet files (the facts
  table's files included): see `JOINED_SQL` and the twins below it;
* PostgreSQL: the join's aggregates only (latest outcome counts by scope, by rule, version and
  verdict, by verdict, action and version) over the same rows COPYed into tables with the
  obvious indexes (the load is not timed; no facts table there).

Each SQL result is checked against the report's numbers (the DuckDB twins' evidence and
extreme decision ids against the anomaly findings' too) before anything is reported. Figures
are ratios to our time in the same run. Each report from rows and its SQL twins are run in
turn, one run of each then again, each keeping its best, so the two sides of a ratio share
the machine's load, printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


import pyarrow.parquet as pq  # noqa: E402

from workbench.dataset import integrity, rollups  # noqa: E402
from workbench.dataset.export import new_manifest, record_files  # noqa: E402
from workbench.dataset.load import conform, from_dataset  # noqa: E402
from workbench.dataset.location import open_location  # noqa: E402
from workbench.dataset.schema import DATASET_SCHEMA_VERSION, TABLES  # noqa: E402
from workbench.dataset.synth import facts_columns_table  # noqa: E402
from workbench.reports.policy import (  # noqa: E402
    CLASSES,
    ReportParams,
    anomaly_report,
    benchmark_report,
    confidence_report,
    effectiveness_report,
)

POLICY = "pricing_exception"
SCOPES = [f"tenant_{i:02d}" for i in range(20)]
MONTHS = [f"2026-{m:02d}" for m in range(1, 13)]
RULES = np.array(["block_deep_discount", "review_thin_margin", "approve_owner_backed", "approve_small", None], dtype=object)
VERDICT_OF_RULE = np.array(["no", "review", "yes", "yes", "review"], dtype=object)
REASON_OF_RULE = np.array(["DISCOUNT_ABOVE_CEILING", "MARGIN_BELOW_FLOOR", "WITHIN_DISCOUNT_POLICY",
                           "SMALL_DISCOUNT", "NO_RULE_MATCHED"], dtype=object)
ACTION_OF_RULE = np.array(["reject_discount", "route_to_finance", "apply_discount", "apply_discount",
                           "route_to_finance"], dtype=object)
STATUSES = np.array(list(CLASSES), dtype=object)


def _pick(values, index: np.ndarray) -> pl.Series:
    """values[index] as a String series (vectorized, nulls allowed)."""
    return pl.Series(index).replace_strict(dict(enumerate(values)), return_dtype=pl.String)


def _hex(ids: pl.Series, salt: int) -> pl.Series:
    h = ids.hash(seed=salt).cast(pl.String).str.zfill(20)
    return pl.select(pl.concat_str([h, h, h, h]).str.slice(0, 64)).to_series()


def _scope_frames(scope_index: int, n: int, rng: np.random.Generator) -> tuple[pl.DataFrame, pl.DataFrame]:
    scope = SCOPES[scope_index]
    start = np.datetime64("2026-01-01T00:00:00", "ms").astype(np.int64)
    span = 365 * 24 * 3600 * 1000
    created = np.sort(start + rng.integers(0, span, n))
    month_index = ((created - start) // (span // 12)).clip(0, 11)
    version = np.where(month_index >= 8, "v2", "v1").astype(object)
    rule_index = rng.choice(5, n, p=[0.1, 0.2, 0.45, 0.15, 0.1])
    rule_index = np.where((version == "v2") & (rng.random(n) < 0.15), 0, rule_index)  # v2 blocks more
    amount = rng.gamma(4.0, 50.0, n).round(2) + np.where(month_index == 11, 40.0, 0.0)
    margin = rng.normal(28, 6, n).round(1)
    tier = rng.integers(1, 4, n)
    ids = pl.Series("decision_id", [f"dec_{scope_index:02d}_{i:09d}" for i in range(n)])
    facts = pl.format('{{"amount":{},"margin_percent":{},"tier":{}}}', pl.lit(pl.Series(amount)),
                      pl.lit(pl.Series(margin)), pl.lit(pl.Series(tier)))
    decisions = pl.DataFrame({
        "decision_id": ids,
        "created_at": pl.Series(created).cast(pl.Datetime("ms", "UTC")),
        "chain_position": pl.Series(np.arange(1, n + 1)),
        "policy_id": pl.Series([POLICY] * n),
        "policy_version": _pick(["v1", "v2"], (month_index >= 8).astype(np.int64)),
        "rulebook_hash": pl.Series(["a" * 64] * n),
        "policy_bundle_hash": pl.Series([None] * n, dtype=pl.String),
        "verdict": _pick(VERDICT_OF_RULE, rule_index),
        "application_verdict": _pick(VERDICT_OF_RULE, rule_index).str.to_uppercase(),
        "reason_code": _pick(REASON_OF_RULE, rule_index),
        "matched_rule_id": _pick(RULES, rule_index),
        "action": _pick(ACTION_OF_RULE, rule_index),
        "evidence": _pick(REASON_OF_RULE, rule_index).to_frame("r")
        .select(pl.concat_list("r")).to_series(),
        "binding_mode": pl.Series(["direct_declarative_rulebook"] * n),
        "record_hash": _hex(ids, 2),
        "receipt_hash": _hex(ids, 3),
        "input_hash": _hex(ids, 4),
        "scope": pl.Series([scope] * n),
        "month": _pick(MONTHS, month_index),
    }).with_columns(pl.select(facts).to_series().alias("facts_json"))
    # outcomes: 0 (10%), 1 (75%) or 2 (15%) records; failure odds grow on thin margins and in v2
    count = rng.choice(3, n, p=[0.1, 0.75, 0.15])
    owner = np.repeat(np.arange(n), count)
    m = len(owner)
    fail_p = 0.12 + 0.25 * (rule_index[owner] == 1) + 0.08 * (version[owner] == "v2")
    draw = rng.random(m)
    status = np.where(draw < fail_p, 1, np.where(draw < fail_p + 0.05, 4, 0))  # failed / pending / succeeded
    status = np.where(rng.random(m) < 0.03, 3, status)  # cancelled
    lag = rng.integers(3_600_000, 40 * 86_400_000, m) // 1000 * 1000  # whole seconds: ties happen
    reported = created[owner] + lag
    receipt_ids = pl.Series([f"out_{scope_index:02d}_{i:09d}" for i in range(m)])
    outcomes = pl.DataFrame({
        "receipt_id": receipt_ids,
        "decision_id": ids.gather(owner),
        "reported_at": pl.Series(reported).cast(pl.Datetime("ms", "UTC")),
        "status": _pick(list(STATUSES), status),
        "receipt_hash": _hex(receipt_ids, 5),
        "idempotency_key": pl.Series([None] * m, dtype=pl.String),
        "receipt_json": pl.Series(['{"decision_outcome_version":"decision_outcome_v1"}'] * m),
        "scope": pl.Series([scope] * m),
        "month": pl.Series(reported.astype("datetime64[ms]").astype("datetime64[M]").astype(str)).str.slice(0, 7),
    })
    fields = {"amount": amount, "margin_percent": margin, "tier": tier}
    return conform(decisions, "decisions").collect(), conform(outcomes, "outcomes").collect(), fields


def generate(root: Path, total: int, seed: int = 7) -> None:
    manifest = root / "manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("facts_table"):
        return
    shutil.rmtree(root, ignore_errors=True)
    rng = np.random.default_rng(seed)
    per_scope = total // len(SCOPES)
    rows = {"decisions": 0, "outcomes": 0}
    for index in range(len(SCOPES)):
        decisions, outcomes, fields = _scope_frames(index, per_scope, rng)
        for table, frame in (("decisions", decisions), ("outcomes", outcomes)):
            rows[table] += frame.height
            arrow = frame.to_arrow().cast(pa.schema(list(TABLES[table]) + [pa.field("scope", pa.string()),
                                                                            pa.field("month", pa.string())]))
            pads.write_dataset(arrow, root / table, format="parquet", partitioning=["scope", "month"],
                               partitioning_flavor="hive", existing_data_behavior="overwrite_or_ignore",
                               basename_template=f"part-{index:02d}-{{i}}.parquet")
            if table == "decisions":  # the typed facts table, as the export writes it
                facts = facts_columns_table(fields, np.arange(frame.height), arrow)
                pads.write_dataset(facts, root / "facts" / f"rulebook_id={POLICY}", format="parquet",
                                   partitioning=["scope", "month"], partitioning_flavor="hive",
                                   existing_data_behavior="overwrite_or_ignore",
                                   basename_template=f"part-{index:02d}-{{i}}.parquet")
        print(f"  generated {SCOPES[index]}: {rows['decisions']:,} decisions, {rows['outcomes']:,} outcomes", flush=True)
    manifest.write_text(json.dumps({"dataset_schema_version": DATASET_SCHEMA_VERSION, "synthetic": True,
                                    "rows": rows, "seed": seed, "facts_table": True}))


def build_rollups(root: Path) -> float | None:
    """Give the generated dataset an export's manifest (file lists) and its report rollups, as
    the export writes them; returns the seconds the full build took (None: already there)."""
    manifest = json.loads((root / "manifest.json").read_text())
    if manifest.get("rollups", {}).get("version") == rollups.ROLLUP_VERSION:
        return None
    files = []
    for pattern in ("decisions/scope=*/month=*/*.parquet", "outcomes/scope=*/month=*/*.parquet",
                    "facts/rulebook_id=*/scope=*/month=*/*.parquet"):
        for path in sorted(root.glob(pattern)):
            relative = path.relative_to(root).as_posix()
            table = "/".join(relative.split("/")[:2]) if relative.startswith("facts/") else relative.split("/")[0]
            files.append({"path": relative, "table": table, "rows": pq.ParquetFile(path).metadata.num_rows})
    full = new_manifest(synthetic=True, generator="benchmarks/bench_reports.py", created_at="2026-01-01T00:00:00.000Z")
    full.update({k: v for k, v in manifest.items() if k not in full})
    location = open_location(str(root))
    record_files(full, files, 1, location)
    t0 = time.perf_counter()
    full["rollups"] = rollups.update(location, full, 1, files, CLASSES, outcome_partitions=())
    seconds = time.perf_counter() - t0
    full["runs"] = 1
    (root / "manifest.json").write_text(json.dumps(integrity.seal(full, None)))
    return seconds


def calibration() -> float:
    """A fixed Polars workload (group-by of 2,000,000 integer keys), timed in the same run: the
    machine's speed at that moment, so figures from loaded and idle machines can be compared."""
    rng = np.random.default_rng(1)
    frame = pl.DataFrame({"k": rng.integers(0, 100_000, 2_000_000), "v": rng.random(2_000_000)})
    return best(lambda: frame.group_by("k").agg(pl.col("v").sum()), 3)[0]


def interleaved(runs: dict[str, tuple[object, int]]) -> dict[str, tuple[float, object]]:
    """Each named function run its own number of times, in turn (one run of each, then again),
    keeping each one's best time and last result."""
    out: dict[str, tuple[float, object]] = {}
    for turn in range(max(repeat for _fn, repeat in runs.values())):
        for name, (fn, repeat) in runs.items():
            if turn < repeat:
                t0 = time.perf_counter()
                result = fn()
                seconds = time.perf_counter() - t0
                out[name] = (min(seconds, out[name][0]) if name in out else seconds, result)
    return out


def best(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


# --------------------------------------------------------------------------- SQL baselines

def _ranked(counted: bool) -> str:
    """`WITH ranked`: each decision's outcome records, newest first (ties by receipt id), with
    their number when `counted`; every SQL twin joins its `r = 1` row, the latest outcome."""
    count = ",\n         count(*) OVER (PARTITION BY decision_id) AS n" if counted else ""
    return ("WITH ranked AS (\n  SELECT decision_id, status,\n         row_number() OVER (PARTITION BY decision_id "
            f"ORDER BY reported_at DESC, receipt_id DESC) AS r{count}\n  FROM {{outcomes}})")


LATEST_SQL = _ranked(True) + """
SELECT d.scope, l.status, count(*) AS decisions, sum(coalesce(l.n, 0)) AS outcome_records
FROM {decisions} d LEFT JOIN (SELECT decision_id, status, n FROM ranked WHERE r = 1) l USING (decision_id)
WHERE d.policy_id = 'pricing_exception'
GROUP BY d.scope, l.status
"""
SEGMENT_SQL = _ranked(False) + """
SELECT coalesce(d.matched_rule_id, '(default_outcome)') AS value, d.policy_version, d.verdict,
       count(*) AS decisions,
       sum(CASE WHEN l.status = 'succeeded' THEN 1 ELSE 0 END) AS success,
       sum(CASE WHEN l.status IN ('failed', 'reverted') THEN 1 ELSE 0 END) AS failure
FROM {decisions} d LEFT JOIN (SELECT decision_id, status FROM ranked WHERE r = 1) l USING (decision_id)
WHERE d.policy_id = 'pricing_exception'
GROUP BY 1, 2, 3
"""


CONFIDENCE_SQL = _ranked(False) + """,
policy AS (SELECT * FROM {decisions} WHERE policy_id = 'pricing_exception')
SELECT d.verdict, d.action, d.policy_version = (SELECT policy_version FROM policy
                                                ORDER BY created_at DESC, decision_id DESC LIMIT 1) AS current,
       sum(CASE WHEN l.status = 'succeeded' THEN 1 ELSE 0 END) AS success,
       sum(CASE WHEN l.status IN ('failed', 'reverted') THEN 1 ELSE 0 END) AS failure,
       count(*) AS decisions
FROM policy d LEFT JOIN (SELECT decision_id, status FROM ranked WHERE r = 1) l USING (decision_id)
GROUP BY 1, 2, 3
"""


def _counts_from_sql(rows) -> dict[str | None, int]:
    out: dict[str | None, int] = {}
    for _scope, status, decisions, _records in rows:
        out[status] = out.get(status, 0) + int(decisions)
    return out


# DuckDB's twins compute what each report from rows computes (issue 24, item 3: the same
# aggregate over the same files), each over the decisions of the policy joined to their latest
# outcome (`JOINED_SQL`; kept as a temporary table when a twin reads it more than once):
#
# * effectiveness: the counts by latest status (decisions, outcome records, first and last
#   decision time), and what its `health` reads of the anomaly state without evidence: the
#   counts by rule, reason code, action, version, verdict, month and status, and the numeric
#   facts' moments per month from the typed facts table;
# * anomalies: the same, plus each fact's 10 largest and smallest values per month with their
#   decision, the 10 newest failed decisions per rule, reason code, action and version, and
#   the 10 newest per version and verdict (ties by decision id, as the engines break them);
# * benchmarks: the counts by scope and latest status with first and last decision time;
# * confidence: the counts by version, verdict, action and latest status (with outcome records
#   and first and last time) and the version of the policy's newest decision.
JOINED_SQL = _ranked(True) + """
SELECT d.decision_id, d.scope, d.month, d.created_at, d.policy_version, d.verdict, d.action, d.reason_code,
       d.matched_rule_id, l.status, coalesce(l.n, 0) AS n
FROM {decisions} d LEFT JOIN (SELECT decision_id, status, n FROM ranked WHERE r = 1) l USING (decision_id)
WHERE d.policy_id = 'pricing_exception'
"""
SAMPLE_COLUMNS = "count(*) AS decisions, sum(n) AS outcome_records, min(created_at), max(created_at)"
FINE_SQL = ("SELECT matched_rule_id, reason_code, action, policy_version, verdict, month, status, "
            "count(*) AS decisions, min(created_at) AS first_at FROM joined GROUP BY ALL")
FAILED = "status IN ('failed', 'reverted')"
NEWEST = "min({'t': -epoch_ms(created_at), 'id': decision_id}, 10)"  # newest first, ties by id


def _fact_paths(files: str) -> list[str]:
    import duckdb

    names = [row[0] for row in duckdb.sql(f"DESCRIBE SELECT * FROM {files}").fetchall()]
    return sorted(name[:-3] for name in names if name.endswith("::t"))


def _moments_sql(facts: str, paths: list[str]) -> str:
    """Per month, each numeric fact's count, sum, sum of squares and non-numeric values (the
    typed rows of the facts table, as `fact_moments` reads them)."""
    columns = []
    for path in paths:
        kind, number = f'"{path}::t"', f'"{path}::n"'
        value = f"CASE WHEN {kind} = 2 THEN {number} END"
        columns += [f"count({value})", f"sum({value})", f"sum({value} * {value})",
                    f"count(CASE WHEN {kind} NOT IN (0, 2) THEN 1 END)"]
    return f"SELECT month, {', '.join(columns)} FROM {facts} WHERE facts_state = 'typed' GROUP BY month"


def _extremes_sql(facts: str, paths: list[str]) -> str:
    """Per fact and month, the 10 largest and the 10 smallest values with their decision (ties by
    decision id): one top-N aggregate per side over the typed rows."""
    parts = []
    for path in paths:
        kind, number = f'"{path}::t"', f'"{path}::n"'
        parts.append(f"SELECT '{path}' AS fact, month, min({{'v': -{number}, 'id': decision_id}}, 10) AS high, "
                     f"min({{'v': {number}, 'id': decision_id}}, 10) AS low FROM {facts} "
                     f"WHERE facts_state = 'typed' AND {kind} = 2 GROUP BY month")
    return " UNION ALL ".join(parts)


def _evidence_sql() -> str:
    failed = " UNION ALL ".join(
        f"SELECT '{dim}' AS dimension, coalesce({dim}, '{default}') AS value, {NEWEST} AS ids "
        f"FROM joined WHERE {FAILED} GROUP BY 2"
        for dim, default in (("matched_rule_id", "(default_outcome)"), ("reason_code", "(none)"),
                             ("action", "(none)"), ("policy_version", "(none)")))
    by_verdict = (f"SELECT 'verdict:' || coalesce(policy_version, '(none)') AS dimension, verdict AS value, "
                  f"{NEWEST} AS ids FROM joined GROUP BY ALL")
    return f"{failed} UNION ALL {by_verdict}"


def duckdb_queries(root: Path):
    import duckdb

    con = duckdb.connect()
    con.execute(f"SET threads = {os.cpu_count()}")
    d = f"read_parquet('{root}/decisions/*/*/*.parquet', hive_partitioning = true)"
    o = f"read_parquet('{root}/outcomes/*/*/*.parquet', hive_partitioning = true)"
    f = (f"read_parquet('{root}/facts/rulebook_id={POLICY}/*/*/*.parquet', hive_partitioning = true, "
         "union_by_name = true)")
    paths = _fact_paths(f)
    joined = JOINED_SQL.format(decisions=d, outcomes=o)

    def temporary() -> None:
        con.execute(f"CREATE OR REPLACE TEMP TABLE joined AS {joined}")

    def effectiveness():
        temporary()
        return {"sample": con.execute(f"SELECT status, {SAMPLE_COLUMNS} FROM joined GROUP BY ALL").fetchall(),
                "fine": con.execute(FINE_SQL).fetchall(),
                "moments": con.execute(_moments_sql(f, paths)).fetchall()}

    def anomalies():
        out = effectiveness()
        out["extremes"] = con.execute(_extremes_sql(f, paths)).fetchall()
        out["evidence"] = con.execute(_evidence_sql()).fetchall()
        return out

    def benchmarks():
        return con.execute(f"SELECT scope, status, {SAMPLE_COLUMNS} FROM ({joined}) GROUP BY ALL").fetchall()

    def confidence():
        policy = f"(SELECT * FROM {d} WHERE policy_id = '{POLICY}')"
        newest = f"(SELECT policy_version FROM {policy} ORDER BY created_at DESC, decision_id DESC LIMIT 1)"
        return {"groups": con.execute(f"SELECT policy_version, verdict, action, status, {SAMPLE_COLUMNS} "
                                      f"FROM ({joined}) GROUP BY ALL").fetchall(),
                "newest": con.execute(newest).fetchall()}

    return {"effectiveness": effectiveness, "anomalies": anomalies, "benchmarks": benchmarks,
            "confidence": confidence}


def _duckdb_checks(kind: str, out, report: dict, expected: dict) -> None:
    """The DuckDB twin's figures against the report from rows (before any time is printed)."""
    if kind == "benchmarks":
        own = {status: int(n) for scope, status, n, *_ in out if scope == SCOPES[0]}
        counts = dict(report["sample"]["latest_outcome_counts"])
        assert {k: v for k, v in own.items() if k is not None} == counts, (own, counts)
        return
    if kind == "confidence":
        newest = out["newest"][0][0]
        totals = [0, 0, 0, 0]
        for _version, _verdict, _action, status, n, *_ in out["groups"]:
            effect = CLASSES.get(status) if status is not None else None
            if effect in ("success", "failure"):
                totals[(0 if _version == newest else 2) + (effect == "failure")] += int(n)
        based = report["based_on"]
        assert tuple(totals) == (based["current_version_successes"], based["current_version_failures"],
                                 based["successes"] - based["current_version_successes"],
                                 based["failures"] - based["current_version_failures"]), (totals, based)
        return
    sample = {status: int(n) for status, n, *_ in out["sample"]}
    assert sample == expected, (sample, expected)
    if kind != "anomalies":
        return
    recent = max(row[0] for row in out["moments"])
    extremes = {(fact, month): (high, low) for fact, month, high, low in out["extremes"]}
    evidence = {(dim, value): [item["id"] for item in ids] for dim, value, ids in out["evidence"]}
    for finding in report["anomalies"]:
        ids = finding["decision_ids"]
        if finding["kind"] == "fact_drift":
            high, low = extremes[(finding["value"], recent)]
            side = high if finding["observed"]["mean"] > finding["baseline"]["mean"] else low
            assert ids == [item["id"] for item in side], (finding["anomaly_id"], ids)
        elif finding["kind"] == "failure_rate_shift":
            assert ids == evidence[(finding["dimension"], finding["value"])], (finding["anomaly_id"], ids)
        else:  # verdict_mix_shift: the newest of one verdict of the current version
            assert any(ids == found for (dim, _), found in evidence.items()
                       if dim == f"verdict:{finding['value']}"), finding["anomaly_id"]


def _confidence_from_sql(rows) -> tuple[int, int, int, int]:
    """(successes, failures) of the current version, then of the others."""
    totals = [0, 0, 0, 0]
    for _verdict, _action, current, success, failure, _decisions in rows:
        totals[0 if current else 2] += int(success)
        totals[1 if current else 3] += int(failure)
    return tuple(totals)


def postgres_queries(root: Path, url: str):
    import psycopg

    name = "gate_bench_reports"
    with psycopg.connect(url, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            admin.execute(f'CREATE DATABASE "{name}"')
    conn = psycopg.connect(url.rsplit("/", 1)[0] + "/" + name, autocommit=True)
    stamp = (root / "manifest.json").read_text()
    loaded = conn.execute("SELECT to_regclass('bench_manifest') IS NOT NULL").fetchone()[0] and \
        conn.execute("SELECT body FROM bench_manifest").fetchone()[0] == stamp
    if not loaded:
        print("  loading PostgreSQL (not timed) ...", flush=True)
        conn.execute("DROP TABLE IF EXISTS decisions, outcomes, bench_manifest")
        conn.execute("CREATE TABLE decisions (decision_id text PRIMARY KEY, scope text, created_at timestamptz, "
                     "policy_id text, policy_version text, verdict text, matched_rule_id text)")
        conn.execute("CREATE TABLE outcomes (receipt_id text PRIMARY KEY, decision_id text, reported_at timestamptz, "
                     "status text)")
        for table, columns in (("decisions", ["decision_id", "scope", "created_at", "policy_id", "policy_version",
                                              "verdict", "matched_rule_id"]),
                               ("outcomes", ["receipt_id", "decision_id", "reported_at", "status"])):
            frame = pl.scan_parquet(f"{root}/{table}/*/*/*.parquet", hive_partitioning=True).select(columns)
            for batch in frame.collect().iter_slices(500_000):
                with conn.cursor().copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                    for row in batch.iter_rows():
                        copy.write_row(row)
        conn.execute("CREATE INDEX ON outcomes (decision_id, reported_at DESC, receipt_id DESC)")
        conn.execute("CREATE INDEX ON decisions (policy_id, scope)")
        conn.execute("VACUUM ANALYZE decisions")
        conn.execute("VACUUM ANALYZE outcomes")
        conn.execute("CREATE TABLE bench_manifest (body text)")
        conn.execute("INSERT INTO bench_manifest VALUES (%s)", (stamp,))
    conn.execute("SET max_parallel_workers_per_gather = 2")
    conn.execute("SET work_mem = '256MB'")
    return {
        "effectiveness": lambda: conn.execute(LATEST_SQL.format(decisions="decisions", outcomes="outcomes")).fetchall(),
        "anomalies": lambda: conn.execute(SEGMENT_SQL.format(decisions="decisions", outcomes="outcomes")).fetchall(),
        "confidence": lambda: conn.execute(CONFIDENCE_SQL.format(decisions="decisions", outcomes="outcomes"))
        .fetchall(),
    }


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows-repeat", type=int, default=3)
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--pg-url", default=os.environ.get("GATE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test"))
    args = parser.parse_args()
    results_dir = ROOT / "benchmarks" / "results"
    root = results_dir / f"reports-dataset-{args.decisions}"
    t0 = time.perf_counter()
    generate(root, args.decisions)
    print(f"dataset {root} ready ({time.perf_counter() - t0:.1f} s)", flush=True)
    built = build_rollups(root)
    if built is not None:
        print(f"rollups built for the whole dataset in {built:.1f} s (export-time cost)   "
              f"load {os.getloadavg()[0]:.1f}", flush=True)

    calibrate = calibration()
    print(f"calibration (Polars group-by of 2M rows) {calibrate:.3f} s   load {os.getloadavg()[0]:.1f}", flush=True)
    every = ReportParams(limit=None, min_sample=10)
    scopes = SCOPES

    def frames():
        return from_dataset(root, policy_id=POLICY, limit=None)

    def rows_frames():
        """What `from_dataset` gives this dataset without current rollups: the facts table as it
        is (one row per decision, counts checked), no rollup view (the rollups neither read nor
        checked)."""
        return from_dataset(root, policy_id=POLICY, limit=None, rollups=False)

    ours = {
        "effectiveness": lambda: effectiveness_report(frames(), POLICY, every),
        "anomalies": lambda: anomaly_report(frames(), POLICY, every),
        "benchmarks": lambda: benchmark_report(frames(), POLICY, every, own_scope=scopes[0], opted_in=set(scopes)),
    }
    rows = {
        "effectiveness": lambda: effectiveness_report(rows_frames(), POLICY, every),
        "anomalies": lambda: anomaly_report(rows_frames(), POLICY, every),
        "benchmarks": lambda: benchmark_report(rows_frames(), POLICY, every, own_scope=scopes[0],
                                               opted_in=set(scopes)),
        "confidence": lambda: confidence_report(rows_frames(), POLICY, every),
    }
    assert frames().rollup is not None, "the dataset has no current rollups"
    figures: dict[str, dict[str, float]] = {}
    reports = {}
    for kind, fn in ours.items():
        seconds, reports[kind] = best(fn, args.repeat)
        figures[kind] = {"ours": seconds}
        print(f"ours  {kind:13} {seconds:7.3f} s   load {os.getloadavg()[0]:.1f}", flush=True)
    sample = reports["effectiveness"]["sample"]
    expected = dict(sample["latest_outcome_counts"])
    expected[None] = sample["decisions_considered"] - sample["decisions_with_outcome"]
    engines = {"duckdb": duckdb_queries(root)}
    if not args.skip_postgres:
        engines["postgresql"] = postgres_queries(root, args.pg_url)
    # Each report from rows and its SQL twins are timed in turn, run by run (ours, DuckDB,
    # PostgreSQL, ours, …), each keeping its best: on a shared machine the load moves by a factor
    # of two within a minute, and alternating lets both sides of a ratio meet the same load.
    for kind, fn in rows.items():
        runs = {"rows": (fn, args.rows_repeat), "duckdb": (engines["duckdb"][kind], args.repeat)}
        if "postgresql" in engines:  # the join's aggregates only (no facts table loaded there)
            runs["postgresql"] = (engines["postgresql"]["effectiveness" if kind == "benchmarks" else kind], args.repeat)
        timed = interleaved(runs)
        seconds, report = timed.pop("rows")
        if kind in reports:
            assert report == reports[kind], f"{kind}: the report from rows differs from the report from rollups"
        else:  # no rollups: "ours" is the report from rows
            reports[kind] = report
            figures[kind] = {"ours": seconds}
        figures[kind]["rows"] = seconds
        figures[kind]["rows_load"] = os.getloadavg()[0]
        print(f"rows  {kind:13} {seconds:7.3f} s   load {os.getloadavg()[0]:.1f}  (identical report)", flush=True)
        for engine, (seconds, rows_out) in timed.items():
            if engine == "duckdb":
                _duckdb_checks(kind, rows_out, report, expected)
            elif kind in ("effectiveness", "benchmarks"):
                assert _counts_from_sql(rows_out) == expected, (engine, _counts_from_sql(rows_out), expected)
            elif kind == "confidence":
                based = reports["confidence"]["based_on"]
                ours_counts = (based["current_version_successes"], based["current_version_failures"],
                               based["successes"] - based["current_version_successes"],
                               based["failures"] - based["current_version_failures"])
                assert _confidence_from_sql(rows_out) == ours_counts, (engine, _confidence_from_sql(rows_out),
                                                                        ours_counts)
            figures[kind][engine] = seconds
            print(f"{engine:10} {kind:13} {seconds:7.3f} s   load {os.getloadavg()[0]:.1f}", flush=True)
    print()
    print(f"| report ({sample['decisions_considered']:,} decisions, {sample['outcome_records']:,} outcomes) "
          "| ours | × ours: ours from rows | × ours: DuckDB | × ours: PostgreSQL |")
    print("|---|---:|---:|---:|---:|")
    for kind, row in figures.items():
        ratios = [f"{row[e] / row['ours']:.1f}" if e in row else "-" for e in ("rows", "duckdb", "postgresql")]
        print(f"| {kind} | {row['ours']:.3f} s | {ratios[0]} | {ratios[1]} | {ratios[2]} |")
    print()
    print("| report from rows (rollups set aside) | ours from rows | DuckDB ÷ ours from rows | "
          "PostgreSQL ÷ ours from rows | load |")
    print("|---|---:|---:|---:|---:|")
    for kind, row in figures.items():
        ratios = [f"{row[e] / row['rows']:.2f}" if e in row else "-" for e in ("duckdb", "postgresql")]
        print(f"| {kind} | {row['rows']:.3f} s | {ratios[0]} | {ratios[1]} | {row['rows_load']:.1f} |")
    print("(a ratio of 1 or more: from rows at least as fast as that engine's SQL of the same aggregate)")
    print(f"calibration {calibrate:.3f} s; load average {os.getloadavg()}, {os.cpu_count()} CPUs")
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "reports.json").write_text(json.dumps({"decisions": args.decisions, "figures": figures,
                                                          "rollup_build_s": built,
                                                          "calibration_s": calibrate, "load": os.getloadavg()},
                                                         indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
