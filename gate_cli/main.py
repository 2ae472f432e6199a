"""The `gate` console script: serve, keys, db, demo, export, verify, report, scopes, release, events, holds,
subject, rulebook, dry-run, workbench, conformance, migration, checkpoint, init-policies, plan, apply.

It is composed outside the core: `gate verify` and `gate rulebook` import only `gate` (they work
offline with only the core installed); every other subcommand imports the server packages (the
ledger, the HTTP server, the workbench) inside the command that needs them, so `gate` starts
without them. The commands share their settings, ledger and clock through `gate_cli.context`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate import __version__
from gate.errors import GateError
from gate.keys.apikeys import HOLDER_REQUIRED, PERMISSIONS, new_api_key, parse_permissions, permissions_text
from gate.principals import Permissions, holder_id, parse_holder
from gate.settings import DEFAULT_PLANS, Settings, variables_help
from gate.vocabulary import INTERFACE_VERSION
from gate_cli.checkpoint_cmd import add_checkpoint_parser
from gate_cli.context import (
    OPERATOR_PERMISSIONS,
    REFUSED,
    CliError,
    load_settings,
    now,
    open_ledger,
    operator,
    prepare_home,
    print_refusal,
    refusal_text,
)
from gate_cli.contract_cmd import add_contract_parsers
from gate_cli.demo_cmd import (
    add_demo_parser,
    demo_walkthrough,
    policy_as_code_tour,
    port_problem,
    seed_on_first_run,
)
from gate_cli.dispatch_cmd import add_dispatch_parser, start_dispatch_beside
from gate_cli.dry_run_cmd import add_dry_run_parser
from gate_cli.events_cmd import add_events_parser
from gate_cli.export_cmd import add_export_parser
from gate_cli.help import HelpFormatter, Subparsers, apply_everywhere, resolve_ids
from gate_cli.holds_cmd import add_holds_parser
from gate_cli.policy_cmd import add_policy_parsers
from gate_cli.release_cmd import add_release_parser
from gate_cli.report_cmd import add_report_parser
from gate_cli.rulebook_cmd import add_rulebook_parser
from gate_cli.scopes_cmd import add_scopes_parser
from gate_cli.subject_cmd import add_subject_parser
from gate_cli.sweep_cmd import add_sweep_parser
from gate_cli.verify_cmd import add_verify_parser
from gate_cli.workbench_cmd import add_workbench_parser, start_beside

if TYPE_CHECKING:
    from gate.keys.signing import Keyring
    from gate.services.keys import KeyChange, KeyService

# The signing keys, the services and the ledger are imported by the commands that use them, never
# at start-up: `gate --help` and every command's parser load no collation table, no JSON Schema
# and no SQL toolkit (issue 68; tests/cli/test_cli_startup.py).

# Subcommands that run with the core only (no server extras, no ledger), so GATE_HOME is not
# created for them; `gate checkpoint save --scope` opens the local ledger (and GATE_HOME) itself.
CORE_ONLY_COMMANDS = ("verify", "rulebook", "checkpoint")


# --------------------------------------------------------------------------- keys


def create_key(settings: Settings, scope: str, plan: str, rate_limit: int | None, monthly_cap: int | None,
               label: str | None = None, permissions: str | None = None,
               holder: str | None = None) -> dict[str, Any]:
    """Create an API key; returns the one-time JSON (the key itself is never stored). A key that
    may act on production or governance (HOLDER_REQUIRED) names its holder (issue 52)."""
    try:
        granted = parse_permissions(permissions)
    except ValueError as exc:
        raise CliError(f"--permissions: {exc}") from None
    stated = _holder(holder, granted)
    if plan not in settings.plans:
        raise CliError(f"unknown plan {plan!r}; known plans: {', '.join(sorted(settings.plans))}")
    for name, value in (("--rate-limit", rate_limit), ("--monthly-cap", monthly_cap)):
        if value is not None and value < 1:
            raise CliError(f"{name} must be a positive integer")
    if not scope or len(scope) > 120:
        raise CliError("--scope must be 1 to 120 characters")
    key = new_api_key()
    created_at = now()
    change = key_service(settings).create(
        operator(), OPERATOR_PERMISSIONS,
        {
            "key_id": key.key_id,
            "key_hash": key.key_hash,
            "scope": scope,
            "plan": plan,
            "rate_limit": rate_limit,
            "monthly_cap": monthly_cap,
            "status": "active",
            "label": label,
            "created_at": created_at,
            "permissions": permissions_text(granted) if permissions is not None else None,
            "holder": stated,
        },
    )
    limits = settings.plans[plan]
    return {
        "api_key": key.api_key,
        "key_id": key.key_id,
        "scope": scope,
        "plan": plan,
        "rate_limit": rate_limit if rate_limit is not None else limits["rate_limit"],
        "monthly_cap": monthly_cap if monthly_cap is not None else limits["monthly_cap"],
        "created_at": created_at,
        "permissions": permissions_text(granted),
        "holder": holder_id(key.key_id, stated),
        **_change_members(change),
        "note": "store this key now: only its hash is kept" + (
            f"; it acts only once a second holder approves grant request {change.governance['seq']} "
            f"(gate keys approve --scope {scope} {change.governance['seq']}, or POST /api/keys/grants/approvals)"
            if change.pending and change.governance is not None else ""),
    }


def _change_members(change: KeyChange) -> dict[str, Any]:
    """What a key change wrote: its grant event's seq in the key chain (None: none yet), its
    governance event's seq, and whether it waits for a second holder (`pending`, `request_seq`)."""
    governance = change.governance
    return {"status": "pending" if change.pending else "active",
            "grant_seq": change.grants[0]["seq"] if change.grants else None,
            "governance_seq": governance["seq"] if governance is not None else None,
            "request_seq": governance["seq"] if change.pending and governance is not None else None}


