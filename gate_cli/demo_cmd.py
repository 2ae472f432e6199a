"""`gate demo` (serve the embedded demo) and `gate demo seed` (write the demo ledger).

`gate demo synth --out DIR --decisions N` writes the same scenario straight into a synthetic
Parquet dataset (benchmarks). `gate demo seed [--decisions N] [--seed S]` writes the deterministic demo scenario
(`workbench.demo`) into the configured ledger through the real services and reports progress
on a terminal. `gate demo` seeds the default size on its first run only (an empty ledger), so
a newcomer's first reports have history behind them; later runs start at once.
"""

from __future__ import annotations

import argparse
import errno
import shlex
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.clock import SystemClock, iso_ms
from gate.resources import data_path
from gate.settings import Settings
from gate_cli.help import Subparsers
from gate_cli.progress import ProgressBar
from workbench.demo import DEFAULT_DECISIONS, DEFAULT_SEED

if TYPE_CHECKING:
    from gate.keys.config import SigningSetup
    from workbench.demo.seed import SeedResult


def _signing(settings: Settings) -> SigningSetup:
    from gate.keys.signing import generate_keyring
    from gate.services.root import signing_setup

    settings.home.mkdir(parents=True, exist_ok=True)
    if not settings.signing_key_file.exists():
        generate_keyring(settings.signing_key_file, iso_ms(SystemClock().now()))
    return signing_setup(settings)


def seed(settings: Settings, decisions: int, seed_value: int) -> SeedResult:
    """Seed the settings' ledger; prints progress (TTY) and a summary. Raises SeedError."""
    # Lazy (here and below): the seeder and the ledger bring SQLAlchemy, the synthesiser Polars.
    from workbench.demo.seed import seed_ledger_at

    result = seed_ledger_at(settings.database_url, _signing(settings), decisions=decisions, seed=seed_value,
                            progress=ProgressBar(label="seed", unit="writes"))
    print(f"seeded {result.decisions:,} decisions and {result.receipts:,} receipts in "
          f"{len(result.scopes)} scopes ({', '.join(result.scopes)}) in {result.seconds:.1f} s", flush=True)
    return result


def seed_on_first_run(settings: Settings, decisions: int) -> bool:
    """Seed the demo ledger (`decisions`, 0 = never) when the ledger holds no decision yet;
    True if it did."""
    from gate.ledger import stream
    from gate.services.root import ledger_of

    if decisions <= 0:
        return False

    ledger = ledger_of(settings)
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


def cmd_demo_seed(args: argparse.Namespace) -> int:

    seed(Settings.from_env(), args.decisions, args.seed)  # SeedError, LedgerUnavailable: refusals
    return 0


def cmd_demo_synth(args: argparse.Namespace) -> int:
    from workbench.dataset.synth import synthesize

    started = time.monotonic()
    manifest = synthesize(args.out, decisions=args.decisions, seed=args.seed, chunk=args.chunk,
                          progress=ProgressBar(label="synth", unit="decisions"))  # DatasetError: a refusal
    rows = ", ".join(f"{name} {table['rows']:,}" for name, table in manifest["tables"].items())
    print(f"synthetic dataset at {args.out}: {rows} in {time.monotonic() - started:.1f} s")
    return 0


# How to pick another port, per server of the demo (scripts/demo reads PORT and WORKBENCH_PORT).
PORT_FIXES = {
    "API": "pick another with PORT=N scripts/demo, or gate demo --port N",
    "policy workbench": "pick another with WORKBENCH_PORT=N scripts/demo, or gate demo --workbench-port N "
                        "(0: the API alone)",
}


def _bind_problem(host: str, port: int) -> str | None:
    """None when every address of `host` can be bound on `port` now (as the server will bind
    it, with SO_REUSEADDR: a listener there refuses it, a closed connection's TIME_WAIT does
    not), else why not."""
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot be served: host {host!r} does not resolve ({exc.strerror})"
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as exc:
                return "is busy" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror})"
    return None


def port_problem(host: str, api_port: int, workbench_port: int) -> str | None:
    """One line naming the first port the demo cannot serve (busy, out of range, the same for
    both servers), what wanted it and how to pick another; None when both can be bound."""
    wanted = [("API", api_port, 1)] + ([("policy workbench", workbench_port, 0)] if workbench_port else [])
    for name, port, low in wanted:
        if not low <= port <= 65535:
            return f"port {port} of the {name} is out of range ({low} to 65535); {PORT_FIXES[name]}"
    if workbench_port == api_port:
        return (f"port {api_port} is wanted by both the API and the policy workbench; "
                f"{PORT_FIXES['policy workbench']}")
    for name, port, _ in wanted:
        problem = _bind_problem(host, port)
        if problem:
            return f"port {port} on {host} {problem} (wanted by the {name}); {PORT_FIXES[name]}"
    return None


REQUESTS_DIR = data_path("requests")
VERDICT_SAMPLES = ("verdict-yes", "verdict-no", "verdict-review", "verdict-needs-input")


