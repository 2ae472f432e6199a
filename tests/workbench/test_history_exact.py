"""The history a dry-run replays (`workbench.migration.history`), to the exact row: the versions
from the decisions files' footers (and which files must be read instead), the per-scope counts,
the source a dry-run of a dataset names, the ledger's location without its password.

Each test writes its own small dataset (`dryrun_support`): mutmut maps a function to the tests
that call it, so no fixture is shared (docs/mutation-testing.md).
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dryrun_support import T0, decide, rule, rulebook, write_dataset
from sqlalchemy.engine import make_url

from gate.protocol.canonical import sha256_bytes_hex, sha256_hex
from workbench.dataset.schema import DATASET_SCHEMA_VERSION
from workbench.migration import history as hist
from workbench.migration.errors import DryRunError
from workbench.migration.run import load_history

BIG = {"field": "amount", "operator": "gt", "value": 100}
V1 = rulebook([rule("big", BIG, "no", "BIG")])
V2 = rulebook([rule("big", BIG, "review", "BIG")], version="1.1.0")
FEB = datetime(2026, 2, 10, tzinfo=UTC)
KEYS = ["scope", "policy_version", "rulebook_hash"]


def _dataset(tmp_path: Path) -> Path:
    """acme: three decisions of 1.0.0 (T0, +3 and +6 days); beta: two of 1.1.0 from 2026-02-10."""
    decisions = decide(V1, [{"amount": 5}, {"amount": 200}, {"amount": 7}]) + decide(
        V2, [{"amount": 300}, {"amount": 1}], scope="beta", prefix="b", start=FEB)
    return write_dataset(tmp_path / "ds", decisions, [])


def _files(root: Path) -> list[str]:
    return sorted(str(path) for path in (root / "decisions").rglob("*.parquet"))


def _expected() -> list[tuple]:
    return [("acme", "1.0.0", sha256_hex(V1), 3, T0, T0 + timedelta(days=6)),
            ("beta", "1.1.0", sha256_hex(V2), 2, FEB, FEB + timedelta(days=3))]


def test_footers_settle_the_versions_of_exported_files(tmp_path):
    """Each file the export writes holds one version of one rulebook per row group: the versions
    come from the footers alone (no file left to read), to the row and the millisecond."""
    files = _files(_dataset(tmp_path))
    known, rest = hist.footer_versions("refunds", files)
    assert rest == []
    assert known.schema == pl.Schema(hist.VERSIONS_SCHEMA)
    assert sorted(known.rows()) == _expected()
    other, rest = hist.footer_versions("another", files)
    assert (other.height, rest) == (0, [])  # settled: none of its decisions
    assert other.schema == pl.Schema(hist.VERSIONS_SCHEMA)


def test_a_history_of_two_scopes_counts_each(tmp_path):
    """`History.versions` (every scope), `per_scope` and `versions_in_scope` (the history's scope,
    or every scope added up by version and rulebook hash)."""
    root = _dataset(tmp_path)
    every = load_history("refunds", None, dataset=root, ledger=None, paths=())
    assert sorted(every.versions.rows()) == _expected()
    assert every.per_scope() == {"acme": 3, "beta": 2}
    assert sorted(every.versions_in_scope().rows()) == [row[1:] for row in _expected()]
    assert every.versions_in_scope().columns == ["policy_version", "rulebook_hash", "decisions", "first", "last"]
    beta = load_history("refunds", "beta", dataset=root, ledger=None, paths=())
    assert beta.per_scope() == {"acme": 3, "beta": 2}
    assert beta.versions_in_scope().rows() == [_expected()[1][1:]]
    assert beta.decisions.select("decision_id").collect().to_series().to_list() == ["b00000", "b00001"]
    # `from_dataset` itself reads the scope's decisions, outcomes and facts only.
    direct = hist.from_dataset(root, "refunds", "beta", ("amount",))
    assert direct.scope == "beta" and direct.per_scope() == {"acme": 3, "beta": 2}
    for frame in (direct.decisions, direct.base):
        assert frame.select("decision_id").collect().to_series().to_list() == ["b00000", "b00001"]


def test_one_version_over_two_scopes_is_added_up(tmp_path):
    """`versions_in_scope` without a scope: one version in two scopes is one row, its decisions
    summed, its first the earlier and its last the later; `merge_versions` adds parts alike."""
    decisions = decide(V1, [{"amount": 5}, {"amount": 200}]) + decide(V1, [{"amount": 1}], scope="beta", prefix="b",
                                                                       start=FEB)
    root = write_dataset(tmp_path / "ds", decisions, [])
    history = load_history("refunds", None, dataset=root, ledger=None, paths=())
    assert history.versions_in_scope().rows() == [("1.0.0", sha256_hex(V1), 3, T0, FEB)]
    merged = hist.merge_versions([history.versions, history.versions.filter(pl.col("scope") == "beta")])
    assert sorted(merged.rows()) == [("acme", "1.0.0", sha256_hex(V1), 2, T0, T0 + timedelta(days=3)),
                                     ("beta", "1.0.0", sha256_hex(V1), 2, FEB, FEB)]


def test_summarize_decisions_per_scope_version_and_hash(tmp_path):
    files = _files(_dataset(tmp_path))
    every = hist.scans_of_files("refunds", None, (), decision_files=files, outcome_files=[], facts_files=[])[0]
    summary = hist.summarize_decisions(every).collect()
    assert summary.columns == ["scope", "policy_version", "rulebook_hash", "decisions", "first", "last"]
    assert summary.schema["decisions"] == pl.Int64
    assert sorted(summary.rows()) == _expected()


def _copy_to(source: str, target: Path) -> str:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    return str(target)


def test_a_file_is_read_when_its_path_or_footer_does_not_settle_it(tmp_path):
    """`_file_versions` answers None (read the file instead) for a path that is not absolute,
    without exactly one plain `scope=` folder, or unreadable, and for a file that holds its
    partition column; it answers the rows of an exported file."""
    source = _files(_dataset(tmp_path))[0]  # acme's
    name = Path(source).name
    assert hist._file_versions(source, "refunds") == [
        ("acme", "1.0.0", sha256_hex(V1), 3, int(T0.timestamp() * 1000), int((T0 + timedelta(days=6)).timestamp() * 1000))]
    assert hist._file_versions(source, "another") == []
    relative = os.path.relpath(source)
    assert not os.path.isabs(relative) and Path(relative).resolve() == Path(source).resolve()
    assert hist._file_versions(relative, "refunds") is None
    for folder in ("scope=a/scope=b", "scope=", "scope=a%20b", "plain"):
        copied = _copy_to(source, tmp_path / "copies" / folder / "month=2026-01" / name)
        assert hist._file_versions(copied, "refunds") is None, folder
    assert hist._file_versions(str(tmp_path / "scope=x" / "missing.parquet"), "refunds") is None
    broken = tmp_path / "scope=x" / "broken.parquet"
    broken.parent.mkdir()
    broken.write_bytes(b"not parquet")
    assert hist._file_versions(str(broken), "refunds") is None
    holding = pq.read_table(source).append_column("scope", pa.array(["acme"] * 3))
    target = tmp_path / "holding" / "scope=acme" / name
    target.parent.mkdir(parents=True)
    pq.write_table(holding, target)
    assert hist._file_versions(str(target), "refunds") is None
    copied = _copy_to(source, tmp_path / "again" / "scope=acme" / name)
    assert hist._file_versions(copied, "refunds")[0][:4] == ("acme", "1.0.0", sha256_hex(V1), 3)


def _row_group(tmp_path: Path, name: str, table: pa.Table) -> str:
    path = tmp_path / "groups" / "scope=acme" / f"{name}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return str(path)


def test_a_row_group_is_settled_only_by_exact_statistics(tmp_path):
    """`_row_group_versions` through `_file_versions`: a row group settles its rows only when the
    rulebook, version and hash are one string without nulls and `created_at` is a millisecond
    timestamp; another rulebook's row group is settled as none of this one's."""
    source = pq.read_table(_files(_dataset(tmp_path))[0])

    def with_column(name: str, values: pa.Array) -> pa.Table:
        return source.set_column(source.schema.get_field_index(name), name, values)

    assert hist._file_versions(_row_group(tmp_path, "as_is", source), "refunds")[0][1:4] == ("1.0.0", sha256_hex(V1), 3)
    cases = {
        "two_versions": with_column("policy_version", pa.array(["1.0.0", "1.0.1", "1.0.0"])),
        "null_version": with_column("policy_version", pa.array(["1.0.0", None, "1.0.0"])),
        "null_hash": with_column("rulebook_hash", pa.array([None, None, None], pa.string())),
        "no_hash": source.drop_columns(["rulebook_hash"]),
        "no_time": source.drop_columns(["created_at"]),
        "micro": with_column("created_at", source["created_at"].cast(pa.timestamp("us", "UTC"))),
        "int_time": with_column("created_at", pa.array([1, 2, 3], pa.int64())),
        "binary_id": with_column("policy_id", pa.array([b"refunds"] * 3, pa.binary())),
        "int_version": with_column("policy_version", pa.array([1, 1, 1], pa.int64())),
    }
    for name, table in cases.items():
        assert hist._file_versions(_row_group(tmp_path, name, table), "refunds") is None, name
    bare = tmp_path / "groups" / "scope=acme" / "no_statistics.parquet"
    pq.write_table(source, bare, write_statistics=False)
    assert hist._file_versions(str(bare), "refunds") is None
    for column in ("policy_id", "created_at"):  # statistics of every column but one
        path = tmp_path / "groups" / "scope=acme" / f"no_{column}_statistics.parquet"
        pq.write_table(source, path, write_statistics=[c for c in source.column_names if c != column])
        assert hist._file_versions(str(path), "refunds") is None, column
    other = with_column("policy_id", pa.array(["other"] * 3))
    assert hist._file_versions(_row_group(tmp_path, "other", other), "refunds") == []
    assert hist._file_versions(_row_group(tmp_path, "other2", other), "other")[0][1:4] == ("1.0.0", sha256_hex(V1), 3)
    # A time missing in one row: the statistics still bound the others (nulls set aside).
    gap = with_column("created_at", pa.array([T0, None, T0 + timedelta(days=6)], pa.timestamp("ms", "UTC")))
    assert hist._file_versions(_row_group(tmp_path, "gap", gap), "refunds") == [
        ("acme", "1.0.0", sha256_hex(V1), 3, int(T0.timestamp() * 1000), int((T0 + timedelta(days=6)).timestamp() * 1000))]


def test_unsettled_files_are_read_beside_the_settled_ones(tmp_path):
    """`footer_versions` lists the files whose statistics do not settle them, in their order;
    the history reads those and adds them to the footers' rows."""
    root = _dataset(tmp_path)
    files = _files(root)
    source = pq.read_table(files[0])
    mixed = source.set_column(source.schema.get_field_index("policy_version"), "policy_version",
                              pa.array(["1.0.0", "1.2.0", "1.0.0"]))
    pq.write_table(mixed, files[0])
    known, rest = hist.footer_versions("refunds", files)
    assert rest == [files[0]] and sorted(known.rows()) == [_expected()[1]]
    history = hist.history_of_files("refunds", None, (), decision_files=files, outcome_files=[], facts_files=[],
                                    source={})
    three = T0 + timedelta(days=3)
    assert sorted(history.versions.rows()) == [
        ("acme", "1.0.0", sha256_hex(V1), 2, T0, T0 + timedelta(days=6)),
        ("acme", "1.2.0", sha256_hex(V1), 1, three, three), _expected()[1]]
    # The facts rows, counted beside the read, still cover every decision: the base is the facts table.
    facts = sorted(str(path) for path in (root / "facts").rglob("*.parquet"))
    covered = hist.history_of_files("refunds", None, ("amount",), decision_files=files, outcome_files=[],
                                    facts_files=facts, source={})
    assert covered.base.collect_schema().names() == COVERED
    only = hist.history_of_files("refunds", None, (), decision_files=files[:1], outcome_files=[], facts_files=[],
                                 source={})
    assert sorted(only.versions.rows()) == sorted(history.versions.rows())[:2]