def key_service(settings: Settings) -> KeyService:
    """The keys' service over the local ledger, signing with the receipt key, its grants governed
    through the one governed-change service, witnessed in GATE_CHECKPOINT_LOG (issue 52)."""
    from gate.services.root import key_service as build_key_service
    from gate.services.root import signing_setup

    return build_key_service(open_ledger(settings), signing_setup(settings),
                             checkpoint_log=settings.checkpoint_log)


def _holder(holder: str | None, granted: Permissions) -> str | None:
    """The holder a new key is stored with: checked; required for a key that may act on
    production or governance (its approvals and votes are counted by holder)."""
    if holder is None:
        if granted & HOLDER_REQUIRED:
            raise CliError(f"--holder is required for a key with {', '.join(sorted(granted & HOLDER_REQUIRED))} "
                             "(person:<issuer>#<subject>, service:<name> or operator:<login>)")
        return None
    try:
        return parse_holder(holder)
    except ValueError as exc:
        raise CliError(f"--holder: {exc}") from None


def cmd_keys(args: argparse.Namespace) -> int:
    settings = load_settings()
    if args.keys_command == "create":
        result = create_key(settings, args.scope, args.plan, args.rate_limit, args.monthly_cap, args.label,
                            args.permissions, args.holder)
        if args.json:
            print(json.dumps(result))
        else:
            print(f"API key (shown once): {result['api_key']}")
            print(f"key_id {result['key_id']}  scope {result['scope']}  plan {result['plan']}  "
                  f"rate {result['rate_limit']}/min  cap {result['monthly_cap']}/month  holder {result['holder']}")
            if result["status"] == "pending":
                print(f"pending: the key acts only once a second holder approves grant request {result['request_seq']} "
                      f"(gate keys approve --scope {result['scope']} {result['request_seq']}, "
                      "or POST /api/keys/grants/approvals)")
        return 0
    if args.keys_command == "list":
        rows = open_ledger(settings).list_api_keys()
        public = [{**{k: v for k, v in row.items() if k != "key_hash"},
                   "holder": holder_id(row["key_id"], row.get("holder"))} for row in rows]
        if args.json:
            print(json.dumps(public))
        else:
            for row in public:
                print(f"{row['key_id']}  {row['status']:8}  scope={row['scope']}  plan={row['plan']}  "
                      f"permissions={row.get('permissions') or 'decide'}  holder={row['holder']}")
        return 0
    if args.keys_command == "history":
        print(json.dumps(key_service(settings).history_document(args.scope), indent=2))
        return 0
    if args.keys_command in ("disable", "enable", "grant", "approve", "requests"):
        return _governed_keys(settings, args)
    if args.keys_command == "signing-init":
        path = settings.signing_key_file
        if path.exists() and not args.force:
            raise CliError(f"{path} exists; use signing-rotate, or --force to replace it")
        prepare_home(settings)
        path.parent.mkdir(parents=True, exist_ok=True)
        from gate.keys.signing import generate_keyring

        keyring = generate_keyring(path, now(), overwrite=args.force)
        print(json.dumps({"keyring": str(path), "active_key_id": _active_key_id(keyring, path)}))
        return 0
    if args.keys_command == "signing-rotate":
        if not settings.signing_key_file.exists():
            raise CliError(f"no signing keyring at {settings.signing_key_file} to rotate: "
                           "create one with `gate keys signing-init`")
        from gate.keys.signing import rotate_keyring

        keyring = rotate_keyring(settings.signing_key_file, now())
        retired = [e["key_id"] for e in keyring.registry_entries() if e["status"] == "retired"]
        print(json.dumps({"keyring": str(settings.signing_key_file),
                          "active_key_id": _active_key_id(keyring, settings.signing_key_file),
                          "retired_key_ids": retired}))
        return 0
    raise AssertionError(args.keys_command)


