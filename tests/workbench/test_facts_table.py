"""The typed facts table: flattening, row states, fixed types and multi-batch reads."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds

from gate.protocol.canonical import canonical_text
from workbench.dataset.facts import facts_tables, flatten, write_facts
from workbench.engines import fact_columns as fc


def decisions_batch(rows):
    """rows: (decision_id, policy_id, facts or None, scope, month)."""
    return pa.table({
        "decision_id": [r[0] for r in rows], "policy_id": [r[1] for r in rows],
        "facts_json": pa.array([None if r[2] is None else canonical_text(r[2]) for r in rows], pa.string()),
        "verdict": ["yes"] * len(rows), "reason_code": ["R_" + r[0].upper() for r in rows],
        "scope": [r[3] for r in rows], "month": [r[4] for r in rows],
    })


def test_flatten_walks_objects_only_and_skips_unreachable_keys():
    paths, exact = flatten({"a": {"b": [{"c": 1}], "x.y": 1, "": 2}, "b c": 1, "_k": None})
    assert paths == {"a": {"b": [{"c": 1}], "x.y": 1, "": 2}, "a.b": [{"c": 1}], "a.": 2, "_k": None}
    assert exact
    assert flatten({"big": 2**53})[1] is False
    assert flatten([1, 2]) == ({}, True)


def test_tables_per_rulebook_with_states_and_fixed_types():
    batch = decisions_batch([
        ("d1", "book_a", {"x": 1, "y": {"z": "s"}}, "s1", "2026-01"),
        ("d2", "book_a", {"x": "1"}, "s1", "2026-02"),
        ("d3", "book_a", None, "s2", "2026-01"),
        ("d4", "book_b", {"x": 2**60}, "s1", "2026-01"),
        ("d5", None, {"x": 1}, "s1", "2026-01"),
    ])
    tables = facts_tables(batch)
    assert sorted(tables) == ["book_a", "book_b"]
    a = tables["book_a"].to_pydict()
    assert a["decision_id"] == ["d1", "d2", "d3"]
    assert a["facts_state"] == ["typed", "typed", "absent"]
    assert a["x::t"] == [fc.KIND_NUMBER, fc.KIND_STRING, None]
    assert a["x::n"] == [1.0, None, None] and a["x::s"] == [None, "1", None]
    assert a["y.z::s"] == ["s", None, None] and a["y::j"] == ['{"z":"s"}', None, None]
    assert tables["book_b"].column("facts_state").to_pylist() == ["partial"]
    assert tables["book_b"].column("facts_json").to_pylist() == ['{"x":1152921504606846976}']
    assert a["facts_json"] == [None, None, None]  # only partial rows keep their JSON
    assert a["reason_code"] == ["R_D1", "R_D2", "R_D3"] and a["verdict"] == ["yes"] * 3
    assert a["matched_rule_id"] == [None] * 3
    schema = tables["book_a"].schema
    assert schema.field("x::t").type == pa.int8() and schema.field("y::e").type == pa.list_(pa.string())


def test_batches_with_different_paths_concatenate(tmp_path):
    write_facts(tmp_path, decisions_batch([("d1", "book", {"x": 1}, "s 1/a", "2026-01")]), "0001")
    write_facts(tmp_path, decisions_batch([("d2", "book", {"y": True}, "s 1/a", "2026-01"),
                                           ("d3", "book", {"x": [1]}, "s2", "2026-02")]), "0002")
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.parquet"))
    assert files == ["facts/rulebook_id=book/scope=s%201%2Fa/month=2026-01/part-0001.parquet",
                     "facts/rulebook_id=book/scope=s%201%2Fa/month=2026-01/part-0002.parquet",
                     "facts/rulebook_id=book/scope=s2/month=2026-02/part-0002.parquet"]
    wanted = {"decision_id": pl.String, "facts_state": pl.String, **fc.path_schema(["x", "y"])}
    frame = (pl.scan_parquet(tmp_path / "facts" / "**" / "*.parquet", hive_partitioning=True, schema=wanted,
                             missing_columns="insert", extra_columns="ignore")
             .sort("decision_id").collect())
    assert frame["x::t"].to_list() == [fc.KIND_NUMBER, None, fc.KIND_ARRAY]
    assert frame["y::b"].to_list() == [None, True, None]
    # Any Arrow tool reads it: pyarrow alone, unifying the batch schemas.
    dataset = ds.dataset(tmp_path / "facts", format="parquet", partitioning="hive")
    table = dataset.to_table(columns=["decision_id", "x::n"])
    assert sorted(table.column("decision_id").to_pylist()) == ["d1", "d2", "d3"]
