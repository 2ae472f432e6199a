"""The dataset manifest (`DIR/manifest.json`) as types: the one home of its shape.

Each member is documented in docs/dataset.md ("manifest.json", and "The manifest" of the Iceberg
layout). The export (`workbench.dataset.export`), the synthetic generator and the rollup rebuild
write it; the loader (`workbench.dataset.load`), the integrity check, the trust verdict, the
rollups, the Iceberg reader and the dry-run's history read it.

A manifest read from disk is checked for its schema version only (`location.read_manifest`,
`load.open_dataset`); until its `dataset_hash` and signature verify, the readers that run before
that check (`workbench.dataset.integrity`, `workbench.dataset.trust`) read its members defensively
(`isinstance`), as JSON that may have been changed. The types say what a gate writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NotRequired, TypedDict

__all__ = [
    "ChainEntry",
    "DatasetManifest",
    "FileDigest",
    "FileEntry",
    "HoldChainEntry",
    "IcebergFileEntry",
    "IcebergLocation",
    "IcebergMember",
    "IcebergSnapshot",
    "IcebergTableEntry",
    "LastRun",
    "LedgerHead",
    "ManifestSignature",
    "NewRows",
    "ReceiptMark",
    "RemovalMark",
    "RewriteSummary",
    "RollupDigest",
    "RollupsMember",
    "Synthesis",
    "TableEntry",
    "Watermark",
    "new_rows_of",
]


class FileDigest(TypedDict):
    """A file's `sha256` (hex, of its bytes) and size in `bytes` (`integrity.describe_file`)."""

    sha256: str
    bytes: int


class FileEntry(FileDigest):
    """One committed part file: `path` relative to the dataset root, its rows and its run."""

    path: str
    rows: int
    run: int


class TableEntry(TypedDict):
    """`tables.<table>` and `facts.<rulebook id>`: the rows and every committed file."""

    rows: int
    files: list[FileEntry]


class ChainEntry(TypedDict):
    """`chains.<scope>`: the scope's chain head the dataset was cut at, and its head decision's
    hashes once a run exported that decision."""

    chain_id: str
    size: int
    merkle_root: str
    head_link_hash: str
    head_decision_id: NotRequired[str]
    head_record_hash: NotRequired[str]
    head_receipt_hash: NotRequired[str]


class HoldChainEntry(TypedDict):
    """`hold_chains.<scope>`: the hold chain head the hold tables were cut at."""

    seq: int
    head_event_hash: str | None  # None before the scope's first hold event
    as_of: str


class ReceiptMark(TypedDict):
    """The last exported receipt of one kind: its keyset and how many were exported."""

    reported_at: str
    receipt_id: str
    count: int


class RemovalMark(TypedDict):
    """The last ledger removal (`decision_removals`) a run applied: its keyset and how many the
    dataset has followed (`workbench.dataset.rewrite`)."""

    removed_at: str
    decision_id: str
    count: int


class Watermark(TypedDict):
    """`watermarks.<scope>`: where the next run starts (`receipts` by receipt kind)."""

    chain_position: int
    receipts: dict[str, ReceiptMark]
    hold_seq: NotRequired[int]  # absent until a run exported the scope's holds
    removals: NotRequired[RemovalMark]  # absent until a run applied one of the scope's removals


class LedgerHead(TypedDict):
    """`ledger_head`: the exported ledger state in one hash (`export.ledger_head`)."""

    decisions: int
    scopes: int
    rows: dict[str, int]  # per record table
    head_hash: str


class NewRows(TypedDict):
    """`last_run.new_rows` (and `ExportResult.new_rows`): rows a run added per table, and per
    rulebook id to its facts. The hold tables are absent from a rollup rebuild's (no rows added)."""

    decisions: int
    executions: int
    outcomes: int
    crm_syncs: int
    chain_links: int
    holds: NotRequired[int]
    hold_events: NotRequired[int]
    facts: dict[str, int]


class LastRun(TypedDict):
    """`last_run`: the latest run. A rollup rebuild's says `rollups_rebuilt` and keeps the cut of
    the export before it (`receipts_reported_before`, None when that manifest named none)."""

    run: int
    at: str
    new_rows: NewRows
    scopes: list[str]
    receipts_reported_before: str | None
    rollups_rebuilt: NotRequired[bool]
    inputs_removed: NotRequired[RewriteSummary]


