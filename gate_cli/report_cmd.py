"""`gate report KIND --policy ID [--scope S] [--dataset DIR] [--json]`: the policy reports of
the API on the terminal, from the live ledger (default) or from an exported Parquet dataset.

The numbers are the API's: the same report service (`workbench.services.reports`), report kinds
(`gate.reports.registry`), loader contract, engines and envelopes (`workbench.reports.policy`). Readable text by default; `--json` prints the sealed report
exactly as the endpoint answers it. Exit status 2 on bad input (unknown parameter values, a
dataset of another schema version), with the reason on stderr.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from gate.reports.registry import NAMES, REPORTS, ReportKind
from gate.strict_json import JsonValue
from gate_cli.cluster_opt import add_cluster_argument, cluster_client
from gate_cli.context import CliError, dataset_trust, ledger_at_hand, load_settings, open_ledger
from gate_cli.help import HelpFormatter, Subparsers
from gate_cli.report_text import render

if TYPE_CHECKING:
    from gate.ledger import Ledger
    from gate.reports.params import ReportParams

OPTIONS = ("policy_version", "verdict", "action", "limit", "min_sample", "threshold", "max_items", "min_cohort_scopes",
           "min_cohort_decisions", "outcome_window_days")
DATASET_LIMIT = 1_000_000_000


class _ReportHelp(HelpFormatter):
    """`gate report --help`: each endpoint parameter's meaning, range, default and the reports
    that take it, read from `gate.reports.params.PARAMS` when help is shown (so `gate`
    starts without Polars, and the help cannot drift from what the reports apply)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.dest not in OPTIONS:
            return super()._get_help_string(action)
        try:
            # Lazy: the parameters live beside the engines (Polars), read only when help is shown.
            from gate.reports.params import PARAMS
        except ImportError:  # a core-only install: no reports to run anyway
            return action.help or ""
        kinds = ", ".join(kind for kind in NAMES if action.dest in REPORTS[kind].params)
        text = f"{PARAMS[action.dest].describe()} Reports: {kinds}."
        if action.dest == "limit":
            text += (" With --dataset: up to 1e9, or 'all' (every decision of the selection; shown as "
                     "limit=all).")
        return text.replace("%", "%%")


def add_report_parser(sub: Subparsers) -> None:
    p = sub.add_parser("report",
                       formatter_class=_ReportHelp,
                       description="Readable text by default (rates as percentages with one decimal, scores "
                                   "with four); --json prints the sealed report exactly as the endpoint answers.")
    p.add_argument("kind", choices=NAMES)
    p.add_argument("--policy", required=True, help="policy id (the rulebook id)")
    p.add_argument("--scope", help="the scope whose decisions are reported (required for the ledger and "
                                   "benchmarks; default with --dataset: every scope)")
    p.add_argument("--dataset", help="read an exported dataset (path or URL) instead of the live ledger "
                                     "(default: the live ledger, GATE_DATABASE_URL)")
    p.add_argument("--allow-unsigned", action="store_true",
                   help="with --dataset: read a dataset whose manifest carries no signature (synthetic or local "
                        "data); every report then says source.trust \"unsigned\" (default: a dataset is read "
                        "only when its signature verifies with this gate's keys)")
    p.add_argument("--key-registry", default=None, metavar="FILE",
                   help="with --dataset: a saved key registry (GET /api/decision/receipt-keys) whose public keys the "
                        "dataset's signature may verify with; no private key is needed (default: GATE_KEY_REGISTRY)")
    p.add_argument("--json", action="store_true", help="print the sealed report as JSON")
    add_cluster_argument(p, "the engines' partials over the dataset's partitions (with --dataset and --limit all)")
    for name in OPTIONS:
        p.add_argument("--" + name.replace("_", "-"), dest=name, default=None,
                       help=f"as the endpoint's {name} query parameter")
    p.set_defaults(func=cmd_report)


def _digest_store() -> None:
    """Files checked against the dataset's manifest are remembered in GATE_HOME by identity."""
    # Lazy (here and below): the dataset readers and the engines bring Polars and the ledger SQLAlchemy.
    from workbench.dataset import integrity

    integrity.use_digest_store(integrity.digest_store_of(load_settings().home))


def _params(args: argparse.Namespace) -> ReportParams:
    """The report's parameters from the options, as strictly as the endpoint parses its query;
    `--limit all` (a dataset only) lifts the limit."""
    from gate.reports.registry import parse_params

    raw = {name: getattr(args, name) for name in OPTIONS if getattr(args, name) is not None}
    every = raw.get("limit") == "all"
    if every and not args.dataset:
        raise CliError("--limit all reads a whole dataset; the ledger allows 1 to 10000")
    if every:
        del raw["limit"]
    params = parse_params(args.kind, raw, limit_high=DATASET_LIMIT if args.dataset else None)
    return replace(params, limit=None) if every else params


def _check_scope(args: argparse.Namespace, kind: ReportKind, params: ReportParams) -> None:
    if args.scope is None and (args.dataset is None or kind.cohort):
        raise CliError("--scope is required (reports from the ledger and benchmarks are per scope)")
    if args.allow_unsigned and args.dataset is None:
        raise CliError("--allow-unsigned reads an unsigned dataset: give --dataset")
    if args.cluster is not None and (args.dataset is None or params.limit is not None):
        raise CliError("--cluster reads a whole dataset over its partitions: give --dataset and --limit all")
    if args.cluster is not None and kind.reads_holds:
        raise CliError(f"the {kind.name} report reads the holds in this process: leave out --cluster")


def _trust(args: argparse.Namespace, ledger: Ledger | None) -> Any:
    """How the dataset is trusted (`gate_cli.context.dataset_trust`): against the live ledger's
    chain heads when a ledger is at hand (the cohort's, or the configured one when it exists)."""
    settings = load_settings()
    at_hand = ledger if ledger is not None else ledger_at_hand(settings)
    try:
        return dataset_trust(settings, allow_unsigned=args.allow_unsigned, ledger=at_hand,
                             key_registry=args.key_registry)
    finally:
        if at_hand is not None and at_hand is not ledger:
            at_hand.dispose()


def _report(args: argparse.Namespace, kind: ReportKind, params: ReportParams) -> Mapping[str, JsonValue]:
    """The sealed report (`workbench.services.reports.ReportService`): from the dataset when one is
    named, once it is trusted (its partials computed on the cluster), else from the ledger; the
    ledger is opened for a ledger read and for a cohort's opt-ins."""
    from workbench.services.root import compose, signing_setup

    settings = load_settings()
    ledger = open_ledger(settings) if kind.cohort or not args.dataset else None
    try:
        reports = compose(signing_setup(settings), ledger).reports
        with cluster_client(args.cluster) as client:
            if not args.dataset:
                return reports.live(kind, args.scope, args.policy, params)
            _digest_store()
            return reports.from_dataset(kind, args.dataset, args.policy, params, scope=args.scope,
                                        trust=_trust(args, ledger), cluster=client)
    finally:
        if ledger is not None:
            ledger.dispose()


def cmd_report(args: argparse.Namespace) -> int:
    """The report, printed. A refusal (bad options, a dataset that may not be read, an unreachable
    cluster: each a GateError) is one line on stderr and exit status 2 (`gate_cli.main`)."""
    kind = REPORTS[args.kind]
    params = _params(args)
    _check_scope(args, kind, params)
    report = _report(args, kind, params)
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        print(render(args.kind, report, source=args.dataset or "live ledger"))
    return 0