def test_the_source_a_dataset_dry_run_names(tmp_path):
    """`dataset_source`: the manifest's bytes hashed, its dataset hash, the key that signed it as
    its trust status says (issue 41: never the key the manifest merely names), previous dataset
    and ledger head (None when the manifest has none), and the staleness when it is stale."""
    raw = b'{"x": 1}'
    manifest = {"dataset_hash": "h" * 64, "signature": {"key_id": "k1"}, "previous_dataset_hash": "p" * 64,
                "ledger_head": {"head_hash": "l" * 64}}
    assert hist.dataset_source(tmp_path, manifest, raw, {"key_id": "k1"}) == {
        "kind": "dataset", "location": str(tmp_path), "hash": sha256_bytes_hex(raw),
        "dataset_schema_version": DATASET_SCHEMA_VERSION, "dataset_hash": "h" * 64, "dataset_key_id": "k1",
        "previous_dataset_hash": "p" * 64, "ledger_head_hash": "l" * 64}
    assert hist.dataset_source(tmp_path, manifest, raw, {"key_id": None})["dataset_key_id"] is None  # not verified
    stale = {"lag_seconds": 7200, "bound_seconds": 3600, "behind_scopes": ["a"]}
    assert hist.dataset_source(tmp_path, manifest, raw, {"key_id": "k1", "stale": stale})["stale"] == stale
    bare = hist.dataset_source("s3://b/ds", {"dataset_hash": "h" * 64, "signature": "k1", "ledger_head": None}, raw,
                               {"key_id": None})
    assert (bare["location"], bare["dataset_key_id"], bare["previous_dataset_hash"], bare["ledger_head_hash"]) == (
        "s3://b/ds", None, None, None)
    root = _dataset(tmp_path)
    history = load_history("refunds", None, dataset=root, ledger=None, paths=())
    raw = (root / "manifest.json").read_bytes()
    manifest, _, trusted = hist.read_manifest(root)
    assert history.source == hist.dataset_source(root, manifest, raw, trusted)
    assert history.source["hash"] == sha256_bytes_hex(raw) and history.source["location"] == str(root)


