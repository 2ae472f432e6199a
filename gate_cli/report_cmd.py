"""`gate report KIND --policy ID [--scope S] [--dataset DIR] [--json]`: the policy reports of
the API on the terminal, from the live ledger (default) or from an exported Parquet dataset.

The numbers are the API's: the same loader contract, engines and envelopes
(`workbench.reports.policy`). Readable text by default; `--json` prints the sealed report
exactly as the endpoint answers it. Exit status 2 on bad input (unknown parameter values, a
dataset of another schema version), with the reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from gate_cli.help import HelpFormatter

KINDS = ("effectiveness", "confidence", "anomalies", "benchmarks")
OPTIONS = ("policy_version", "verdict", "action", "limit", "min_sample", "threshold", "max_items", "min_cohort_scopes",
           "min_cohort_decisions")
DATASET_LIMIT = 1_000_000_000


class _ReportHelp(HelpFormatter):
    """`gate report --help`: each endpoint parameter's meaning, range, default and the reports
    that take it, read from `workbench.reports.policy.PARAMS` when help is shown (so `gate`
    starts without Polars, and the help cannot drift from what the reports apply)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        if action.dest not in OPTIONS:
            return super()._get_help_string(action)
        try:
            from workbench.reports.policy import KIND_PARAMS, PARAMS
        except ImportError:  # a core-only install: no reports to run anyway
            return action.help or ""
        kinds = ", ".join(kind for kind in KINDS if action.dest in KIND_PARAMS[kind])
        text = f"{PARAMS[action.dest].describe()} Reports: {kinds}."
        if action.dest == "limit":
            text += (" With --dataset: up to 1e9, or 'all' (every decision of the selection; shown as "
                     "limit=all).")
        return text.replace("%", "%%")


def add_report_parser(sub) -> None:
    p = sub.add_parser("report", help="print a policy report (effectiveness, confidence, anomalies, benchmarks)",
                       formatter_class=_ReportHelp,
                       description="Readable text by default (rates as percentages with one decimal, scores "
                                   "with four); --json prints the sealed report exactly as the endpoint answers.")
    p.add_argument("kind", choices=KINDS)
    p.add_argument("--policy", required=True, help="policy id (the rulebook id)")
    p.add_argument("--scope", help="the scope whose decisions are reported (required for the ledger and "
                                   "benchmarks; default with --dataset: every scope)")
    p.add_argument("--dataset", help="read an exported dataset (path or URL) instead of the live ledger "
                                     "(default: the live ledger, GATE_DATABASE_URL)")
    p.add_argument("--json", action="store_true", help="print the sealed report as JSON")
    for name in OPTIONS:
        p.add_argument("--" + name.replace("_", "-"), dest=name, default=None,
                       help=f"as the endpoint's {name} query parameter")
    p.set_defaults(func=cmd_report)


def _fail(message: str) -> int:
    print(f"gate report: {message}", file=sys.stderr)
    return 2


def _digest_store() -> None:
    """Files checked against the dataset's manifest are remembered in GATE_HOME by identity."""
    from api.settings import Settings
    from workbench.dataset import integrity

    integrity.use_digest_store(integrity.digest_store_of(Settings.from_env().home))


def cmd_report(args) -> int:
    from gate.errors import GateError
    from workbench.dataset.load import DatasetError, from_dataset, from_ledger
    from workbench.reports.policy import (
        anomaly_report,
        benchmark_report,
        confidence_report,
        effectiveness_report,
        parse_params,
    )

    raw = {name: getattr(args, name) for name in OPTIONS if getattr(args, name) is not None}
    every = raw.get("limit") == "all"
    if every and not args.dataset:
        return _fail("--limit all reads a whole dataset; the ledger allows 1 to 10000")
    if every:
        del raw["limit"]
    try:
        params = parse_params(args.kind, raw, limit_high=DATASET_LIMIT if args.dataset else None)
    except GateError as error:
        return _fail(error.message)
    if every:
        params = replace(params, limit=None)
    if args.scope is None and (args.dataset is None or args.kind == "benchmarks"):
        return _fail("--scope is required (reports from the ledger and benchmarks are per scope)")
    # Confidence: policy_version names the current version; every version is evidence.
    loaded_version = None if args.kind == "confidence" else params.policy_version
    ledger = None
    try:
        if args.kind == "benchmarks" or not args.dataset:
            from gate_cli.main import _ledger, _settings

            ledger = _ledger(_settings())
        opted_in: set[str] = set()
        cohort: list[str] = []
        if args.kind == "benchmarks":
            from gate.ledger.reports import MAX_SCOPES, benchmark_opt_ins
            from workbench.reports.policy import cohort_scopes

            opted_in = benchmark_opt_ins(ledger)
            cohort = cohort_scopes(opted_in, args.scope, MAX_SCOPES)
        if args.dataset:
            _digest_store()
            frames = from_dataset(args.dataset, scopes=None if args.scope is None else [args.scope, *cohort],
                                  policy_id=args.policy, policy_version=loaded_version, limit=params.limit)
        else:
            frames = from_ledger(ledger, args.scope, args.policy, policy_version=loaded_version,
                                 limit=params.limit, cohort_scopes=cohort)
        if args.kind == "effectiveness":
            report = effectiveness_report(frames, args.policy, params)
        elif args.kind == "confidence":
            report = confidence_report(frames, args.policy, params)
        elif args.kind == "anomalies":
            report = anomaly_report(frames, args.policy, params)
        else:
            report = benchmark_report(frames, args.policy, params, own_scope=args.scope, opted_in=opted_in)
    except DatasetError as error:
        return _fail(str(error))
    finally:
        if ledger is not None:
            ledger.dispose()
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        from gate_cli.report_text import render

        print(render(args.kind, report, source=args.dataset or "live ledger"))
    return 0
