"""The `gate` console script: serve, keys, db, demo, export, verify, report, scopes, rulebook, dry-run, workbench,
conformance, migration.

It is composed outside the core: `gate verify` and `gate rulebook` import only `gate` (they work
offline with only the core installed); every other subcommand imports the server packages lazily.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _settings():
    from api.settings import Settings

    return Settings.from_env()


def _ledger(settings):
    from gate.ledger import Ledger

    ledger = Ledger(settings.database_url)
    ledger.upgrade()
    return ledger


def _now():
    from gate.clock import SystemClock, iso_ms

    return iso_ms(SystemClock().now())


# --------------------------------------------------------------------------- keys


def create_key(settings, scope: str, plan: str, rate_limit: int | None, monthly_cap: int | None,
               label: str | None = None) -> dict:
    """Create an API key; returns the one-time JSON (the key itself is never stored)."""
    from gate.apikeys import new_api_key

    if plan not in settings.plans:
        raise SystemExit(f"gate: unknown plan {plan!r}; known plans: {', '.join(sorted(settings.plans))}")
    for name, value in (("--rate-limit", rate_limit), ("--monthly-cap", monthly_cap)):
        if value is not None and value < 1:
            raise SystemExit(f"gate: {name} must be a positive integer")
    if not scope or len(scope) > 120:
        raise SystemExit("gate: --scope must be 1 to 120 characters")
    key = new_api_key()
    created_at = _now()
    _ledger(settings).insert_api_key(
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
        }
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
        "note": "store this key now: only its hash is kept",
    }


def cmd_keys(args) -> int:
    settings = _settings()
    if args.keys_command == "create":
        result = create_key(settings, args.scope, args.plan, args.rate_limit, args.monthly_cap, args.label)
        if args.json:
            print(json.dumps(result))
        else:
            print(f"API key (shown once): {result['api_key']}")
            print(f"key_id {result['key_id']}  scope {result['scope']}  plan {result['plan']}  "
                  f"rate {result['rate_limit']}/min  cap {result['monthly_cap']}/month")
        return 0
    if args.keys_command == "list":
        rows = _ledger(settings).list_api_keys()
        public = [{k: v for k, v in row.items() if k != "key_hash"} for row in rows]
        if args.json:
            print(json.dumps(public))
        else:
            for row in public:
                print(f"{row['key_id']}  {row['status']:8}  scope={row['scope']}  plan={row['plan']}")
        return 0
    if args.keys_command in ("disable", "enable"):
        status = "disabled" if args.keys_command == "disable" else "active"
        if not _ledger(settings).set_api_key_status(args.key_id, status, _now()):
            print(f"gate: no API key {args.key_id}", file=sys.stderr)
            return 1
        print(f"{args.key_id} {status}")
        return 0
    if args.keys_command == "signing-init":
        from gate.signing import generate_keyring

        path = settings.signing_key_file
        if path.exists() and not args.force:
            print(f"gate: {path} exists; use signing-rotate, or --force to replace it", file=sys.stderr)
            return 1
        path.parent.mkdir(parents=True, exist_ok=True)
        keyring = generate_keyring(path, _now(), overwrite=args.force)
        print(json.dumps({"keyring": str(path), "active_key_id": keyring.active.key_id}))
        return 0
    if args.keys_command == "signing-rotate":
        from gate.signing import rotate_keyring

        keyring = rotate_keyring(settings.signing_key_file, _now())
        retired = [e["key_id"] for e in keyring.registry_entries() if e["status"] == "retired"]
        print(json.dumps({"keyring": str(settings.signing_key_file),
                          "active_key_id": keyring.active.key_id, "retired_key_ids": retired}))
        return 0
    raise AssertionError(args.keys_command)


# --------------------------------------------------------------------------- serve / demo


def serve(settings, host: str, port: int, workers: int, threads: int | None = None) -> None:
    from api.serving import DEFAULT_THREADS, GateServer

    if workers > 1 and not settings.redis_url:
        # SECURITY: per-process rate windows would multiply the limit by the worker count.
        raise SystemExit("gate: more than one worker needs GATE_REDIS_URL for shared rate limits")
    _ledger(settings).dispose()  # migrate once, before workers fork
    GateServer(settings, host, port, workers, threads or DEFAULT_THREADS).run()


def cmd_serve(args) -> int:
    serve(_settings(), args.host, args.port, args.workers, args.threads)
    return 0


def cmd_demo(args) -> int:
    """Embedded default: SQLite file, generated Ed25519 keyring, a demo key printed once."""
    from gate.signing import generate_keyring

    from gate_cli.demo_cmd import seed_on_first_run

    settings = _settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    if not settings.signing_key_file.exists():
        generate_keyring(settings.signing_key_file, _now())
    seed_on_first_run(settings, args.seed_decisions)
    key = create_key(settings, "demo", "starter", None, None, "demo key")
    request_file = Path(__file__).resolve().parent.parent / "data" / "requests" / "pricing-exception.json"
    base = f"http://{args.host}:{args.port}"
    print("Decision Gate demo (embedded SQLite ledger at", settings.database_url + ")")
    print(f"Demo API key for scope 'demo' (shown once, only its hash is stored):\n  {key['api_key']}\n")
    print("Get a signed Decision Record:")
    print(f"  curl -s {base}/api/decide -H 'x-api-key: {key['api_key']}' "
          f"-H 'content-type: application/json' --data @{request_file} > record.json\n")
    print("Verify it (public endpoint, no key):")
    print(f"  curl -s {base}/api/decision/verify -H 'content-type: application/json' "
          "--data \"{\\\"record\\\": $(cat record.json)}\"\n", flush=True)
    if args.workbench_port:
        from gate_cli.workbench_cmd import start_beside

        start_beside(args.host, args.workbench_port)
    serve(settings, args.host, args.port, 1)
    return 0


def cmd_db(args) -> int:
    settings = _settings()
    _ledger(settings).dispose()
    print(f"ledger at {settings.database_url.split('@')[-1]} is at the newest revision")
    return 0


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gate", description="Decision Gate command line")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="run the API (configuration from GATE_* environment variables)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--threads", type=int, default=None,
                   help="request threads per worker process (default 8); see README 'Production topology'")
    p.set_defaults(func=cmd_serve)

    from gate_cli.demo_cmd import add_demo_parser

    add_demo_parser(sub, cmd_demo)

    p = sub.add_parser("db", help="ledger schema")
    p.add_argument("db_command", choices=["upgrade"])
    p.set_defaults(func=cmd_db)

    keys = sub.add_parser("keys", help="API keys and signing keys")
    ksub = keys.add_subparsers(dest="keys_command", required=True)
    k = ksub.add_parser("create", help="create an API key (printed once)")
    k.add_argument("--scope", required=True)
    k.add_argument("--plan", default="starter")
    k.add_argument("--rate-limit", type=int, default=None, help="decides per minute (overrides the plan)")
    k.add_argument("--monthly-cap", type=int, default=None, help="records per month (overrides the plan)")
    k.add_argument("--label", default=None)
    k.add_argument("--json", action="store_true")
    k = ksub.add_parser("list", help="list API keys (never the keys themselves)")
    k.add_argument("--json", action="store_true")
    for name in ("disable", "enable"):
        k = ksub.add_parser(name, help=f"{name} an API key")
        k.add_argument("key_id")
    k = ksub.add_parser("signing-init", help="generate the Ed25519 signing keyring")
    k.add_argument("--force", action="store_true")
    ksub.add_parser("signing-rotate", help="new active signing key; the old one stays as retired")
    keys.set_defaults(func=cmd_keys)

    # Each subcommand family lives in its own module and adds its own parser (imported here so
    # `gate verify` and `gate rulebook` stay usable with only the core installed).
    from gate_cli.contract_cmd import add_contract_parsers
    from gate_cli.dry_run_cmd import add_dry_run_parser
    from gate_cli.export_cmd import add_export_parser
    from gate_cli.report_cmd import add_report_parser
    from gate_cli.rulebook_cmd import add_rulebook_parser
    from gate_cli.scopes_cmd import add_scopes_parser
    from gate_cli.verify_cmd import add_verify_parser
    from gate_cli.workbench_cmd import add_workbench_parser

    for add in (add_export_parser, add_verify_parser, add_report_parser, add_scopes_parser,
                add_rulebook_parser, add_dry_run_parser, add_workbench_parser, add_contract_parsers):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args) or 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
