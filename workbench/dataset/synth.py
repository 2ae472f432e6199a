"""Benchmark-sized synthetic datasets, straight into the export schema.

`synthesize(uri, decisions=10_000_000)` draws the demo scenario (`workbench.demo.scenario`:
the same scopes, policies, fact distributions, lifecycle and anomalies as `gate demo seed`)
with NumPy, evaluates the demo rulebooks column-wise (`workbench.demo.vector_rules`) and writes
Arrow columns through the same partitioned writer as the export: no per-row Python.

The result has exactly the dataset schema, but it is not a ledger export: hashes, chain links
and receipt bodies are synthetic (random hex, minimal receipt JSON), nothing is signed, and the
manifest says `"synthetic": true` so no one mistakes it for evidence. Facts, verdicts, matched
rules, reason codes, receipt statuses and all timestamps follow the scenario, so engines and
dry-runs measure on realistic data. Generation runs in time-ordered chunks (memory is bounded
by one chunk, default 100,000 decisions) and is deterministic for a given size, chunk and seed.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from gate.clock import iso_ms
from gate.protocol.canonical import key_order, sha256_hex
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from gate.strict_json import JsonValue
from workbench.dataset import integrity, rollups
from workbench.dataset.convert import frame_of
from workbench.dataset.export import (
    facts_table_name,
    ledger_head,
    new_manifest,
    record_files,
)
from workbench.dataset.facts import STORED_COLUMNS
from workbench.dataset.location import (
    DatasetError,
    Location,
    open_location,
    read_manifest,
    write_manifest,
)
from workbench.dataset.manifest import DatasetManifest
from workbench.dataset.partwriter import PartitionedWriter
from workbench.dataset.schema import TABLES, TS
from workbench.demo import DEFAULT_SEED
from workbench.demo import scenario as S
from workbench.demo.vector_rules import evaluate
from workbench.engines import fact_columns as fc

CHUNK = 100_000
FACT_PART_TYPES = {"t": pa.int8(), "b": pa.bool_(), "n": pa.float64(), "s": pa.string(), "j": pa.string(),
                   "e": pa.list_(pa.string())}
MAX_DECISIONS = 1_000_000_000
STATUS_FIELD = {"execution": "execution_status", "outcome": "outcome_status", "crm_sync": "sync_status"}
ID_FIELD = {"execution": "execution_receipt_id", "outcome": "outcome_id", "crm_sync": "sync_id"}
TABLE_OF = {"execution": "executions", "outcome": "outcomes", "crm_sync": "crm_syncs"}

__all__ = ["CHUNK", "decide_plan", "facts_json_column", "synthesize"]


def _hex(rng: np.random.Generator, n: int) -> pa.Array:
    raw = rng.integers(0, 256, (n, 32), dtype=np.uint8)
    binary = pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), n, [None, pa.py_buffer(raw.tobytes())])
    return pl.Series(binary.cast(pa.binary())).bin.encode("hex").to_arrow().cast(pa.string())


def _ids(prefix: str, start: int, n: int) -> pa.Array:
    numbers = pa.array(np.arange(start, start + n, dtype=np.int64)).cast(pa.string())
    padded = pc.utf8_lpad(numbers, width=12, padding="0")
    return pc.binary_join_element_wise(pa.scalar(prefix), padded, "")


def _months(at_ms: np.ndarray) -> pa.Array:
    """`YYYY-MM` (UTC) of epoch milliseconds, vectorized."""
    return pa.array(np.datetime_as_string(at_ms.astype("datetime64[ms]"), unit="M"), pa.string())


def _iso(at_ms: np.ndarray) -> pa.Array:
    """ISO 8601 UTC text with milliseconds and `Z` (as `gate.clock.iso_ms`), vectorized."""
    text = pa.array(np.datetime_as_string(at_ms.astype("datetime64[ms]"), unit="ms"), pa.string())
    return pc.binary_join_element_wise(text, pa.scalar("Z"), "")


def _take(values: Sequence[str], index: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(values, dtype=object)[index], pa.string())


def _json_object(rendered: dict[str, JsonValue]) -> pa.Array:
    """Canonical JSON objects from columns already rendered as JSON values (keys in
    `json.sort_deep.v1` order)."""
    parts: list[Any] = []
    for position, name in enumerate(key_order(list(rendered))):
        parts.append(pa.scalar(("{" if position == 0 else ",") + f'"{name}":'))
        parts.append(rendered[name])
    parts.append(pa.scalar("}"))
    return pc.binary_join_element_wise(*parts, "")


def _quoted(values: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', values, '"', "")


def facts_json_column(fields: dict[str, np.ndarray], index: np.ndarray) -> pa.Array:
    """Canonical JSON objects (`json.sort_deep.v1`) of the given facts rows, built column-wise:
    numbers formatted as canonical JSON writes them (Arrow's shortest round-trip formatting,
    which agrees for the scenario's values), strings without escapes (the scenario has none)."""
    rendered = {}
    for name, column in fields.items():
        values = column[index]
        if values.dtype == bool:
            rendered[name] = pc.if_else(pa.array(values), "true", "false")
        elif values.dtype.kind in "iuf":
            rendered[name] = pa.array(values).cast(pa.string())
        else:
            rendered[name] = _quoted(pa.array(values, pa.string()))
    return _json_object(rendered)


def facts_columns_table(fields: dict[str, np.ndarray], rows: np.ndarray, decisions: pa.Table) -> pa.Table:
    """The typed facts table (`workbench.dataset.facts.facts_table`'s exact schema and values) of the
    given rows (`decisions`: those rows of the decisions table), built column-wise: the
    scenario's facts are flat scalars, so each path has one kind and `j`/`e` are null."""
    n = len(rows)
    arrays = [decisions.column("decision_id"), pa.array(np.full(n, fc.STATE_TYPED), pa.string()),
              pa.nulls(n, pa.string())]
    names = [pa.field("decision_id", pa.string(), nullable=False),
             pa.field(fc.STATE_COLUMN, pa.string(), nullable=False), pa.field("facts_json", pa.string())]
    for name in STORED_COLUMNS:
        kind = decisions.schema.field(name).type
        arrays.append(decisions.column(name))
        names.append(pa.field(name, kind))
    for path in sorted(fields):
        values = fields[path][rows]
        if values.dtype == bool:
            kind, cells = fc.KIND_BOOL, {"b": pa.array(values)}
        elif values.dtype.kind in "iuf":
            kind, cells = fc.KIND_NUMBER, {"n": pa.array(values.astype(np.float64))}
        else:
            kind, cells = fc.KIND_STRING, {"s": pa.array(values, pa.string())}
        cells["t"] = pa.array(np.full(n, kind, np.int8))
        for part, arrow_type in FACT_PART_TYPES.items():
            arrays.append(cells.get(part, pa.nulls(n, arrow_type)))
            names.append(pa.field(fc.column(path, part), arrow_type))
    arrays += [decisions.column("scope"), decisions.column("month")]
    names += [pa.field("scope", pa.string(), nullable=False), pa.field("month", pa.string(), nullable=False)]
    return pa.Table.from_arrays([a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
                                schema=pa.schema(names))


def decide_plan(plan: S.DecisionPlan) -> tuple[np.ndarray, np.ndarray]:
    """Verdict and matched rule id ("" = default outcome) of every decision, column-wise."""
    n = len(plan)
    verdict = np.empty(n, dtype=object)
    rule = np.empty(n, dtype=object)
    for (policy, version) in S.RULEBOOK_FILES:
        mask = (plan.policy == S.POLICIES.index(policy)) & (plan.version == version)
        if mask.any():
            rows = np.flatnonzero(mask)
            fields = {name: values[rows] for name, values in plan.facts[policy].items()}
            v, r = evaluate(S.load_rulebook(policy, version), fields, len(rows))
            verdict[rows], rule[rows] = v, r
    return verdict.astype(str), rule.astype(str)


class _Books:
    """Per (policy, version): the rulebook's outcome columns, looked up by matched rule."""

    def __init__(self) -> None:
        self.keys = list(S.RULEBOOK_FILES)
        self.books = {key: S.load_rulebook(*key) for key in self.keys}
        self.hashes = {key: sha256_hex(book) for key, book in self.books.items()}

    def outcome_columns(self, plan: S.DecisionPlan, rule: np.ndarray) -> dict[str, pa.Array]:
        n = len(plan)
        out = {name: np.empty(n, dtype=object) for name in ("application_verdict", "reason_code", "action",
                                                           "policy_version", "rulebook_hash")}
        for key in self.keys:
            book = self.books[key]
            mask = (plan.policy == S.POLICIES.index(key[0])) & (plan.version == key[1])
            out["policy_version"][mask] = book["version"]
            out["rulebook_hash"][mask] = self.hashes[key]
            outcomes = {r["rule_id"]: r["outcome"] for r in book["rules"]} | {"": book["default_outcome"]}
            for rule_id, outcome in outcomes.items():
                hit = mask & (rule == rule_id)
                out["application_verdict"][hit] = outcome["verdict"]
                out["reason_code"][hit] = outcome["reason_code"]
                out["action"][hit] = outcome["action"]
        return {name: pa.array(values, pa.string()) for name, values in out.items()}


def synthesize(uri: str, *, decisions: int, seed: int = DEFAULT_SEED, chunk: int = CHUNK,
               progress: Callable[[int, int], None] | None = None) -> DatasetManifest:
    """Write a synthetic dataset of `decisions` decisions (and their receipts) to the empty or
    new location `uri`; returns the manifest (`synthetic: true`). DatasetError on a location
    that holds anything."""
    if not isinstance(decisions, int) or not 1 <= decisions <= MAX_DECISIONS:
        raise DatasetError(f"decisions must be an integer from 1 to {MAX_DECISIONS:,}")
    if not isinstance(chunk, int) or chunk < 1:
        raise DatasetError("chunk must be a positive integer")
    location = _empty_location(uri)
    started = time.monotonic()
    now = iso_ms(datetime.now(UTC))
    manifest = new_manifest(synthetic=True, generator="workbench.dataset.synth", created_at=now)
    writer = PartitionedWriter(location, 1)
    tally = _Tally()
    chunks = max(1, -(-decisions // chunk))
    written = 0
    for number in range(chunks):
        size = decisions // chunks + (1 if number < decisions % chunks else 0)
        _write_chunk(writer, tally, seed, number, chunks, size, written)
        written += size
        if progress is not None:
            progress(written, decisions)
    files = writer.close()
    record_files(manifest, files, 1, location)
    _count_into(manifest, tally)
    manifest["rollups"] = rollups.update(location, manifest, 1, files, OUTCOME_EFFECTIVENESS_CLASS,
                                         outcome_partitions=())
    manifest["runs"] = 1
    manifest["ledger_head"] = ledger_head(manifest["chains"], tally.rows)
    manifest["synthesis"] = {"decisions": decisions, "seed": seed, "chunk": chunk,
                             "seconds": round(time.monotonic() - started, 3)}
    manifest = integrity.seal(manifest, None)  # every file's digest listed; synthetic: never signed
    write_manifest(location, manifest)
    return manifest


def _empty_location(uri: str) -> Location:
    """The location `uri`, created: DatasetError when it holds anything or cannot be written."""
    location = open_location(uri)
    if read_manifest(location, required=False) is not None or (
            location.exists() and location.fs.get_file_info(pafs.FileSelector(location.root))):
        raise DatasetError(f"{uri} is not empty: synthesize into a new or empty location")
    try:
        location.fs.create_dir(location.root, recursive=True)
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(f"cannot write to {uri}: {exc}") from exc
    return location


@dataclass
class _Tally:
    """What the chunks written so far add up to: each scope's chain size and head (Merkle
    root, head link hash), the rows of each table and of each rulebook's facts, the receipts
    of each kind (their ids continue from chunk to chunk), and the rulebooks' outcomes."""

    books: _Books = field(default_factory=_Books)
    chains: dict[str, int] = field(default_factory=lambda: dict.fromkeys(S.SCOPES, 0))
    roots: dict[str, tuple[str, str]] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    counters: dict[str, int] = field(default_factory=lambda: {"execution": 0, "outcome": 0, "crm_sync": 0})
    facts_rows: dict[str, int] = field(default_factory=dict)


def _write_chunk(writer: PartitionedWriter, tally: _Tally, seed: int, number: int, chunks: int, size: int,
                 written: int) -> None:
    """Draw chunk `number` of `chunks` (`size` decisions over its share of the days), decide
    it, and write its decisions, facts, chain links and receipts."""
    first_day, last_day = S.DAYS * number // chunks, max(S.DAYS * (number + 1) // chunks, S.DAYS * number // chunks + 1)
    plan = S.draw_decisions(size, seed, first_day=first_day, last_day=last_day, stream=number + 1)
    verdict, rule = decide_plan(plan)
    events = S.draw_events(plan, verdict, rule, seed, stream=number + 1)
    rng = np.random.default_rng([seed, 3, number])
    ids = _ids("dec_syn_", written, size)
    decisions_table, links = _decision_tables(plan, verdict, rule, ids, tally.books, tally.chains, rng)
    for scope, root in _heads(links).items():
        tally.roots[scope] = root
    writer.add("decisions", decisions_table)
    for index, policy in enumerate(S.POLICIES):
        rows_of = np.flatnonzero(plan.policy == index)
        if len(rows_of):
            picked = pa.array(rows_of)
            table = facts_columns_table(plan.facts[policy], rows_of, decisions_table.take(picked))
            writer.add(facts_table_name(policy), table)
            tally.facts_rows[policy] = tally.facts_rows.get(policy, 0) + table.num_rows
    writer.add("chain_links", links)
    tally.rows["decisions"] += size
    tally.rows["chain_links"] += size
    for kind, table in _receipt_tables(plan, events, ids, tally.counters, rng).items():
        writer.add(TABLE_OF[kind], table)
        tally.rows[TABLE_OF[kind]] += table.num_rows


def _count_into(manifest: DatasetManifest, tally: _Tally) -> None:
    """The row counts and chain heads of the whole dataset into its manifest."""
    for policy, count in tally.facts_rows.items():
        manifest["facts"][policy]["rows"] = count
    for name, count in tally.rows.items():
        manifest["tables"][name]["rows"] = count
    manifest["chains"] = {scope: {"chain_id": _chain_id(scope), "size": size,
                                  "merkle_root": tally.roots[scope][0], "head_link_hash": tally.roots[scope][1]}
                          for scope, size in tally.chains.items() if size}


def _chain_id(scope: str) -> str:
    """As `gate.services.decide.chain_id_for`: derived from the scope hash."""
    return "chain_" + hashlib.sha256(scope.encode("utf-8")).hexdigest()[:32]


def _decision_tables(plan: S.DecisionPlan, verdict: np.ndarray, rule: np.ndarray, ids: pa.Array, books: _Books,
                     chains: dict[str, int], rng: np.random.Generator) -> tuple[pa.Table, pa.Table]:
    n = len(plan)
    created = pa.array(plan.at_ms, pa.int64()).cast(TS)
    positions = np.zeros(n, np.int64)
    for index, scope in enumerate(S.SCOPES):
        mask = plan.scope == index
        count = int(mask.sum())
        positions[mask] = np.arange(chains[scope] + 1, chains[scope] + count + 1)
        chains[scope] += count
    pieces = []
    for index, policy in enumerate(S.POLICIES):
        rows = np.flatnonzero(plan.policy == index)
        if len(rows):
            pieces.append((rows, facts_json_column(plan.facts[policy], rows)))
    order = np.argsort(np.concatenate([rows for rows, _ in pieces]), kind="stable")
    facts_column = pa.concat_arrays([column for _, column in pieces]).take(pa.array(order))
    outcome = books.outcome_columns(plan, rule)
    reason = outcome["reason_code"]
    scope = _take(S.SCOPES, plan.scope)
    month = _months(plan.at_ms)
    decisions = pa.table({
        "decision_id": ids,
        "created_at": created,
        "chain_position": pa.array(positions),
        "policy_id": _take(S.POLICIES, plan.policy),
        "policy_version": outcome["policy_version"],
        "rulebook_hash": outcome["rulebook_hash"],
        "policy_bundle_hash": pa.nulls(n, pa.string()),
        "verdict": pa.array(verdict, pa.string()),
        "application_verdict": outcome["application_verdict"],
        "reason_code": reason,
        "matched_rule_id": pc.if_else(pc.equal(pa.array(rule, pa.string()), ""), pa.scalar(None, pa.string()),
                                      pa.array(rule, pa.string())),
        "action": outcome["action"],
        "evidence": pa.ListArray.from_arrays(pa.array(np.arange(n + 1, dtype=np.int32)), reason),
        "binding_mode": pa.array(np.full(n, "direct_declarative_rulebook"), pa.string()),
        "record_hash": _hex(rng, n),
        "receipt_hash": _hex(rng, n),
        "input_hash": _hex(rng, n),
        "facts_json": facts_column,
        "scope": scope,
        "month": month,
    })
    links = pa.table({
        "chain_id": _take([_chain_id(s) for s in S.SCOPES], plan.scope),
        "chain_position": pa.array(positions),
        "decision_id": ids,
        "leaf_hash": _hex(rng, n),
        "link_hash": _hex(rng, n),
        "merkle_root": _hex(rng, n),
        "created_at": created,
        "scope": scope,
        "month": month,
    })
    return decisions, links


def _heads(links: pa.Table) -> dict[str, tuple[str, str]]:
    """Per scope in this chunk: (merkle_root, link_hash) of the highest position."""
    frame = frame_of(links.select(["scope", "chain_position", "merkle_root", "link_hash"]))
    last = frame.sort("chain_position").group_by("scope").last()
    return {row["scope"]: (row["merkle_root"], row["link_hash"]) for row in last.iter_rows(named=True)}


def _receipt_tables(plan: S.DecisionPlan, events: S.Events, ids: pa.Array, counters: dict[str, int],
                    rng: np.random.Generator) -> dict[str, pa.Table]:
    tables = {}
    for kind in ("execution", "outcome", "crm_sync"):
        mask = events.kind == kind
        n = int(mask.sum())
        decision = events.decision[mask]
        reported = pa.array(events.at_ms[mask], pa.int64()).cast(TS)
        receipt_ids = _ids({"execution": "exe_syn_", "outcome": "out_syn_", "crm_sync": "crm_syn_"}[kind],
                           counters[kind], n)
        counters[kind] += n
        decision_ids = ids.take(pa.array(decision, pa.int64()))
        status = pa.array(events.status[mask], pa.string())
        receipt_json = _json_object({
            "decision_id": _quoted(decision_ids), STATUS_FIELD[kind]: _quoted(status),
            ID_FIELD[kind]: _quoted(receipt_ids),
            "reported_at": _quoted(_iso(events.at_ms[mask])),
            "synthetic": pa.scalar("true"),
        })
        tables[kind] = pa.table({
            "receipt_id": receipt_ids,
            "decision_id": decision_ids,
            "reported_at": reported,
            "status": status,
            "receipt_hash": _hex(rng, n),
            "idempotency_key": pa.nulls(n, pa.string()),
            "receipt_json": receipt_json,
            "scope": _take(S.SCOPES, plan.scope[decision]),
            "month": _months(events.at_ms[mask]),
        })
    return tables
