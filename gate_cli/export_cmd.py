"""`gate export --out DIR [--scope S]`: the ledger into the Parquet dataset, incrementally.

The committed manifest lists every file's sha256 and is signed with the gate's Ed25519 key
(the keyring's active key; the HMAC receipt secret when there is no keyring); see
docs/dataset.md, "Integrity". Exit status: 0 after a run (also when there was nothing new), 2
when the dataset location cannot be used, a file an earlier run wrote no longer matches its
digest, there is no key to sign with while GATE_REQUIRE_SIGNING is true, or the ledger cannot
be read (the message on stderr says why; nothing was
written). A progress bar is drawn on stderr when stderr is a terminal.
"""

from __future__ import annotations

import json
import sys

from gate.errors import LedgerUnavailable
from gate.keys.config import SigningSetup
from gate.keys.signing import receipt_signer_for
from gate.settings import Settings
from gate_cli.cluster_opt import add_cluster_argument
from gate_cli.progress import ProgressBar


def cmd_export(args) -> int:
    # Lazy: the ledger and the exporter bring SQLAlchemy and Polars, which `gate --version` does without.
    from gate.ledger import Ledger
    from workbench.dataset.export import export_ledger
    from workbench.dataset.location import DatasetError

    if args.rebuild_rollups or args.cluster is not None:
        from gate_cli.rebuild_cmd import cmd_rebuild_rollups

        return cmd_rebuild_rollups(args)
    if args.batch_size < 1 or args.batch_size > 50_000:
        print("gate export: --batch-size must be from 1 to 50000", file=sys.stderr)
        return 2
    if args.settle_seconds < 0:
        print("gate export: --settle-seconds must be 0 or more", file=sys.stderr)
        return 2
    settings = Settings.from_env()
    signer = _dataset_signer(settings)
    if signer is None and settings.require_signing:
        print("gate export: no key to sign the dataset manifest: run `gate keys signing-init` (or set "
              "GATE_RECEIPT_HMAC_SECRET), or GATE_REQUIRE_SIGNING=false for an unsigned dataset", file=sys.stderr)
        return 2
    ledger = Ledger(settings.database_url)
    try:
        ledger.upgrade()
        result = export_ledger(ledger, args.out, scope=args.scope, batch_size=args.batch_size,
                               settle_seconds=args.settle_seconds, progress=ProgressBar(),
                               rollup_progress=ProgressBar(label="rollups", unit="partitions"), signer=signer)
    except DatasetError as exc:
        print(f"gate export: {exc}", file=sys.stderr)
        return 2
    except LedgerUnavailable as exc:
        print(f"gate export: the ledger cannot be read: {exc}", file=sys.stderr)
        return 2
    finally:
        ledger.dispose()
    manifest = result.manifest
    for warning in result.warnings:
        print(f"gate export: warning: {warning}", file=sys.stderr)
    if args.json:
        print(json.dumps({"out": args.out, "run": result.run, "new_rows": result.new_rows,
                          "files": [entry["path"] for entry in result.files],
                          "rows": {name: table["rows"] for name, table in manifest["tables"].items()},
                          "ledger_head": manifest["ledger_head"],
                          "warnings": result.warnings}, sort_keys=True))
    elif result.run is None:
        print(f"nothing new since export run {manifest['runs']}; {args.out} is unchanged")
    else:
        added = ", ".join(f"{name} +{count:,}" for name, count in result.new_rows.items() if name != "facts")
        facts = result.new_rows["facts"]
        added += f", facts +{sum(facts.values()):,} ({len(facts)} rulebooks)"
        rolled = manifest["rollups"]
        print(f"export run {result.run} to {args.out}: {added} ({len(result.files)} files); report rollups: "
              f"{rolled['recomputed_partitions']:,} of {rolled['decision_partitions']:,} partitions recomputed")
    return 0


def _dataset_signer(settings):
    """The key that signs the dataset manifest: the keyring's active Ed25519 key (anyone with
    the public key registry verifies it offline), else the HMAC receipt secret, else None."""
    setup = SigningSetup.load(settings.signing_key_file, settings.hmac_secret, settings.hmac_key_id,
                              settings.require_signing)
    return receipt_signer_for(setup.attestation_key()) or setup.receipt_signer()


def add_export_parser(sub) -> None:
    p = sub.add_parser("export", help="export the ledger into a Hive-partitioned Parquet dataset",
                       description="Stream what is new in the ledger since the last export into "
                                   "DIR (a path or an object-store URL); see docs/dataset.md.")
    p.add_argument("--out", required=True, metavar="DIR", help="dataset location: a path, file://, s3://, gs://")
    p.add_argument("--scope", default=None, help="export one scope only (default: every scope)")
    p.add_argument("--batch-size", type=int, default=2000, help="ledger rows per read (1 to 50000)")
    p.add_argument("--settle-seconds", type=int, default=120,
                   help="export receipts reported at least this long ago")
    p.add_argument("--json", action="store_true", help="print the run's summary as JSON")
    # `gate export --rebuild-rollups [--cluster ADDRESS]`: gate_cli/rebuild_cmd.py.
    p.add_argument("--rebuild-rollups", action="store_true",
                   help="recompute every partition's report rollups of the dataset at --out (no ledger read)")
    add_cluster_argument(p, "the rollup rebuild's partitions (with --rebuild-rollups)")
    p.set_defaults(func=cmd_export)
