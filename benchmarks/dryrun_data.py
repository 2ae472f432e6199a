"""A synthetic history for the dry-run benchmark, generated vectorized into the dataset contract.

`generate(root, n, seed)` writes `decisions`, `outcomes` and the typed `facts` table of one
rulebook (`refunds_bench`) in chunks of at most one million rows (so generating ten million
stays within a few hundred MB), Hive-partitioned by scope (4) and month (12), plus a manifest
that says the data is synthetic. The facts mix every kind the typed columns hold: numbers
(`amount`, sometimes the string "unknown": a type mismatch), strings, a boolean, an array
(`flags`), a nested object (`account.age_days`), 0.5% of decisions without facts and 0.1% with
an integer beyond 2^53 (partial rows the scalar evaluator replays). The stored (old) verdicts
are the OLD rulebook's, computed with the Polars compiler; `facts_json` holds the same facts as
JSON text, which the scalar baseline parses.
"""

from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from gate.protocol.canonical import sha256_hex
from gate.rulebook.compile import rule_order
from workbench.dataset import integrity
from workbench.dataset.location import open_location
from workbench.dataset.schema import DATASET_SCHEMA_VERSION, TABLES
from workbench.engines import fact_columns as fc
from workbench.engines import rulebook_polars as rp

RULEBOOK_ID = "refunds_bench"
SCOPES = ["acme", "globex", "initech", "umbrella"]
MONTHS = [f"2025-{m:02d}" for m in range(1, 13)]
TIERS = ["basic", "plus", "pro", "enterprise"]
COUNTRIES = ["US", "DE", "FR", "GB", "BR", "IN", "JP"]
FLAGS = [[], ["chargeback"], ["fraud_watch"], ["vip_support"], ["chargeback", "fraud_watch"]]
CHUNK = 1_000_000


def _o(decision, verdict, action, reason):
    return {"decision": decision, "verdict": verdict, "action": action, "reason_code": reason}


def _rule(rule_id, priority, condition, outcome):
    return {"rule_id": rule_id, "priority": priority, "condition": condition, "outcome": outcome}


def rulebooks() -> tuple[dict, dict]:
    """(OLD, DRAFT): twelve rules over every operator kind; the draft tightens two thresholds,
    adds a rule, drops one and reorders a tie."""
    block = _o("no", "BLOCK", "reject_refund", "REFUND_BLOCKED")
    old_rules = [
        _rule("fraud_flag", 100, {"field": "flags", "operator": "contains", "value": "fraud_watch"},
              _o("no", "BLOCK", "reject_refund", "FRAUD_WATCH")),
        _rule("huge_amount", 90, {"field": "amount", "operator": "gt", "value": 5000}, block),
        _rule("unknown_amount", 80, {"field": "amount", "operator": "in", "value": ["unknown", None]},
              _o("review", "REVIEW", "route_to_agent", "AMOUNT_UNKNOWN")),
        _rule("chargeback", 70, {"all": [{"field": "flags", "operator": "contains", "value": "chargeback"},
                                         {"field": "amount", "operator": "gte", "value": 200}]},
              _o("review", "REVIEW", "route_to_agent", "CHARGEBACK_HISTORY")),
        _rule("new_account", 60, {"field": "account.age_days", "operator": "lt", "value": 30},
              _o("review", "REVIEW", "route_to_agent", "NEW_ACCOUNT")),
        _rule("sanctioned", 60, {"field": "country", "operator": "in", "value": ["IR", "KP"]}, block),
        _rule("enterprise_fast", 50, {"all": [{"field": "tier", "operator": "eq", "value": "enterprise"},
                                              {"field": "amount", "operator": "lte", "value": 2000}]},
              _o("yes", "APPROVE", "refund", "ENTERPRISE_FAST_LANE")),
        _rule("vip_any", 40, {"any": [{"field": "vip", "operator": "eq", "value": True},
                                      {"field": "flags", "operator": "contains", "value": "vip_support"}]},
              _o("yes", "APPROVE", "refund", "VIP")),
        _rule("small", 30, {"field": "amount", "operator": "lte", "value": 100}, _o("yes", "APPROVE", "refund", "SMALL_AMOUNT")),
        _rule("mid_known", 20, {"all": [{"field": "amount", "operator": "lte", "value": 800},
                                        {"not": {"field": "country", "operator": "in", "value": ["BR", "IN"]}}]},
              _o("yes", "APPROVE", "refund", "MID_AMOUNT")),
        _rule("no_country", 10, {"field": "country", "operator": "not_exists"},
              _o("review", "REVIEW", "route_to_agent", "COUNTRY_MISSING")),
        _rule("legacy_plus", 5, {"field": "tier", "operator": "eq", "value": "plus"}, _o("yes", "APPROVE", "refund", "LEGACY_PLUS")),
    ]
    old = {"schema_version": "rulebook_v1", "rulebook_id": RULEBOOK_ID, "version": "1.0.0", "rules": old_rules,
           "default_outcome": _o("review", "REVIEW", "route_to_agent", "NO_RULE_MATCHED")}
    draft = json.loads(json.dumps(old))
    draft["version"] = "2.0.0"
    rules = {r["rule_id"]: r for r in draft["rules"]}
    rules["huge_amount"]["condition"]["value"] = 3000
    rules["mid_known"]["condition"]["all"][0]["value"] = 600
    rules["new_account"]["priority"] = 60  # ties with sanctioned: collation order decides
    del rules["legacy_plus"]
    rules["young_chargeback"] = _rule("young_chargeback", 75, {"all": [
        {"field": "account.age_days", "operator": "lt", "value": 90},
        {"field": "flags", "operator": "contains", "value": "chargeback"}]}, _o("no", "BLOCK", "reject_refund", "YOUNG_CHARGEBACK"))
    draft["rules"] = list(rules.values())
    return old, draft