class _ShownPassword:
    def render_as_string(self, hide_password: bool = False) -> str:
        return "db://u:***@h/x" if hide_password else "db://u:secret@h/x"

    def __str__(self) -> str:
        return "db://u:secret@h/x"


def test_the_ledger_location_never_shows_a_password():
    assert hist.ledger_location(object()) == "ledger"
    assert hist.ledger_location(SimpleNamespace(engine=SimpleNamespace(url=None))) == "ledger"
    # A URL whose text shows its password (as SQLAlchemy 1.x's did): rendered without it.
    assert hist.ledger_location(SimpleNamespace(engine=SimpleNamespace(url=_ShownPassword()))) == "db://u:***@h/x"
    url = make_url("postgresql://gate:secret@db.example/gate")
    assert hist.ledger_location(SimpleNamespace(engine=SimpleNamespace(url=url))) == "postgresql://gate:***@db.example/gate"
    assert hist.ledger_location(SimpleNamespace(engine=SimpleNamespace(url="sqlite:///x.db"))) == "sqlite:///x.db"


COVERED = ["decision_id", "facts_state", "facts_json", "created_at", "old_verdict", "old_rule", "old_reason",
           "old_application_verdict", "old_action", "amount::t", "amount::b", "amount::n", "amount::s", "amount::j",
           "amount::e", "scope", "month"]


