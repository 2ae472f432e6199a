"""`gate scopes benchmarks --scope S --opt-in|--opt-out|--status`: the operator's per-scope
setting for anonymized cross-customer benchmarks (revocable; a scope never set is opted out)."""

from __future__ import annotations

import argparse
import json

from gate_cli.context import CliError, load_settings, now, open_ledger
from gate_cli.help import Subparsers


def add_scopes_parser(sub: Subparsers) -> None:
    scopes = sub.add_parser("scopes")
    ssub = scopes.add_subparsers(dest="scopes_command", required=True)
    b = ssub.add_parser("benchmarks", help="opt a scope in to or out of anonymized benchmarks")
    b.add_argument("--scope", required=True, help="the scope (1 to 120 characters)")
    choice = b.add_mutually_exclusive_group(required=True)
    choice.add_argument("--opt-in", dest="action", action="store_const", const="opt-in",
                        help="include the scope (one of --opt-in, --opt-out, --status is required)")
    choice.add_argument("--opt-out", dest="action", action="store_const", const="opt-out",
                        help="exclude it again, revoking an opt-in (or --opt-in, --status: one is required)")
    choice.add_argument("--status", dest="action", action="store_const", const="status",
                        help="show the setting (or --opt-in, --opt-out: one is required)")
    b.add_argument("--json", action="store_true", help="print the setting as JSON")
    scopes.set_defaults(func=cmd_scopes)


def cmd_scopes(args: argparse.Namespace) -> int:
    # Lazy: the ledger brings SQLAlchemy, which `gate --version` does without.
    from gate.ledger.reports import benchmark_setting, set_benchmark_opt_in

    if not args.scope or len(args.scope) > 120:
        raise CliError("--scope must be 1 to 120 characters")
    ledger = open_ledger(load_settings())
    try:
        if args.action == "status":
            setting = benchmark_setting(ledger, args.scope) or {"scope": args.scope, "opted_in": False,
                                                                 "updated_at": None}
        else:
            setting = set_benchmark_opt_in(ledger, args.scope, args.action == "opt-in", now())
    finally:
        ledger.dispose()
    if args.json:
        print(json.dumps(setting))
    else:
        state = "opted in to" if setting["opted_in"] else "not opted in to"
        since = f" (since {setting['updated_at']})" if setting["updated_at"] else ""
        print(f"scope {setting['scope']} is {state} anonymized benchmarks{since}")
    return 0