def _pick(rng, options, n):
    return np.asarray(options, dtype=object)[rng.integers(0, len(options), n)]


def _chunk(rng, start: int, n: int) -> pl.DataFrame:
    """One chunk of decisions with their facts (typed columns and JSON text)."""
    ids = pl.Series("decision_id", [f"dec_{i:010d}" for i in range(start, start + n)])
    scope = _pick(rng, SCOPES, n)
    month_index = rng.integers(0, len(MONTHS), n)
    day = rng.integers(1, 28, n)
    seconds = rng.integers(0, 86_400, n)
    amount = np.round(rng.lognormal(5.5, 1.2, n), 2)
    amount_unknown = rng.random(n) < 0.02
    tier = _pick(rng, TIERS, n)
    country = _pick(rng, COUNTRIES + ["IR"], n)
    country_missing = rng.random(n) < 0.03
    flag_index = rng.choice(len(FLAGS), n, p=[0.8, 0.08, 0.05, 0.05, 0.02])
    vip = rng.random(n) < 0.07
    age = rng.integers(0, 2000, n)
    absent = rng.random(n) < 0.005
    partial = (~absent) & (rng.random(n) < 0.001)
    frame = pl.DataFrame({
        "decision_id": ids, "scope": scope.astype(str), "month_index": month_index, "day": day, "seconds": seconds,
        "amount": amount, "amount_unknown": amount_unknown, "tier": tier.astype(str), "country": country.astype(str),
        "country_missing": country_missing, "flag_index": flag_index, "vip": vip, "age": age,
        "absent": absent, "partial": partial,
    })
    flag_keys = [[json.dumps(f) for f in flags] for flags in FLAGS]
    flag_json = [json.dumps(flags, separators=(",", ":")) for flags in FLAGS]
    month = pl.lit(pl.Series(MONTHS)).get(pl.col("month_index"))
    frame = frame.with_columns(
        month.alias("month"),
        (pl.concat_str([month, pl.lit("-"), pl.col("day").cast(pl.String).str.zfill(2)]).str.to_datetime("%Y-%m-%d", time_zone="UTC")
         + pl.duration(seconds=pl.col("seconds"))).dt.cast_time_unit("ms").alias("created_at"),
        pl.lit(pl.Series(flag_keys, dtype=pl.List(pl.String))).get(pl.col("flag_index")).alias("flags::e"),
        pl.lit(pl.Series(flag_json)).get(pl.col("flag_index")).alias("flags::j"),
    )
    amount_json = (pl.when(pl.col("partial")).then(pl.lit(str(2**60)))
                   .when(pl.col("amount_unknown")).then(pl.lit('"unknown"'))
                   .otherwise(pl.col("amount").cast(pl.String)))
    country_json = pl.when(pl.col("country_missing")).then(pl.lit("")).otherwise(
        pl.concat_str([pl.lit('"country":"'), pl.col("country"), pl.lit('",')]))
    facts_json = pl.concat_str([
        pl.lit('{"account":{"age_days":'), pl.col("age").cast(pl.String), pl.lit('},"amount":'), amount_json,
        pl.lit(","), country_json, pl.lit('"flags":'), pl.col("flags::j"), pl.lit(',"tier":"'), pl.col("tier"),
        pl.lit('","vip":'), pl.when(pl.col("vip")).then(pl.lit("true")).otherwise(pl.lit("false")), pl.lit("}")])
    typed = pl.col("absent").not_() & pl.col("partial").not_()

    def when_typed(expr, dtype):
        return pl.when(typed).then(expr).otherwise(pl.lit(None, dtype=dtype))

    frame = frame.with_columns(
        pl.when(pl.col("absent")).then(pl.lit(None, dtype=pl.String)).otherwise(facts_json).alias("facts_json"),
        pl.when(pl.col("absent")).then(pl.lit(fc.STATE_ABSENT)).when(pl.col("partial")).then(pl.lit(fc.STATE_PARTIAL))
        .otherwise(pl.lit(fc.STATE_TYPED)).alias(fc.STATE_COLUMN),
        when_typed(pl.lit(fc.KIND_OBJECT, pl.Int8), pl.Int8).alias("account::t"),
        when_typed(pl.concat_str([pl.lit('{"age_days":'), pl.col("age").cast(pl.String), pl.lit("}")]), pl.String).alias("account::j"),
        when_typed(pl.lit(fc.KIND_NUMBER, pl.Int8), pl.Int8).alias("account.age_days::t"),
        when_typed(pl.col("age").cast(pl.Float64), pl.Float64).alias("account.age_days::n"),
        when_typed(pl.when(pl.col("amount_unknown")).then(pl.lit(fc.KIND_STRING, pl.Int8)).otherwise(pl.lit(fc.KIND_NUMBER, pl.Int8)), pl.Int8).alias("amount::t"),
        when_typed(pl.when(pl.col("amount_unknown")).then(None).otherwise(pl.col("amount")), pl.Float64).alias("amount::n"),
        when_typed(pl.when(pl.col("amount_unknown")).then(pl.lit("unknown")), pl.String).alias("amount::s"),
        when_typed(pl.when(pl.col("country_missing")).then(None).otherwise(pl.lit(fc.KIND_STRING, pl.Int8)), pl.Int8).alias("country::t"),
        when_typed(pl.when(pl.col("country_missing")).then(None).otherwise(pl.col("country")), pl.String).alias("country::s"),
        when_typed(pl.lit(fc.KIND_ARRAY, pl.Int8), pl.Int8).alias("flags::t"),
        when_typed(pl.lit(fc.KIND_STRING, pl.Int8), pl.Int8).alias("tier::t"),
        when_typed(pl.col("tier"), pl.String).alias("tier::s"),
        when_typed(pl.lit(fc.KIND_BOOL, pl.Int8), pl.Int8).alias("vip::t"),
        when_typed(pl.col("vip"), pl.Boolean).alias("vip::b"),
    ).with_columns(
        pl.when(typed).then(pl.col("flags::e")).alias("flags::e"),
        pl.when(typed).then(pl.col("flags::j")).alias("flags::j"),
    )
    return frame


