"""`gate dry-run`: re-evaluate a rulebook's history under a draft, or verify a dry-run's manifest.

    gate dry-run --rulebook-id ID --draft FILE [--scope S] [--dataset DIR] --out DIR [--json]
    gate dry-run --verify DIR|migration.json [--draft FILE] [--dataset DIR] [--public-key PEM]
                 [--key-registry FILE]

Without `--dataset` the live ledger (GATE_DATABASE_URL) is read. The manifest is signed with
the service's receipt key (GATE_SIGNING_KEY_FILE keyring, or GATE_RECEIPT_HMAC_SECRET); with
GATE_REQUIRE_SIGNING=true (the default) and no key, nothing runs. `--verify` checks the
manifest against the published schema, its result and migration hashes and its signature by
a key this gate trusts (its keyring and HMAC secret, plus `--public-key`), and, when given,
that `--draft` is the draft it tested and `--dataset` the history it ran on: the dataset's
manifest is the one the dry-run read, signed by a trusted key, and every file it lists matches
its sha256 (offline: `--public-key` or `--key-registry` alone suffice).

Exit codes: 0 done (or verified), 1 not verified, 2 bad input (nothing written; the message
names the problem, and for an invalid draft every `{field, code, message}` with its exact
schema path).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from gate.keys.anchors import TrustAnchorError, TrustAnchors
from gate.settings import Settings
from gate_cli.cluster_opt import add_cluster_argument
from gate_cli.context import open_ledger
from gate_cli.help import Subparsers

if TYPE_CHECKING:
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from workbench.dataset.trust import Trust
    from workbench.migration import DryRunError
    from workbench.migration.impact import CostModel
    from workbench.migration.manifest import MigrationManifest
    from workbench.services.dry_runs import Baseline

__all__ = ["add_dry_run_parser", "cmd_dry_run"]


def add_dry_run_parser(sub: Subparsers) -> None:
    p = sub.add_parser("dry-run")
    p.add_argument("--rulebook-id", help="the rulebook whose historical decisions are replayed "
                                                "(required unless --verify)")
    p.add_argument("--draft", help="the draft rulebook (JSON file) (required unless --verify; "
                                     "with --verify: optional, checked to be the draft tested)")
    p.add_argument("--scope", default=None, help="only this scope's decisions (default: every scope)")
    p.add_argument("--dataset", default=None, help="an exported dataset folder (default: the live ledger)")
    p.add_argument("--out", help="folder for migration.json, report.md, report.html, flips.parquet "
                                   "(required unless --verify)")
    p.add_argument("--flips-limit", type=int, default=200, help="flips listed in the reports (all are in flips.parquet)")
    p.add_argument("--cost-model", metavar="FILE", default=None,
                   help="JSON {failure, review, lost_success, outcome_horizon_days} for dry_run.impact "
                        "(default: failure 1, review 0.05, lost success 0.2, horizon 30 days; docs/dry-run.md)")
    p.add_argument("--baseline", metavar="current|history|FILE", default=None,
                   help="what the draft is compared with: current (what production runs in --scope: the active "
                        "release version, or the newest version callers sent where there is no release; read from "
                        "the ledger, GATE_DATABASE_URL), history (the verdicts stored when each decision was made, "
                        "by the version that ran then) or FILE (a rulebook version, replayed like current) "
                        "(default: current with --scope, falling back to history where no version runs there; "
                        "history without --scope; docs/dry-run.md)")
    p.add_argument("--verify", metavar="PATH", help="verify a dry-run folder or its migration.json instead "
                                                        "(default: run a dry-run)")
    p.add_argument("--public-key", help="with --verify: PEM file of another trusted Ed25519 public key "
                                          "(default: none)")
    p.add_argument("--key-registry", help="a saved receipt key registry (JSON file) of trusted public keys: with "
                                            "--verify, of the result; with --dataset, of the dataset's signature "
                                            "(default: GATE_KEY_REGISTRY for --dataset, none for --verify)")
    add_allow_unsigned(p)
    p.add_argument("--allow-stale", action="store_true",
                   help="sign a result over a dataset that lags the live ledger past GATE_DATASET_STALE_AFTER "
                        "(the manifest then names the lag in dry_run.source.stale; default: refused, DATASET_STALE)")
    p.add_argument("--json", action="store_true", help="print the result (or the verification) as JSON")
    add_cluster_argument(p, "the replay over the dataset's partitions (with --dataset)")
    p.set_defaults(func=cmd_dry_run)


def add_allow_unsigned(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-unsigned", action="store_true",
                   help="with --dataset: read a dataset whose manifest carries no signature (synthetic or local "
                        "data); the result names no dataset key (default: the dataset's signature must verify "
                        "with this gate's keys)")


def trust_for(args: argparse.Namespace, settings: Settings) -> Trust:
    """How the command trusts `--dataset` (`gate_cli.context.dataset_trust`): against the live ledger's
    chain heads when one is at hand (for staleness)."""
    from gate_cli.context import dataset_trust, ledger_at_hand
    from workbench.dataset.trust import Untrusted
    from workbench.migration import DryRunError

    ledger = ledger_at_hand(settings)
    try:
        return dataset_trust(settings, allow_unsigned=args.allow_unsigned, ledger=ledger,
                             key_registry=getattr(args, "key_registry", None))
    except Untrusted as error:
        raise DryRunError("USAGE", str(error)) from None
    finally:
        if ledger is not None:
            ledger.dispose()


def _fail(error: DryRunError, as_json: bool, command: str = "dry-run") -> int:
    if as_json:
        print(json.dumps(error.to_dict(), indent=2), file=sys.stderr)
    else:
        print(f"gate {command}: {error.code}: {error.message}", file=sys.stderr)
        for item in error.errors:
            print(f"  {item['field']}: {item['code']}: {item['message']}", file=sys.stderr)
    return 2


def _signing() -> tuple[Settings, SigningSetup]:
    from gate.services.root import signing_setup

    settings = Settings.from_env()
    return settings, signing_setup(settings)


def _digest_store(settings: Settings) -> None:
    """Dataset files checked against their manifest are remembered in GATE_HOME by identity."""
    # Lazy (here and below): the dataset, the migration engine and the ledger bring Polars and SQLAlchemy.
    from workbench.dataset import integrity

    integrity.use_digest_store(integrity.digest_store_of(settings.home))


def _cost_model(path: str | None) -> CostModel:
    """The author's cost model from a JSON file (DryRunError USAGE when unreadable or invalid)."""
    from workbench.migration import DryRunError
    from workbench.migration.impact import CostModel

    if path is None:
        return CostModel()
    try:
        body = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(body, dict):
            raise ValueError("cost model: the file must hold a JSON object")
        return CostModel.from_dict(body)
    except (OSError, ValueError, TypeError) as exc:
        raise DryRunError("USAGE", f"--cost-model {path}: {exc}") from None