def _governed_keys(settings: Settings, args: argparse.Namespace) -> int:
    """`gate keys disable/enable/grant/approve/requests`: through the keys' service, as the local
    operator; a grant while the scope requires approvals waits for a second holder (issue 52)."""
    keys = key_service(settings)
    if args.keys_command == "requests":
        print(json.dumps(keys.document(args.scope), indent=2))
        return 0
    if args.keys_command == "approve":
        change = keys.approve(args.scope, operator(), OPERATOR_PERMISSIONS, args.request_seq, args.reason)
        print(json.dumps({"approved": args.request_seq, "keys": [g["api_key_id"] for g in change.grants],
                          **_change_members(change)}))
        return 0
    found = (keys.disable(args.key_id) if args.keys_command == "disable"
             else keys.enable(operator(), OPERATOR_PERMISSIONS, args.key_id) if args.keys_command == "enable"
             else keys.widen(operator(), OPERATOR_PERMISSIONS, args.key_id, _permissions(args.permissions),
                             None if args.holder is None else _holder(args.holder, frozenset())))
    if found is None:
        raise CliError(f"no API key {args.key_id}")
    if found.pending and found.governance is not None:
        print(f"{args.key_id} waits for a second holder: grant request {found.governance['seq']} "
              f"(gate keys approve --scope SCOPE {found.governance['seq']}, or POST /api/keys/grants/approvals)")
        return 0
    print(f"{args.key_id} {'disabled' if args.keys_command == 'disable' else 'active'}")
    return 0


def _permissions(text: str) -> str:
    try:
        return permissions_text(parse_permissions(text))
    except ValueError as exc:
        raise CliError(f"--permissions: {exc}") from None


def _active_key_id(keyring: Keyring, path: Path) -> str:
    """The active key's id of a keyring just written (signing-init and signing-rotate always make one)."""
    if keyring.active is None:
        raise CliError(f"the keyring written at {path} has no active key")
    return keyring.active.key_id


# --------------------------------------------------------------------------- serve / demo


def serve(settings: Settings, host: str, port: int, workers: int, threads: int | None = None,
          on_ready: Callable[[], None] | None = None) -> None:
    """Serve the API in the foreground; `on_ready()` runs once its socket is bound."""
    # Lazy: the HTTP server (Flask, gunicorn) loads only for `gate serve` and `gate demo`; the app
    # is the API with the workbench's report engines (gate_cli.served_app, issue 66, item 4).
    from api.serving import DEFAULT_THREADS, GateServer
    from gate_cli.served_app import create_app

    if workers > 1 and not settings.redis_url:
        # SECURITY: per-process rate windows would multiply the limit by the worker count.
        raise CliError("more than one worker needs GATE_REDIS_URL for shared rate limits")
    open_ledger(settings).dispose()  # migrate once, before workers fork
    for line in startup_notes(settings):
        print(line, file=sys.stderr, flush=True)
    # The workers do not migrate again: a worker restarted while the ledger is unreachable then
    # boots and answers 503 until it is back, where its migration failed and gunicorn, seeing a
    # worker fail to boot, shut the whole server down.
    served = dataclasses.replace(settings, auto_migrate=False)
    GateServer(served, host, port, workers, threads or DEFAULT_THREADS, on_ready=on_ready,
               app_factory=create_app).run()