def test_a_base_covered_by_its_facts_files_is_the_facts_table(tmp_path):
    """When every decision has a facts row and the facts files repeat the stored outcome
    (`_carry_stored_outcome`), the replay base is the facts table itself (no join): its columns
    are the facts files'. Files never checked in this process are read for their columns."""
    decisions = decide(V1, [{"amount": 5}, {"amount": 200}], no_facts=(1,))
    root = write_dataset(tmp_path / "ds", decisions, [])
    facts = sorted(str(path) for path in (root / "facts").rglob("*.parquet"))
    direct = hist.history_of_files("refunds", None, ("amount",), decision_files=_files(root), outcome_files=[],
                                   facts_files=facts, source={})
    assert direct.base.collect_schema().names() == COVERED
    loaded = load_history("refunds", None, dataset=root, ledger=None, paths=("amount",))
    assert loaded.base.collect_schema().names() == COVERED
    assert [(row[0], row[1], row[4]) for row in loaded.base.collect().rows()] == [
        ("d00000", "typed", "review"), ("d00001", "absent", "no")]
    joined = hist.history_of_files("refunds", None, ("amount",), decision_files=_files(root), outcome_files=[],
                                   facts_files=[], source={})
    names = joined.base.collect_schema().names()
    assert "policy_id" in names and names[:2] == ["decision_id", "created_at"]
    assert joined.base.select("decision_id", "facts_state").collect().rows() == [("d00000", "partial"),
                                                                                  ("d00001", "partial")]