def _check_args(args: argparse.Namespace) -> None:
    """The run's arguments (DryRunError USAGE): the required ones, the flips limit, a cluster's dataset."""
    from workbench.migration import DryRunError

    missing = [name for name in ("rulebook_id", "draft", "out") if not getattr(args, name)]
    if missing:
        raise DryRunError("USAGE", "missing " + ", ".join("--" + m.replace("_", "-") for m in missing))
    if args.flips_limit < 0 or args.flips_limit > 100_000:
        raise DryRunError("USAGE", "--flips-limit must be between 0 and 100000")
    if args.cluster is not None and args.dataset is None:
        raise DryRunError("USAGE", "--cluster replays a dataset's partitions: give --dataset")


def _baseline(args: argparse.Namespace, settings: Settings, setup: SigningSetup,
              ledger: Ledger | None) -> Baseline | None:
    """(the baseline version, where it came from) of `--baseline`, None for the history
    (DryRunError USAGE, BASELINE_INVALID; workbench.migration.baseline)."""
    from workbench.migration import DryRunError
    from workbench.migration.draft import read_draft_file

    choice = args.baseline or ("current" if args.scope else "history")
    if choice == "history":
        return None
    if choice != "current":
        try:
            return read_draft_file(choice), f"file {choice}"
        except DryRunError as exc:
            raise DryRunError("BASELINE_INVALID", f"--baseline {exc.message}") from None
    if not args.scope:
        raise DryRunError("USAGE", "--baseline current needs --scope (each scope runs its own version); "
                          "give --baseline history or --baseline FILE to compare without one")
    from gate.errors import GateError
    from gate.ledger import DatabaseError
    from gate.services.root import ledger_of
    from workbench.services.root import compose

    reader = ledger or ledger_of(settings)
    why = f"no version of {args.rulebook_id!r} runs in scope {args.scope!r} in the ledger (GATE_DATABASE_URL)"
    try:
        running = compose(setup, reader).dry_runs.production(args.scope, args.rulebook_id)
    except (GateError, DatabaseError) as exc:  # no ledger there (a dataset read elsewhere), or unreadable
        running, why = None, f"the ledger (GATE_DATABASE_URL) cannot be read: {str(exc).splitlines()[0]}"
    finally:
        if ledger is None:
            reader.dispose()
    if running is None and args.baseline == "current":
        raise DryRunError("BASELINE_INVALID", f"{why}: give --baseline history or --baseline FILE")
    return running