def startup_notes(settings: Settings) -> list[str]:
    """What `serve` says before it listens: a missing or broken signing key and the command that fixes it."""
    from gate.services.root import signing_setup

    setup = signing_setup(settings)
    if setup.receipt_signer() is not None:
        return []
    problem = setup.problem or "no receipt signing key is configured"
    if not setup.required:
        return [f"gate serve: WARNING: {problem}; GATE_REQUIRE_SIGNING=false, so records are stored UNSIGNED.",
                f"gate serve: to sign them: {setup.fix or 'run `gate keys signing-init`'}"]
    return [f"gate serve: {problem}.",
            ("gate serve: until a signing key exists every POST /api/decide answers 503 and stores nothing "
            "(fail closed); /api/decision/status names the problem and the fix."),
            f"gate serve: fix: {setup.fix}"]


def cmd_serve(args: argparse.Namespace) -> int:
    settings = load_settings()
    if args.no_dispatch:  # `gate dispatch` delivers, beside (docs/operating.md, "Deployment")
        settings = dataclasses.replace(settings, events_dispatch=False)
    serve(settings, args.host, args.port, args.workers, args.threads)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Embedded default: SQLite file, generated Ed25519 keyring, a demo key printed once.

    The API's and the workbench's ports are tried first: a busy one stops the demo with one line
    naming it (and how to pick another) before anything is seeded. The walkthrough is printed
    once the API's socket is bound, the workbench's address once the workbench listens."""
    problem = port_problem(args.host, args.port, args.workbench_port)
    if problem:
        raise CliError(problem)
    settings = load_settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    if not settings.signing_key_file.exists():
        from gate.keys.signing import generate_keyring

        generate_keyring(settings.signing_key_file, now())
    seed_on_first_run(settings, args.seed_decisions)
    retired = retire_demo_keys(settings)
    # The growth plan: the walkthrough, the four policy reports and a few packets fit its cost
    # window (360 units a minute); a starter key (60) answered 429 to the reports after step 7.
    key = create_key(settings, DEMO_SCOPE, "growth", None, None, DEMO_KEY_LABEL, "decide,publish,release,approve,admin",
                     DEMO_KEY_HOLDER)
    banner = [f"Decision Gate demo (embedded SQLite ledger at {settings.database_url})"]
    if retired:
        banner.append(f"(disabled {retired} demo key(s) from earlier runs: one demo key is active at a time)")
    banner.append(demo_walkthrough(f"http://{args.host}:{args.port}", key["api_key"]))
    banner.append(policy_as_code_tour(settings.home))
    if args.workbench_port:
        start_beside(args.host, args.workbench_port)
    # The deployment's shape (docs/operating.md): deliveries, notices and sweeps in `gate dispatch`.
    start_dispatch_beside()
    settings = dataclasses.replace(settings, events_dispatch=False)
    serve(settings, args.host, args.port, 1, on_ready=lambda: print("\n".join(banner), flush=True))
    return 0


DEMO_SCOPE = "demo"
DEMO_KEY_LABEL = "demo key"
DEMO_KEY_HOLDER = "service:demo"


def retire_demo_keys(settings: Settings) -> int:
    """Disable the active demo keys of earlier `gate demo` runs (their keys were shown once and are
    gone); returns how many. Keys an operator created, even in scope demo, are left alone."""
    ledger = open_ledger(settings)
    try:
        earlier = [row for row in ledger.list_api_keys() if row["scope"] == DEMO_SCOPE
                   and row.get("label") == DEMO_KEY_LABEL and row["status"] == "active"]
        for row in earlier:
            ledger.set_api_key_status(row["key_id"], "disabled", now())
        return len(earlier)
    finally:
        ledger.dispose()


def cmd_db(args: argparse.Namespace) -> int:
    settings = load_settings()
    open_ledger(settings).dispose()
    print(f"ledger at {settings.database_url.split('@')[-1]} is at the newest revision")
    return 0


# --------------------------------------------------------------------------- parser


def _plans_help() -> str:
    plans = ", ".join(f"{name} ({limits['rate_limit']:,}/min, {limits['monthly_cap']:,}/month)"
                      for name, limits in DEFAULT_PLANS.items())
    return f"plan: {plans}, or one defined in GATE_PLANS"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gate", formatter_class=HelpFormatter,
        description="Decision Gate command line. New here? `gate demo` serves a working gate with a demo key; "
                    "the API reference is then at http://127.0.0.1:8080/docs.")
    parser.add_argument("--version", action="version",
                        version=f"gate {__version__} (decision-gate; interface {INTERFACE_VERSION})")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_serve_parser(sub)
    add_demo_parser(sub, cmd_demo, HelpFormatter)
    _add_db_parser(sub)
    _add_keys_parser(sub)
    # Each other subcommand family lives in its own module and adds its own parser.
    for add in (add_export_parser, add_verify_parser, add_report_parser, add_scopes_parser, add_release_parser,
                add_events_parser, add_dispatch_parser, add_holds_parser,
                add_rulebook_parser, add_dry_run_parser, add_sweep_parser, add_workbench_parser, add_contract_parsers,
                add_checkpoint_parser, add_policy_parsers, add_subject_parser):
        add(sub)
    apply_everywhere(parser)
    return parser


def _add_serve_parser(sub: Subparsers) -> None:
    p = sub.add_parser("serve", help="run the API (configuration from GATE_* environment variables)",
                       formatter_class=HelpFormatter, epilog=variables_help(),
                       description="Serve the API with gunicorn (N workers x T threads). Migrates the ledger "
                                   "first; says at start-up what is missing (a signing key) and how to fix it.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (loopback; see README 'Production topology')")
    p.add_argument("--port", type=int, default=8080, help="TCP port")
    p.add_argument("--workers", type=int, default=1, help="worker processes; more than one needs GATE_REDIS_URL")
    p.add_argument("--threads", type=int, default=8, help="request threads per worker process")
    p.add_argument("--no-dispatch", action="store_true",
                   help="no deliveries, notices, retention or sweeps in the workers: `gate dispatch` runs them "
                        "beside (default: each worker runs them too, GATE_EVENTS_DISPATCH)")
    p.set_defaults(func=cmd_serve)


def _add_db_parser(sub: Subparsers) -> None:
    p = sub.add_parser("db", help="ledger schema", formatter_class=HelpFormatter)
    p.add_argument("db_command", choices=["upgrade"], help="upgrade: apply the Alembic migrations (serve does too)")
    p.set_defaults(func=cmd_db)


def _holder_rights() -> str:
    """The permissions that need a stated holder, in the vocabulary's order: "release, … or admin"."""
    names = [name for name in PERMISSIONS if name in HOLDER_REQUIRED]
    return f"{', '.join(names[:-1])} or {names[-1]}"


