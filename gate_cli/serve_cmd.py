"""`gate serve`, `gate demo` and `gate db`: the API in the foreground (migrated once, before its
workers fork), the embedded demo beside the workbench and the dispatcher, and the ledger's schema."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable

from gate.settings import Settings, variables_help
from gate_cli.context import CliError, load_settings, now, open_ledger
from gate_cli.demo_cmd import (
    add_demo_parser,
    demo_walkthrough,
    policy_as_code_tour,
    port_problem,
    seed_on_first_run,
)
from gate_cli.dispatch_cmd import start_dispatch_beside
from gate_cli.help import HelpFormatter, Subparsers
from gate_cli.keys_cmd import create_key
from gate_cli.workbench_cmd import start_beside


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


# --------------------------------------------------------------------------- parser


def add_serve_parser(sub: Subparsers) -> None:
    p = sub.add_parser("serve", formatter_class=HelpFormatter, epilog=variables_help(),
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


def add_db_parser(sub: Subparsers) -> None:
    p = sub.add_parser("db", formatter_class=HelpFormatter)
    p.add_argument("db_command", choices=["upgrade"], help="upgrade: apply the Alembic migrations (serve does too)")
    p.set_defaults(func=cmd_db)


def add_demo(sub: Subparsers) -> None:
    add_demo_parser(sub, cmd_demo, HelpFormatter)