def _run(args: argparse.Namespace) -> int:
    from workbench.migration import DryRunError
    from workbench.migration.draft import load_draft, read_draft_file
    from workbench.services.root import compose

    _check_args(args)
    settings, setup = _signing()
    _digest_store(settings)
    compose(setup).dry_runs.check_signing()  # no key while signing is required: refused before any work
    draft = read_draft_file(args.draft)
    if args.cluster is not None:  # a bad draft is refused before the cluster is reached
        load_draft(draft, args.rulebook_id)
    cost = _cost_model(args.cost_model)
    ledger = None
    if args.dataset is None:
        ledger = open_ledger(settings)
    baseline = _baseline(args, settings, setup, ledger)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise DryRunError("USAGE", f"--out {out} exists and is not a folder")
    # Bad input raises above or inside dry_run before anything is written; flips.parquet is
    # written to a temporary name while the history is replayed and renamed with the others.
    staging_dir = Path(tempfile.mkdtemp(prefix="gate-dry-run-"))
    staging = staging_dir / "flips.parquet"
    try:
        # The dataset's manifest must be signed by a key this gate trusts, or unsigned by
        # --allow-unsigned (the result then names no dataset key); stale: see result_signer.
        trust = trust_for(args, settings) if args.dataset is not None else None
        dry_runs = compose(setup, ledger).dry_runs
        run = dry_runs.run(draft, args.rulebook_id, scope=args.scope, dataset=args.dataset, trust=trust,
                           cluster=args.cluster, baseline=baseline, flips_limit=args.flips_limit, flips_path=staging,
                           cost=cost)
        manifest = dry_runs.write(run, out, allow_stale=args.allow_stale)
        shutil.move(staging, out / "flips.parquet")
    finally:
        shutil.rmtree(staging_dir, ignore_errors=True)
        if ledger is not None:
            ledger.dispose()
    d = manifest["dry_run"]
    if args.json:
        print(json.dumps({"out": str(out), "migration_hash": manifest.get("migration_hash"), **{
            k: d[k] for k in ("baseline", "decisions_total", "decisions_evaluated", "decisions_changed",
                              "decisions_unreplayable", "transitions", "impact", "result_hash")}}, indent=2))
    else:
        _print_summary(args.rulebook_id, out, manifest)
    return 0


def _print_summary(rulebook_id: str, out: Path, manifest: MigrationManifest) -> None:
    """The written dry-run in a few lines: the draft, the replay, the review queue with the impact's
    headline, the cost of a hold, and the files."""
    from workbench.migration.baseline import compared_with
    from workbench.migration.holdcost import hold_cost_text
    from workbench.migration.impact import headline, measured

    d = manifest["dry_run"]
    impact = measured(d["impact"])
    print(f"dry-run of {rulebook_id} under draft {manifest['to']['version']} "
          f"(sha256 {manifest['to']['rulebook_hash'][:16]}…), {compared_with(d['baseline'])}")
    print(f"  {d['decisions_evaluated']:,} decisions replayed, {d['decisions_changed']:,} change verdict, "
          f"{d['decisions_unreplayable']:,} could not be replayed (no facts)")
    print(f"  review queue {d['review_load']['before']:,} → {d['review_load']['after']:,}; " + headline(impact))
    print(f"  cost of a hold: {hold_cost_text(d['review_load'].get('hold_cost'))}")
    print(f"  wrote {out}/migration.json, report.md, report.html, flips.parquet")


def _verify(args: argparse.Namespace) -> int:
    from workbench.migration import DryRunError, verify_manifest
    from workbench.migration.draft import read_draft_file

    path = Path(args.verify)
    path = path / "migration.json" if path.is_dir() else path
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DryRunError("USAGE", f"cannot read {path}: {exc}") from exc
    settings, setup = _signing()
    _digest_store(settings)
    anchors = setup.trust_anchors()
    if args.public_key:
        try:
            anchors = anchors + TrustAnchors.from_public_key_pem(Path(args.public_key).read_text())
        except (OSError, TrustAnchorError) as exc:
            raise DryRunError("USAGE", f"cannot use --public-key {args.public_key}: {exc}") from exc
    if args.key_registry:
        try:
            anchors = anchors + TrustAnchors.from_registry_body(Path(args.key_registry).read_bytes())
        except (OSError, TrustAnchorError) as exc:
            raise DryRunError("USAGE", f"cannot use --key-registry {args.key_registry}: {exc}") from exc
    draft = read_draft_file(args.draft) if args.draft else None
    dataset_manifest = None
    if args.dataset:
        from workbench.dataset.location import DatasetError, open_location

        # The manifest's bytes as they are (a folder or an object-store URL): `verify_manifest`
        # checks them, their hash and their signature against what the dry-run names.
        try:
            dataset_manifest = open_location(args.dataset).read_bytes("manifest.json")
        except (DatasetError, OSError) as exc:
            raise DryRunError("DATASET_INVALID", f"cannot read {args.dataset}/manifest.json: {exc}") from exc
        if dataset_manifest is None:
            raise DryRunError("DATASET_INVALID", f"cannot read {args.dataset}/manifest.json: no such file")
    result = verify_manifest(manifest, anchors, draft=draft, dataset_manifest=dataset_manifest,
                             dataset_root=args.dataset)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{path}: " + ("VERIFIED" if result["valid"] else "NOT VERIFIED"))
        for name, passed in result["checks"].items():
            print(f"  [{'ok  ' if passed else 'FAIL'}] {name}")
        for problem in result["problems"]:
            print(f"  {problem}")
    return 0 if result["valid"] else 1


def cmd_dry_run(args: argparse.Namespace) -> int:
    from workbench.cluster import ClusterError
    from workbench.migration import DryRunError

    try:
        return _verify(args) if args.verify else _run(args)
    except DryRunError as error:
        return _fail(error, args.json)
    except ClusterError as error:
        return _fail(DryRunError("CLUSTER_UNAVAILABLE", str(error)), args.json)