def demo_walkthrough(base: str, api_key: str) -> str:
    """The demo's copy-paste tour, in order: decide, verify, execution receipt, outcome, packet
    export and its offline verification, the audit chain. Every command runs as printed in a POSIX
    shell, from any folder (tests/cli/test_operator_cli.py runs them against a live demo)."""
    key = f"-H 'x-api-key: {api_key}'"
    json_type = "-H 'content-type: application/json'"
    gate = Path(sys.executable).parent / "gate"
    read_record = ("eval \"$(python3 -c 'import json; r = json.load(open(\"record.json\")); "
                   "print(\"ID=%s RH=%s RC=%s CHAIN=%s\" % (r[\"decision_id\"], r[\"record_hash\"], "
                   "r[\"receipt_hash\"], r[\"audit_chain\"][\"chain_id\"]))')\"")
    execution = ('{"execution_status": "executed", "action_taken": "apply_discount", "target_system": "billing", '
                 '"target_object_id": "sub_2001", "decision_record_hash": "\'"$RH"\'", '
                 '"decision_receipt_hash": "\'"$RC"\'"}')
    outcome = '{"outcome_status": "succeeded", "action_executed": true, "observed_metrics": {"revenue_delta": 120.5}}'
    others = ", ".join(f"{name}.json" for name in VERDICT_SAMPLES[1:])
    return "\n".join([
        f"Demo API key for scope 'demo' (shown once, only its hash is stored):\n  {api_key}",
        "",
        "1. Get a signed Decision Record (this request gives verdict yes):",
        (f"  curl -s {base}/api/decide {key} {json_type} -H 'x-idempotency-key: demo-1' "
        f"--data @{REQUESTS_DIR / 'verdict-yes.json'} > record.json"),
        f"   Requests that give the other verdicts (no, review, needs input): {others} in {REQUESTS_DIR}",
        "",
        "2. Verify it (public endpoint, no key):",
        f"  curl -s {base}/api/decision/verify {json_type} --data \"{{\\\"record\\\": $(cat record.json)}}\"",
        "",
        "3. Read the record's id, hashes and audit chain into shell variables:",
        f"  {read_record}",
        "",
        "4. Record that the action ran: an execution receipt bound to the record's hashes:",
        (f"  curl -s {base}/api/decision/$ID/execution {key} {json_type} -H 'x-idempotency-key: demo-exec-1' "
        f"--data '{execution}'"),
        "",
        "5. Record the outcome:",
        f"  curl -s {base}/api/decision/$ID/outcome {key} {json_type} --data '{outcome}'",
        "",
        "6. Export the decision packet and verify it offline (the core alone, no server):",
        f"  curl -s {base}/api/decision/$ID/packet {key} > packet.json",
        f"  curl -s {base}/api/decision/receipt-keys > keys.json",
        f"  {gate} verify packet.json --key-registry keys.json",
        "",
        "7. The scope's audit chain (links, Merkle root, signed checkpoint):",
        f"  curl -s \"{base}/api/decision/chains/$CHAIN?limit=5\" {key}",
        "",
        f"API reference: {base}/docs   readiness: {base}/api/decision/status   liveness: {base}/healthz",
        "",
    ])


def policy_as_code_tour(home: Path) -> str:
    """How to try policy as code (docs/policy-as-code.md) on the demo's scopes: printed after the
    walkthrough, each command as a POSIX shell runs it from any folder."""
    gate = f"GATE_HOME={shlex.quote(str(home))} {shlex.quote(str(Path(sys.executable).parent / 'gate'))}"
    return "\n".join([
        "Policy as code (docs/policy-as-code.md): the demo's rulebooks in a git repository, planned and applied:",
        "  mkdir -p policy-repo && cd policy-repo && git init -q",
        f"  {gate} release policy --scope demo --dry-run-max-age 31536000   # the demo's history ends weeks ago",
        f"  {gate} init-policies policies --scope demo && git add . && git commit -qm 'what the demo runs'",
        "  (edit policies/demo/refund_approval.json: a new \"version\" and, say, a lower review threshold)",
        f"  {gate} plan --dir policies --scope demo     # Markdown for a pull request; exit 3: something changes",
        f"  {gate} apply --dir policies --scope demo    # publishes it and makes policies/demo/release.toml's move",
        "",
    ])


def add_demo_parser(sub: Subparsers, serve_demo: Callable[[argparse.Namespace], int],
                    formatter: type[argparse.HelpFormatter] | None = None) -> None:
    extra: dict[str, Any] = {"formatter_class": formatter} if formatter else {}
    p = sub.add_parser("demo",
                       description="Serve the embedded demo (seeding the demo ledger on the first run), "
                                   "or `gate demo seed` to write the demo ledger only. Each run disables the "
                                   "demo key of the run before and prints a new one.", **extra)
    p.add_argument("--host", default="127.0.0.1", help="address to bind")
    p.add_argument("--port", type=int, default=8080, help="TCP port of the API (PORT in scripts/demo)")
    p.add_argument("--seed-decisions", type=int, default=DEFAULT_DECISIONS,
                   help="decisions to seed on the first run, into an empty ledger (default %(default)s; 0: none)")
    p.add_argument("--workbench-port", type=int, default=5006,
                   help="port of the policy workbench started beside the API, WORKBENCH_PORT in "
                        "scripts/demo (default %(default)s; 0: none)")
    p.set_defaults(func=serve_demo)
    demo_sub = p.add_subparsers(dest="demo_command")
    s = demo_sub.add_parser("seed", help="write the deterministic demo ledger through the real services", **extra)
    s.add_argument("--decisions", type=int, default=DEFAULT_DECISIONS,
                   help="decisions to write (default %(default)s; receipts come on top)")
    s.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    s.set_defaults(func=cmd_demo_seed)
    s = demo_sub.add_parser("synth", help="generate a synthetic benchmark dataset in the export's schema", **extra,
                            description="Draw the demo scenario straight into a Parquet dataset (no ledger, "
                                        "nothing signed; the manifest says synthetic: true).")
    s.add_argument("--out", required=True, metavar="DIR", help="an empty or new location (path or URL)")
    s.add_argument("--decisions", type=int, required=True, help="decisions to draw")
    s.add_argument("--seed", type=int, default=DEFAULT_SEED, help="random seed")
    s.add_argument("--chunk", type=int, default=100_000, help="decisions per generation chunk (bounds memory)")
    s.set_defaults(func=cmd_demo_synth)
