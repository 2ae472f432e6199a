"""`gate export --out DIR [--scope S] [--format parquet|iceberg]`: the ledger into the dataset, incrementally.

`--format iceberg` writes the record tables as Apache Iceberg tables (one snapshot per table
and run) in a SQL catalog (`--catalog-uri`, default a SQLite file in DIR/iceberg/, or in
GATE_HOME/iceberg/ for an object-store DIR; `postgresql://…` in production) and a warehouse
(`--warehouse`, default DIR/iceberg/warehouse); the signed manifest names the snapshots and
their data files' digests (docs/dataset.md, "Iceberg layout").

The committed manifest lists every file's sha256 and is signed with the gate's Ed25519 key
(the keyring's active key; the HMAC receipt secret when there is no keyring); see
docs/dataset.md, "Integrity". Exit status: 0 after a run (also when there was nothing new), 2
when the dataset location cannot be used, a file an earlier run wrote no longer matches its
digest, there is no key to sign with while GATE_REQUIRE_SIGNING is true, or the ledger cannot
be read (the message on stderr says why; nothing was
written). A progress bar is drawn on stderr when stderr is a terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from gate.settings import Settings
from gate_cli.cluster_opt import add_cluster_argument
from gate_cli.context import CliError
from gate_cli.help import Subparsers
from gate_cli.progress import ProgressBar

if TYPE_CHECKING:
    from workbench.dataset.export import ExportResult
    from workbench.dataset.iceberg import IcebergTarget
    from workbench.dataset.manifest import DatasetManifest


def cmd_export(args: argparse.Namespace) -> int:
    # Lazy: the ledger and the exporter bring SQLAlchemy and Polars, which `gate --version` does without.
    from gate.services.root import ledger_of
    from workbench.services.root import compose, signing_setup

    if args.rebuild_rollups or args.cluster is not None:
        from gate_cli.rebuild_cmd import cmd_rebuild_rollups

        return cmd_rebuild_rollups(args)
    if args.batch_size < 1 or args.batch_size > 50_000:
        raise CliError("--batch-size must be from 1 to 50000")
    if args.settle_seconds < 0:
        raise CliError("--settle-seconds must be 0 or more")
    if args.format != "iceberg" and (args.catalog_uri or args.warehouse or args.namespace):
        raise CliError("--catalog-uri, --warehouse and --namespace need --format iceberg")
    settings = Settings.from_env()
    # The one signing rule for datasets (`workbench.services.exports`): refused (SigningRefused)
    # before the ledger or the dataset is opened when there is no key while signing is required.
    export = compose(signing_setup(settings)).exports.begin()
    ledger = ledger_of(settings)
    try:
        lakehouse = _lakehouse(args, settings)
        ledger.upgrade()
        result = export.run(ledger, args.out, scope=args.scope, batch_size=args.batch_size,
                            settle_seconds=args.settle_seconds, progress=ProgressBar(),
                            rollup_progress=ProgressBar(label="rollups", unit="partitions"),
                            lakehouse=lakehouse, layout=args.format)
    finally:  # DatasetError, LedgerUnavailable: refusals, printed by gate_cli.main
        ledger.dispose()
    _print_result(args, result)
    return 0


def _print_result(args: argparse.Namespace, result: ExportResult) -> None:
    """The run's summary on stdout (JSON with --json), its warnings on stderr."""
    manifest = result.manifest
    for warning in result.warnings:
        print(f"gate export: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps({"out": args.out, "run": result.run, "new_rows": result.new_rows,
                          "files": [entry["path"] for entry in result.files],
                          "snapshots": _snapshots(manifest),
                          "rows": {name: table["rows"] for name, table in manifest["tables"].items()},
                          "ledger_head": manifest["ledger_head"], "inputs_removed": result.inputs_removed,
                          "warnings": result.warnings}, sort_keys=True))
        return
    if result.inputs_removed is not None:
        removed = result.inputs_removed
        causes = ", ".join(f"{cause} {count:,}" for cause, count in removed["by_cause"].items())
        print(f"inputs removed: {removed['decisions']:,} decisions ({causes}); {removed['decision_rows']:,} "
              f"decision rows and {removed['facts_rows']:,} facts rows rewritten in {removed['files']:,} files")
    if result.run is None:
        print(f"nothing new since export run {manifest['runs']}; {args.out} is unchanged")
    elif "inputs_removed" in manifest.get("last_run", {}):  # the removals' run was the last
        print(f"export run {result.run} to {args.out}: inputs removed, no new rows")
    else:
        added = ", ".join(f"{name} +{count:,}" for name, count in result.new_rows.items() if name != "facts")
        facts = result.new_rows["facts"]
        added += f", facts +{sum(facts.values()):,} ({len(facts)} rulebooks)"
        rolled = manifest.get("rollups")
        if rolled is None:  # the Iceberg layout: the run's snapshots instead of rollups
            tail = "Iceberg snapshots: " + ", ".join(f"{name} {snapshot}" for name, snapshot
                                                      in _snapshots(manifest).items() if snapshot is not None)
        else:
            tail = (f"report rollups: {rolled['recomputed_partitions']:,} of {rolled['decision_partitions']:,} "
                    "partitions recomputed")
        print(f"export run {result.run} to {args.out}: {added} ({len(result.files)} files); {tail}")