class RewriteSummary(TypedDict):
    """`last_run.inputs_removed` of a run that applied the ledger's removals
    (`workbench.dataset.rewrite`): decisions whose rows were emptied, per cause, and the files
    rewritten (facts rows per rulebook's facts files, decision rows in the decisions files)."""

    decisions: int
    by_cause: dict[str, int]
    decision_rows: int
    facts_rows: int
    files: int


class RollupDigest(FileDigest):
    """`rollups.file_digests.<state>`."""

    rows: int


class RollupsMember(TypedDict):
    """`rollups`: the report rollups of the last run (`workbench.dataset.rollups.update`)."""

    version: str
    run: int
    classes_hash: str
    files: dict[str, str]  # state -> path
    file_digests: dict[str, RollupDigest]
    rows: int
    decision_partitions: int
    recomputed_partitions: int


class IcebergFileEntry(FileEntry):
    """A data file of an Iceberg table: `path` relative to the warehouse, and its partition."""

    scope: str
    month: str


class IcebergSnapshot(TypedDict):
    run: int
    snapshot_id: int


class IcebergTableEntry(TypedDict):
    """`iceberg.tables.<table>`: the snapshot the dataset was cut at (None while empty)."""

    identifier: str
    snapshot_id: int | None
    snapshots: list[IcebergSnapshot]
    files: list[IcebergFileEntry]


class IcebergLocation(TypedDict):
    """Where an Iceberg dataset's tables are (`IcebergTarget.member`): the catalog URI without
    its password, the catalog's name, the warehouse and the namespace."""

    catalog: str
    catalog_name: str
    warehouse: str
    namespace: str


class IcebergMember(IcebergLocation):
    """`iceberg`: the location and every record table's snapshot and data files."""

    tables: dict[str, IcebergTableEntry]


class Synthesis(TypedDict):
    """`synthesis`: how a synthetic dataset was drawn (`workbench.dataset.synth`)."""

    decisions: int
    seed: int
    chunk: int
    seconds: float


class ManifestSignature(TypedDict):
    """`signature`: `value` signs canon({key_id, dataset_hash}) (`integrity.seal`)."""

    algorithm: str
    key_id: str
    signed_field: Literal["dataset_hash"]
    value: str
    public_key_fingerprint: NotRequired[str]


class DatasetManifest(TypedDict):
    """`manifest.json`. `export.new_manifest` gives the members every manifest has; the others
    come with the runs (`last_run`, `rollups`, `hold_chains`), the layout (`layout`, `iceberg`),
    the generator (`synthesis`) and the seal (`previous_dataset_hash`, `dataset_hash`, `signature`)."""

    dataset_schema_version: str
    synthetic: bool
    generator: str
    created_at: str
    updated_at: str
    runs: int
    tables: dict[str, TableEntry]
    facts: dict[str, TableEntry]
    chains: dict[str, ChainEntry]
    watermarks: dict[str, Watermark]
    ledger_head: LedgerHead
    hold_chains: NotRequired[dict[str, HoldChainEntry]]
    last_run: NotRequired[LastRun]
    rollups: NotRequired[RollupsMember]
    layout: NotRequired[Literal["iceberg"]]
    iceberg: NotRequired[IcebergMember]
    synthesis: NotRequired[Synthesis]
    previous_dataset_hash: NotRequired[str | None]
    dataset_hash: NotRequired[str]
    signature: NotRequired[ManifestSignature]


def new_rows_of(tables: Mapping[str, int], facts: Mapping[str, int]) -> NewRows:
    """The `new_rows` member of the counts per table (the hold tables when counted) and per
    rulebook's facts, in the tables' order with `facts` last."""
    if "holds" in tables or "hold_events" in tables:
        return {"decisions": tables["decisions"], "executions": tables["executions"], "outcomes": tables["outcomes"],
                "crm_syncs": tables["crm_syncs"], "chain_links": tables["chain_links"], "holds": tables["holds"],
                "hold_events": tables["hold_events"], "facts": dict(facts)}
    return {"decisions": tables["decisions"], "executions": tables["executions"], "outcomes": tables["outcomes"],
            "crm_syncs": tables["crm_syncs"], "chain_links": tables["chain_links"], "facts": dict(facts)}