def _add_keys_parser(sub: Subparsers) -> None:
    keys = sub.add_parser("keys", help="API keys and signing keys", formatter_class=HelpFormatter)
    ksub = keys.add_subparsers(dest="keys_command", required=True, metavar="KEYS_COMMAND")
    k = ksub.add_parser("create", help="create an API key (printed once)", formatter_class=HelpFormatter)
    k.add_argument("--scope", required=True, help="the tenant the key acts for (1-120 characters)")
    k.add_argument("--plan", default="starter", help=_plans_help())
    k.add_argument("--rate-limit", type=int, default=None, help="decides per minute (default: the plan's)")
    k.add_argument("--monthly-cap", type=int, default=None, help="records per month (default: the plan's)")
    k.add_argument("--permissions", default=None,
                   help=f"comma-separated rights among {','.join(PERMISSIONS)} (default: decide only, today's "
                        "rights; admin changes the release policy, resolve votes on held actions; "
                        "docs/releases.md, docs/holds.md)")
    k.add_argument("--holder", default=None,
                   help="who the key belongs to: person:<issuer>#<subject>, service:<name> or operator:<login>; "
                        f"required with {_holder_rights()} (approvals count holders, not keys); "
                        "default for other keys: the key is its own holder, key:<key_id> (docs/releases.md)")
    k.add_argument("--label", default=None, help="a note for `gate keys list` (default: none)")
    k.add_argument("--json", action="store_true", help="print the one-time result as JSON")
    k = ksub.add_parser("list", help="list API keys (never the keys themselves)", formatter_class=HelpFormatter)
    k.add_argument("--json", action="store_true", help="print JSON")
    for name in ("disable", "enable"):
        k = ksub.add_parser(name, help=f"{name} an API key" + (
            f" (one with {_holder_rights()}: a grant a second holder approves while the scope requires "
            "approvals)" if name == "enable" else ""), formatter_class=HelpFormatter)
        k.add_argument("key_id", help="key_… id from `gate keys list`")
    k = ksub.add_parser("grant", help=f"add rights to an active API key (with {_holder_rights()}: a grant a second "
                        "holder approves while the scope requires approvals)", formatter_class=HelpFormatter)
    k.add_argument("key_id", help="key_… id from `gate keys list`")
    k.add_argument("--permissions", required=True, help=f"the rights to add, among {','.join(PERMISSIONS)}")
    k.add_argument("--holder", default=None, help="the key's holder (as for create; required when the key states none and gains a right that needs one; "
                        "default: the holder it states)")
    k = ksub.add_parser("requests", help="the scope's keys that act on production and the grant requests waiting "
                        "for a second holder (JSON)", formatter_class=HelpFormatter)
    k.add_argument("--scope", required=True, help="the tenant whose keys to show")
    k = ksub.add_parser("approve", help="approve another holder's pending key grant request (as the operator)",
                        formatter_class=HelpFormatter)
    k.add_argument("--scope", required=True, help="the tenant of the request")
    k.add_argument("request_seq", type=int, help="the request's seq (`gate keys requests`)")
    k.add_argument("--reason", default=None, help="why (recorded in the signed governance event; default: none)")
    k = ksub.add_parser("history", help=f"the scope's signed key chain: every key created or enabled with "
                        f"{_holder_rights()}, by whom (JSON for `gate verify`)", formatter_class=HelpFormatter)
    k.add_argument("--scope", required=True, help="the tenant whose key chain to print")
    k = ksub.add_parser("signing-init", help="generate the Ed25519 signing keyring", formatter_class=HelpFormatter,
                        description="Write a new keyring at GATE_SIGNING_KEY_FILE; a running server picks it up "
                                    "within GATE_SIGNING_KEY_CHECK_MS, no restart.")
    k.add_argument("--force", action="store_true",
                   help="replace an existing keyring (records signed by its keys no longer verify here)")
    ksub.add_parser("signing-rotate", help="new active signing key; the old one stays as retired",
                    formatter_class=HelpFormatter,
                    description="Rotate: a new active key signs from now on (running servers switch within "
                                "GATE_SIGNING_KEY_CHECK_MS); retired keys keep verifying older records.")
    keys.set_defaults(func=cmd_keys)


