"""`gate sweep`: sweep one numeric threshold of a draft rule over a range, and print per threshold
the dry-run's figures with their intervals (workbench.migration.sweep, the library call the
workbench plots).

    gate sweep --rulebook-id ID --draft FILE --rule RULE --field FIELD --from A --to B [--steps N]
               [--occurrence K] [--scope S] [--dataset DIR] [--cost-model FILE] [--json]

Exit 0 with the sweep; 2 with one line on stderr for bad input (nothing is read past it).
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from gate_cli.context import open_ledger
from gate_cli.dry_run_cmd import _cost_model, _digest_store, _fail, _signing, add_allow_unsigned, trust_for
from gate_cli.help import Subparsers

if TYPE_CHECKING:  # the sweep (Polars) is imported only when the command runs
    from workbench.migration.impact import Figure
    from workbench.migration.sweep import Sweep


def add_sweep_parser(sub: Subparsers) -> None:
    p = sub.add_parser("sweep")
    p.add_argument("--rulebook-id", required=True, help="the rulebook whose history is replayed (required)")
    p.add_argument("--draft", required=True, help="the draft rulebook (JSON file) (required)")
    p.add_argument("--rule", required=True, help="the draft rule holding the comparison (required)")
    p.add_argument("--field", required=True, help="the compared fact (required)")
    p.add_argument("--occurrence", type=int, default=0,
                   help="which numeric comparison of that field in the rule, from 0 (default: 0)")
    p.add_argument("--from", dest="low", type=float, required=True, help="the lowest threshold (required)")
    p.add_argument("--to", dest="high", type=float, required=True, help="the highest threshold (required)")
    p.add_argument("--steps", type=int, default=100, help="thresholds, evenly spaced, ends included (default: 100)")
    p.add_argument("--scope", default=None, help="only this scope's decisions (default: every scope)")
    p.add_argument("--dataset", default=None, help="an exported dataset folder (default: the live ledger)")
    p.add_argument("--cost-model", metavar="FILE", default=None,
                   help="JSON {failure, review, lost_success, outcome_horizon_days} (default: as gate dry-run)")
    add_allow_unsigned(p)
    p.add_argument("--json", action="store_true", help="print the sweep as JSON")
    p.set_defaults(func=cmd_sweep)


def cmd_sweep(args: argparse.Namespace) -> int:
    from workbench.migration import DryRunError
    from workbench.migration.draft import read_draft_file
    from workbench.migration.sweep import thresholds_between
    from workbench.services.root import compose

    ledger = None
    try:
        thresholds = thresholds_between(args.low, args.high, args.steps)
        cost = _cost_model(args.cost_model)
        draft = read_draft_file(args.draft)
        settings, setup = _signing()
        _digest_store(settings)
        if args.dataset is None:
            ledger = open_ledger(settings)
        trust = trust_for(args, settings) if args.dataset else None
        # Compared with the verdicts stored when each decision was made (no baseline version).
        result = compose(setup, ledger).sweeps.sweep(draft, args.rulebook_id, (args.rule, args.field, args.occurrence),
                                                     thresholds, scope=args.scope, dataset=args.dataset, trust=trust,
                                                     cost=cost)
    except DryRunError as error:
        return _fail(error, args.json, "sweep")
    finally:
        if ledger is not None:
            ledger.dispose()
    print(json.dumps(result, indent=2) if args.json else sweep_text(result))
    return 0


def _pct(figure: Figure) -> str:
    interval = figure["interval_95"]
    from workbench.reports.numbers import rate_interval

    return "n/a" if interval is None else f"{figure['count']:>7,} ({rate_interval(interval[0], interval[1])})"


def sweep_text(result: Sweep) -> str:
    leaf = result["leaf"]
    lines = [(f"sweep of {result['rulebook_id']}: rule {leaf['rule_id']}, {leaf['field']} {leaf['operator']} t "
             f"(draft t = {leaf['draft_value']:g}) over {result['decisions_replayed']:,} decisions (as of "
             f"{result['as_of']}; intervals 95%)"),
             f"{'threshold':>12}  {'approvals':>24}  {'failures caught':>24}  {'successes lost':>24}  review load"]
    for point in result["points"]:
        review = point["review_load_change"]
        lines.append(f"{point['threshold']:>12.6g}  {_pct(point['approvals']):>24}  {_pct(point['failures_caught']):>24}  "
                     f"{_pct(point['successes_lost']):>24}  {review['count']:+,}")
    return "\n".join(lines)