def _typed_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """Every part of every path present, in the fixed dtypes of `fact_columns`."""
    paths = ["account", "account.age_days", "amount", "country", "flags", "tier", "vip"]
    columns = [pl.col("decision_id"), pl.col(fc.STATE_COLUMN),
               pl.when(pl.col(fc.STATE_COLUMN) == fc.STATE_PARTIAL).then(pl.col("facts_json")).alias("facts_json")]
    for name, dtype in fc.path_schema(paths).items():
        columns.append(pl.col(name).cast(dtype) if name in frame.columns else pl.lit(None, dtype=dtype).alias(name))
    return frame.select(*columns, "scope", "month")


def _write(frame: pl.DataFrame, folder: Path, chunk: int) -> None:
    for (scope, month), part in frame.partition_by(["scope", "month"], as_dict=True).items():
        target = folder / f"scope={scope}" / f"month={month}"
        target.mkdir(parents=True, exist_ok=True)
        part.drop("scope", "month").write_parquet(target / f"part-{chunk:06d}-0000.parquet", compression="zstd")


def generate(root: Path, n: int, seed: int = 7) -> dict:
    """Write the dataset under `root`; returns the manifest."""
    old, _ = rulebooks()
    compiled = rp.compile_rulebook(old, [r["rule_id"] for r in rule_order(old["rules"])])
    old_hash = sha256_hex(old)
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    outcome_status = ["succeeded", "failed", "reverted", "cancelled", "pending"]
    for chunk, start in enumerate(range(0, n, CHUNK)):
        size = min(CHUNK, n - start)
        frame = _chunk(rng, start, size)
        facts = _typed_columns(frame)
        verdicts = rp.evaluate(facts.drop("facts_json").lazy(), compiled).select(
            "decision_id", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id").collect()
        # Absent / partial rows: the scalar evaluator decided them; the benchmark only needs a plausible old side.
        decisions = frame.select("decision_id", "created_at", "scope", "month", "facts_json").join(
            verdicts, on="decision_id").with_columns(
            pl.col("verdict").fill_null("review"), pl.col("reason_code").fill_null("NO_RULE_MATCHED"),
            pl.lit(None, dtype=pl.Int64).alias("chain_position"), pl.lit(RULEBOOK_ID).alias("policy_id"),
            pl.lit(old["version"]).alias("policy_version"), pl.lit(old_hash).alias("rulebook_hash"),
            pl.lit(None, dtype=pl.String).alias("policy_bundle_hash"),
            pl.concat_list([pl.col("reason_code").fill_null("NO_RULE_MATCHED")]).alias("evidence"),
            pl.lit("direct_declarative_rulebook").alias("binding_mode"),
            pl.col("decision_id").str.replace("dec_", "r").alias("record_hash"),
            pl.col("decision_id").str.replace("dec_", "c").alias("receipt_hash"),
            pl.lit("0" * 64).alias("input_hash"))
        decisions = decisions.select("decision_id", "created_at", "chain_position", "policy_id", "policy_version",
                                     "rulebook_hash", "policy_bundle_hash", "verdict", "application_verdict",
                                     "reason_code", "matched_rule_id", "action", "evidence", "binding_mode",
                                     "record_hash", "receipt_hash", "input_hash", "facts_json", "scope", "month")
        _write(decisions, root / "decisions", chunk)
        reported = rng.random(size) < 0.6
        outcomes = decisions.filter(pl.Series(reported) & (pl.col("verdict") != "no")).select(
            pl.concat_str([pl.lit("out_"), pl.col("decision_id")]).alias("receipt_id"), "decision_id",
            (pl.col("created_at") + pl.duration(days=3)).alias("reported_at"), "scope", "month")
        outcomes = outcomes.with_columns(
            pl.Series("status", _pick(rng, outcome_status, outcomes.height).astype(str)),
            pl.lit("0" * 64).alias("receipt_hash"), pl.lit(None, dtype=pl.String).alias("idempotency_key"),
            pl.lit("{}").alias("receipt_json"))
        outcomes = outcomes.select("receipt_id", "decision_id", "reported_at", "status", "receipt_hash",
                                   "idempotency_key", "receipt_json", "scope", "month")
        _write(outcomes, root / "outcomes", chunk)
        stored = decisions.select("decision_id", "created_at", "verdict", "application_verdict", "action",
                                  "reason_code", "matched_rule_id")
        facts = facts.join(stored, on="decision_id", how="left")
        facts = facts.select("decision_id", fc.STATE_COLUMN, "facts_json", *stored.columns[1:],
                             *[c for c in facts.columns if "::" in c], "scope", "month")
        _write(facts, root / "facts" / f"rulebook_id={RULEBOOK_ID}", chunk)
    manifest = {"dataset_schema_version": DATASET_SCHEMA_VERSION, "synthetic": True,
                "generator": "benchmarks/dryrun_data.py", "seed": seed, "decisions": n, **listing(root)}
    manifest = integrity.seal(manifest, None)  # every file listed with its digest; synthetic: unsigned
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def listing(root: Path) -> dict:
    """`tables` and `facts` members listing every Parquet file under `root` with its sha256,
    bytes and rows, as the export lists its files (`workbench.dataset.integrity`)."""
    location = open_location(str(root))
    tables: dict = {name: {"rows": 0, "files": []} for name in TABLES}
    facts: dict = {}
    for path in sorted(root.rglob("*.parquet")):
        relative = path.relative_to(root).as_posix()
        rows = pq.ParquetFile(path).metadata.num_rows
        head = relative.split("/")
        holder = tables[head[0]] if head[0] in TABLES else facts.setdefault(
            unquote(head[1].split("=", 1)[1]), {"rows": 0, "files": []})
        holder["files"].append({"path": relative, "rows": rows, "run": 1,
                                **integrity.describe_file(location, relative)})
        holder["rows"] += rows
    return {"tables": tables, "facts": facts}


BASE_MAX = 10_000_000  # ids of a base history: dec_000xxxxxxx (replicate rewrites the first three digits)


def _rekeyed(frame: pl.DataFrame, table: str, copy: int) -> pl.DataFrame:
    """A file's rows as copy `copy` of them: decision ids dec_000xxxxxxx become dec_{copy:03d}xxxxxxx
    (the id of decision copy × 10,000,000 + x, so `dec_{i:010d}` still names decision i), the
    ids and hashes derived from them follow, and every time moves by `copy` milliseconds (a
    decision is made on days 1 to 27, so no row leaves its month partition)."""
    new_id = pl.concat_str([pl.lit(f"dec_{copy:03d}"), pl.col("decision_id").str.slice(7)])
    shift = pl.duration(milliseconds=copy)
    if table == "decisions":
        return frame.with_columns(new_id.alias("decision_id")).with_columns(
            (pl.col("created_at") + shift).alias("created_at"),
            pl.col("decision_id").str.replace("dec_", "r").alias("record_hash"),
            pl.col("decision_id").str.replace("dec_", "c").alias("receipt_hash"))
    if table == "outcomes":
        return frame.with_columns(new_id.alias("decision_id")).with_columns(
            pl.concat_str([pl.lit("out_"), pl.col("decision_id")]).alias("receipt_id"),
            (pl.col("reported_at") + shift).alias("reported_at"))
    return frame.with_columns(new_id.alias("decision_id"), (pl.col("created_at") + shift).alias("created_at"))


def _replicate_file(path: Path, target: Path, table: str, copies: int) -> None:
    """Copies 1 … copies − 1 of one base file, written beside its hard link in `target`."""
    stem = path.name.removesuffix("-0000.parquet")
    frame = pl.read_parquet(path)
    for copy in range(1, copies):
        _rekeyed(frame, table, copy).write_parquet(target / f"{stem}-{copy:04d}.parquet", compression="zstd")


def replicate(base: Path, root: Path, copies: int, workers: int = 2) -> dict:
    """A history of `copies` × the base's decisions, written under `root` without generating
    (or evaluating) anything again: copy 0 is the base's files (hard links), copy c ≥ 1 every
    base file re-keyed (`_rekeyed`: distinct decision and receipt ids, times shifted by c ms) in
    the same partition, so the facts, stored verdicts and outcomes of each copy are the base's
    and the dataset is valid as the dry-run reads it (every file listed with its digest).
    `workers` processes rewrite the base files side by side (each file's copies are written by
    one of them, so the files are the same whatever the number)."""
    manifest = json.loads((base / "manifest.json").read_text())
    if manifest["decisions"] > BASE_MAX:
        raise ValueError(f"a base of at most {BASE_MAX:,} decisions")
    root.mkdir(parents=True, exist_ok=True)
    jobs = []
    for path in sorted(base.rglob("*.parquet")):
        relative = path.relative_to(base)
        target = root / relative.parent
        target.mkdir(parents=True, exist_ok=True)
        first = target / path.name
        if not first.exists():
            first.hardlink_to(path)
        jobs.append((path, target, relative.parts[0], copies))
    # Spawned, not forked: Polars' thread pool does not survive a fork.
    with ProcessPoolExecutor(max_workers=max(1, workers), mp_context=get_context("spawn")) as pool:
        for done in [pool.submit(_replicate_file, *job) for job in jobs]:
            done.result()
    n = manifest["decisions"] * copies
    out = {"dataset_schema_version": DATASET_SCHEMA_VERSION, "synthetic": True,
           "generator": f"benchmarks/dryrun_data.py: {copies} re-keyed copies of the {manifest['decisions']:,}-decision "
                        f"history (seed {manifest['seed']})", "seed": manifest["seed"], "decisions": n, **listing(root)}
    out = integrity.seal(out, None)
    (root / "manifest.json").write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    return out