def test_six_partitions_of_scopes_named_by_numbers(tmp_path):
    """Three scopes named "7", "8" and "9" (hive folders read as text, never as numbers), two
    months each: six files, whose footers give six rows (read as rows, not as six columns)."""
    decisions = [row for name in ("7", "8", "9")
                 for row in decide(V1, [{"amount": 5}] * 11, scope=name, prefix=f"s{name}-")]
    root = write_dataset(tmp_path / "ds", decisions, [])
    files = _files(root)
    assert len(files) == 6
    known, rest = hist.footer_versions("refunds", files)
    assert rest == [] and known.schema == pl.Schema(hist.VERSIONS_SCHEMA)
    day = timedelta(days=3)
    assert sorted(known.rows()) == sorted(row for name in ("7", "8", "9") for row in (
        (name, "1.0.0", sha256_hex(V1), 9, T0, T0 + 8 * day), (name, "1.0.0", sha256_hex(V1), 2, T0 + 9 * day, T0 + 10 * day)))
    history = load_history("refunds", "8", dataset=root, ledger=None, paths=())
    assert history.per_scope() == {"7": 11, "8": 11, "9": 11}
    scoped = history.decisions.select("scope", "month").collect()
    assert scoped.schema == pl.Schema({"scope": pl.String, "month": pl.String})
    assert scoped.rows() == [("8", "2026-01")] * 9 + [("8", "2026-02")] * 2
    base = history.base.select("decision_id", "scope", "facts_state").collect()
    assert base.schema["scope"] == pl.String and base["scope"].to_list() == ["8"] * 11
    # The scope's own facts rows cover its decisions: the base is its typed facts, not a join.
    assert base["facts_state"].to_list() == ["typed"] * 11
    assert history.base.collect_schema().names() == [name for name in COVERED if "::" not in name]


def test_the_history_reads_the_contract_columns_only(tmp_path):
    """The decisions and outcomes are read with the dataset contract's analysis columns and types
    (the files hold more: evidence, hashes, the receipt), plus the hive scope and month."""
    decisions = decide(V1, [{"amount": 5}, {"amount": 200}])
    outcomes = [{"decision_id": "d00000", "status": "succeeded", "receipt_id": "o1",
                 "reported_at": T0 + timedelta(days=1)}]
    root = write_dataset(tmp_path / "ds", decisions, outcomes)
    history = load_history("refunds", None, dataset=root, ledger=None, paths=())
    assert history.decisions.collect_schema() == pl.Schema({**hist.DECISION_ANALYSIS_SCHEMA, **hist._HIVE})
    assert history.outcomes.collect_schema() == pl.Schema({**hist.OUTCOME_COLUMNS, **hist._HIVE})
    assert history.outcomes.collect().rows() == [("o1", "d00000", T0 + timedelta(days=1), "succeeded", "acme",
                                                  "2026-01")]


def test_an_empty_row_group_is_passed_over(tmp_path):
    """A row group without rows settles nothing and hides nothing: the row groups after it count."""
    source = pq.read_table(_files(_dataset(tmp_path))[0])
    path = tmp_path / "empty_first" / "scope=acme" / "part.parquet"
    path.parent.mkdir(parents=True)
    with pq.ParquetWriter(path, source.schema) as writer:
        writer.write_table(source.slice(0, 0))
        writer.write_table(source)
    assert pq.read_metadata(path).num_row_groups == 2
    assert hist._file_versions(str(path), "refunds") == [
        ("acme", "1.0.0", sha256_hex(V1), 3, int(T0.timestamp() * 1000), int((T0 + timedelta(days=6)).timestamp() * 1000))]


def test_a_listed_file_that_changed_refuses_the_dataset(tmp_path):
    """A decisions file that no longer matches its manifest entry: DATASET_INVALID, naming it."""
    root = _dataset(tmp_path)
    changed = _files(root)[0]
    with open(changed, "ab") as handle:
        handle.write(b"x")
    with pytest.raises(DryRunError) as caught:
        load_history("refunds", None, dataset=root, ledger=None, paths=())
    assert caught.value.code == "DATASET_INVALID"
    assert Path(changed).name in str(caught.value) and "None" not in str(caught.value)


@pytest.fixture
def writer(database_url, tmp_path):
    from ledger_support import LedgerWriter
    w = LedgerWriter(database_url, tmp_path / "keys.json")
    yield w
    w.close()


