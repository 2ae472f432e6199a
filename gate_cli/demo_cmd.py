"""`gate demo` (serve the embedded demo) and `gate demo seed` (write the demo ledger).

`gate demo synth --out DIR --decisions N` writes the same scenario straight into a synthetic
Parquet dataset (benchmarks). `gate demo seed [--decisions N] [--seed S]` writes the deterministic demo scenario
(`workbench.demo`) into the configured ledger through the real services and reports progress
on a terminal. `gate demo` seeds the default size on its first run only (an empty ledger), so
a newcomer's first reports have history behind them; later runs start at once.
"""

from __future__ import annotations

import sys


def _signing(settings):
    from gate.clock import SystemClock, iso_ms
    from gate.keyconfig import SigningSetup
    from gate.signing import generate_keyring

    settings.home.mkdir(parents=True, exist_ok=True)
    if not settings.signing_key_file.exists():
        generate_keyring(settings.signing_key_file, iso_ms(SystemClock().now()))
    return SigningSetup.load(settings.signing_key_file, settings.hmac_secret, settings.hmac_key_id,
                             settings.require_signing)


def seed(settings, decisions: int, seed_value: int):
    """Seed the settings' ledger; prints progress (TTY) and a summary. Raises SeedError."""
    from gate_cli.progress import ProgressBar
    from workbench.demo.seed import seed_ledger_at

    result = seed_ledger_at(settings.database_url, _signing(settings), decisions=decisions, seed=seed_value,
                            progress=ProgressBar(label="seed", unit="writes"))
    print(f"seeded {result.decisions:,} decisions and {result.receipts:,} receipts in "
          f"{len(result.scopes)} scopes ({', '.join(result.scopes)}) in {result.seconds:.1f} s", flush=True)
    return result


def seed_on_first_run(settings, decisions: int) -> bool:
    """Seed the demo ledger (`decisions`, 0 = never) when the ledger holds no decision yet;
    True if it did."""
    from gate.ledger import Ledger, stream
    from workbench.demo import DEFAULT_SEED

    if decisions <= 0:
        return False

    ledger = Ledger(settings.database_url)
    try:
        ledger.upgrade()
        if stream.scopes(ledger):
            return False
    finally:
        ledger.dispose()
    print(f"first run: seeding the demo ledger ({decisions:,} decisions over six months, "
          "through the real decide and lifecycle services)", flush=True)
    seed(settings, decisions, DEFAULT_SEED)
    return True


def cmd_demo_seed(args) -> int:
    from api.settings import Settings
    from gate.errors import LedgerUnavailable
    from workbench.demo.seed import SeedError

    try:
        seed(Settings.from_env(), args.decisions, args.seed)
    except SeedError as exc:
        print(f"gate demo seed: {exc}", file=sys.stderr)
        return 2
    except LedgerUnavailable as exc:
        print(f"gate demo seed: the ledger cannot be written: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_demo_synth(args) -> int:
    import time

    from gate_cli.progress import ProgressBar
    from workbench.dataset import DatasetError
    from workbench.synth import synthesize

    started = time.monotonic()
    try:
        manifest = synthesize(args.out, decisions=args.decisions, seed=args.seed, chunk=args.chunk,
                              progress=ProgressBar(label="synth", unit="decisions"))
    except DatasetError as exc:
        print(f"gate demo synth: {exc}", file=sys.stderr)
        return 2
    rows = ", ".join(f"{name} {table['rows']:,}" for name, table in manifest["tables"].items())
    print(f"synthetic dataset at {args.out}: {rows} in {time.monotonic() - started:.1f} s")
    return 0


def add_demo_parser(sub, serve_demo) -> None:
    from workbench.demo import DEFAULT_DECISIONS, DEFAULT_SEED

    p = sub.add_parser("demo", help="set up the embedded default with demo data and serve it",
                       description="Serve the embedded demo (seeding the demo ledger on the first run), "
                                   "or `gate demo seed` to write the demo ledger only.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--seed-decisions", type=int, default=DEFAULT_DECISIONS,
                   help=f"decisions to seed on the first run, into an empty ledger (default {DEFAULT_DECISIONS:,}; 0: none)")
    p.add_argument("--workbench-port", type=int, default=5006,
                   help="port of the policy workbench started beside the API (default 5006; 0: none)")
    p.set_defaults(func=serve_demo)
    demo_sub = p.add_subparsers(dest="demo_command")
    s = demo_sub.add_parser("seed", help="write the deterministic demo ledger through the real services")
    s.add_argument("--decisions", type=int, default=DEFAULT_DECISIONS,
                   help=f"decisions to write (default {DEFAULT_DECISIONS:,}; receipts come on top)")
    s.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    s.set_defaults(func=cmd_demo_seed)
    s = demo_sub.add_parser("synth", help="generate a synthetic benchmark dataset in the export's schema",
                            description="Draw the demo scenario straight into a Parquet dataset (no ledger, "
                                        "nothing signed; the manifest says synthetic: true).")
    s.add_argument("--out", required=True, metavar="DIR", help="an empty or new location (path or URL)")
    s.add_argument("--decisions", type=int, required=True)
    s.add_argument("--seed", type=int, default=DEFAULT_SEED)
    s.add_argument("--chunk", type=int, default=100_000, help="decisions per generation chunk (bounds memory)")
    s.set_defaults(func=cmd_demo_synth)