def _lakehouse(args: argparse.Namespace, settings: Settings) -> IcebergTarget | None:
    """The Iceberg target of `--format iceberg` (None for the Parquet layout)."""
    if args.format != "iceberg":
        return None
    from workbench.dataset.iceberg import DEFAULT_NAMESPACE, default_target

    return default_target(args.out, settings.home, catalog_uri=args.catalog_uri, warehouse=args.warehouse,
                          namespace=args.namespace or DEFAULT_NAMESPACE)


def _snapshots(manifest: DatasetManifest) -> dict[str, int | None]:
    """Each Iceberg table's snapshot the manifest names (empty for the Parquet layout)."""
    member = manifest.get("iceberg")
    return {} if member is None else {name: table["snapshot_id"] for name, table in member["tables"].items()}


def add_export_parser(sub: Subparsers) -> None:
    p = sub.add_parser("export",
                       description="Stream what is new in the ledger since the last export into "
                                   "DIR (a path or an object-store URL); see docs/dataset.md.")
    p.add_argument("--out", required=True, metavar="DIR", help="dataset location: a path, file://, s3://, gs://")
    p.add_argument("--scope", default=None, help="export one scope only (default: every scope)")
    p.add_argument("--batch-size", type=int, default=2000, help="ledger rows per read (1 to 50000)")
    p.add_argument("--settle-seconds", type=int, default=120,
                   help="export receipts reported at least this long ago")
    p.add_argument("--format", choices=("parquet", "iceberg"), default=None,
                   help="the dataset's layout: Hive-partitioned Parquet files, or Apache Iceberg tables for the "
                        "record tables (default: the dataset's own, parquet for a new one; a dataset keeps "
                        "the layout of its first run)")
    p.add_argument("--catalog-uri", default=None, metavar="URI",
                   help="with --format iceberg: the SQL catalog (sqlite:///FILE or postgresql://…; default a "
                        "SQLite file in DIR/iceberg/)")
    p.add_argument("--warehouse", default=None, metavar="PATH|URL",
                   help="with --format iceberg: where the tables' files go (default DIR/iceberg/warehouse)")
    p.add_argument("--namespace", default=None, help="with --format iceberg: the catalog namespace (default gate)")
    p.add_argument("--json", action="store_true", help="print the run's summary as JSON")
    # `gate export --rebuild-rollups [--cluster ADDRESS]`: gate_cli/rebuild_cmd.py.
    p.add_argument("--rebuild-rollups", action="store_true",
                   help="recompute every partition's report rollups of the dataset at --out (no ledger read)")
    add_cluster_argument(p, "the rollup rebuild's partitions (with --rebuild-rollups)")
    p.set_defaults(func=cmd_export)