@pytest.mark.usefixtures("backend")
def test_from_ledger_reads_one_rulebook_in_its_scope(writer):
    """`from_ledger`: the rulebook's decisions and outcomes only (another rulebook's decision
    and outcome in the same scope are left out), of the asked scope only, and a source hash
    over that scope's chain heads."""
    from ledger_support import at

    from gate.ledger import stream
    ids = {}
    for name, scope, day, rulebook_id in (("a1", "tenant_a", 1, None), ("a2", "tenant_a", 2, None),
                                          ("b1", "tenant_b", 3, None), ("o1", "tenant_a", 4, "other_policy")):
        record = writer.decide(scope, at(1, day), rulebook_id=rulebook_id)
        ids[name] = record["decision_id"]
        if name != "a2":
            ids["r" + name] = writer.receipt("outcome", scope, record, at(2, day), "succeeded")["outcome_id"]
    ledger = writer.ledger
    every = hist.from_ledger(ledger, "pricing_exception")
    assert (every.rulebook_id, every.scope) == ("pricing_exception", None)
    assert every.per_scope() == {"tenant_a": 2, "tenant_b": 1}
    assert sorted(every.decisions.collect()["decision_id"]) == sorted([ids["a1"], ids["a2"], ids["b1"]])
    assert sorted(every.base.collect()["decision_id"]) == sorted([ids["a1"], ids["a2"], ids["b1"]])
    assert sorted(every.outcomes.collect()["receipt_id"]) == sorted([ids["ra1"], ids["rb1"]])
    assert every.source == {"kind": "ledger", "location": hist.ledger_location(ledger),
                            "hash": sha256_hex({"chain_heads": stream.chain_heads_of(ledger)}), "chain_heads": 2,
                            "dataset_schema_version": DATASET_SCHEMA_VERSION}
    scoped = hist.from_ledger(ledger, "pricing_exception", "tenant_b")
    assert scoped.scope == "tenant_b" and scoped.per_scope() == {"tenant_b": 1}
    assert scoped.decisions.collect()["decision_id"].to_list() == [ids["b1"]]
    assert scoped.base.collect()["decision_id"].to_list() == [ids["b1"]]
    assert scoped.outcomes.collect()["receipt_id"].to_list() == [ids["rb1"]]
    heads = stream.chain_heads_of(ledger, "tenant_b")
    assert len(heads) == 1 and scoped.source["chain_heads"] == 1
    assert scoped.source["hash"] == sha256_hex({"chain_heads": heads}) != every.source["hash"]


@pytest.mark.usefixtures("backend")
def test_from_ledger_of_a_rulebook_without_decisions_is_empty_in_the_contract_columns(writer):
    """A rulebook the ledger never decided: an empty history whose frames have the columns and
    types of a full one (the facts table's base columns, the decisions' and outcomes' contract)."""
    from ledger_support import at
    record = writer.decide("tenant_a", at(1, 1))
    writer.receipt("outcome", "tenant_a", record, at(2, 1), "succeeded")
    full = hist.from_ledger(writer.ledger, "pricing_exception")
    empty = hist.from_ledger(writer.ledger, "no_such_rulebook")
    assert empty.per_scope() == {} and empty.versions.height == 0
    for frame in ("decisions", "outcomes", "base"):
        assert getattr(empty, frame).collect().height == 0, frame
    assert empty.decisions.collect_schema() == full.decisions.collect_schema()
    assert empty.outcomes.collect_schema() == full.outcomes.collect_schema()
    base = {name: dtype for name, dtype in full.base.collect_schema().items() if "::" not in name}
    assert dict(empty.base.collect_schema()) == base
    assert sorted(base) == sorted(hist.REPLAY_COLUMNS)


@pytest.mark.usefixtures("backend")
def test_from_ledger_batches_of_different_facts_add_up_to_one_read(writer):
    """Read a decision at a time, batches whose facts differ (one without `account_tier`) give
    the history of one read: every batch's facts rows, the missing column null."""
    import copy

    from ledger_support import REQUEST, at

    from gate.services.decide import Caller
    writer.decide("tenant_a", at(1, 1))
    writer.clock.set(at(1, 2))
    body = copy.deepcopy(REQUEST)
    del body["context"]["inputs"]["account_tier"]
    bare = writer.service.decide(Caller("key_test", "tenant_a", "starter", 1000, 10_000_000), body).record
    writer.decide("tenant_a", at(1, 3), discount=30)
    whole = hist.from_ledger(writer.ledger, "pricing_exception").base.collect().sort("decision_id")
    by_one = hist.from_ledger(writer.ledger, "pricing_exception", batch_size=1).base.collect().sort("decision_id")
    assert by_one.height == 3 and sorted(by_one.columns) == sorted(whole.columns)
    assert by_one.select(whole.columns).equals(whole)
    tiers = [name for name in whole.columns if name.startswith("account_tier::")]
    assert tiers and whole.filter(pl.col("decision_id") == bare["decision_id"]).select(tiers).null_count().row(0) == (
        (1,) * len(tiers))