def main(argv: list[str] | None = None) -> int:
    """Run one command. Expected conditions end in one `gate: …` line and a non-zero status,
    never a traceback; a reader that closes the pipe early (`gate verify … | head`) ends quietly."""
    parser = build_parser()
    args = parser.parse_args(argv)
    resolve_ids(parser, args)  # an id given by its deprecated option (`--id`) as by its argument
    try:
        if args.command not in CORE_ONLY_COMMANDS:
            prepare_home(load_settings())
        status = args.func(args) or 0
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at interpreter exit
        return status
    except BrokenPipeError:
        # The reader went away; say nothing more (stdout is gone) and exit as `head` expects.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command ended by a closed pipe
    except KeyboardInterrupt:
        return 130
    except GateError as error:
        return print_refusal(args.command, error)
    except Exception as exc:
        message = expected_failure(exc)
        if message is None:
            raise
        print(f"gate {args.command}: {message}", file=sys.stderr)
        return REFUSED


def expected_failure(exc: BaseException) -> str | None:
    """The one-line explanation of a condition a user can meet and fix, or None (a bug: re-raise).
    Every refusal is a GateError (CliError and SettingsError among them), printed as `print_refusal` does."""
    if isinstance(exc, GateError):
        return refusal_text(exc)
    sqlalchemy_exc = sys.modules.get("sqlalchemy.exc")
    if sqlalchemy_exc is not None and isinstance(exc, sqlalchemy_exc.OperationalError):
        reason = str(getattr(exc, "orig", exc)).splitlines()[0]
        return (f"LEDGER_UNAVAILABLE: the ledger cannot be opened ({reason}); check GATE_DATABASE_URL "
                "and that the database answers")
    if isinstance(exc, PermissionError):
        return f"CLI_REFUSED: permission denied: {exc.filename}"
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
