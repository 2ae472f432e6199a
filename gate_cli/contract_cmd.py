"""`gate conformance` and `gate migration check`: the public contract artifacts, run.

* `gate conformance --endpoint URL [--api-key KEY] [--json]`: the conformance fixtures against an
  endpoint (gate_cli/conformance.py); exit 0 only when every fixture passed, 1 when any failed,
  3 when some were skipped (incomplete), 2 for unusable arguments.
* `gate migration check MANIFEST [--rulebook FILE] [--corpus DIR] [--public-key PEM]
  [--key-registry FILE] [--json]`: a `rulebook_migration_v1` manifest against the golden replay
  corpus, or a dry-run's manifest against its own evidence, its signature by a key this gate
  trusts (its keyring and HMAC secret, plus the options) (gate/replay/migration_check.py);
  exit 0 only when the gate passed, 1 when it did not (or could not run), 2 for unreadable files.
The API key may also come from `GATE_API_KEY` (never logged, never printed).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from gate.protocol.canonical import CanonicalJSONError, parse_strict
from gate_cli.context import CliError
from gate_cli.help import Subparsers

if TYPE_CHECKING:
    from gate.adapters import AdapterRegistry
    from gate.keys.anchors import TrustAnchors

def cmd_conformance(args: argparse.Namespace) -> int:
    # Lazy: each command's modules load only when it runs (`gate --version` stays fast).
    from gate_cli.conformance import exit_code, http_transport, render, run_conformance

    if not args.endpoint.startswith(("http://", "https://")):
        raise CliError("--endpoint must be an http(s) URL")
    api_key = args.api_key or os.environ.get("GATE_API_KEY")
    report = run_conformance(http_transport(args.endpoint, api_key))
    print(json.dumps(report, indent=2) if args.json else render(report))
    return exit_code(report)


def _adapters() -> AdapterRegistry:
    """The adapters this installation would run (builtins and installed plugins)."""
    # Lazy (here and below): the adapters read the installed entry points, a start-up cost `gate` avoids.
    import gate.adapters as adapters

    factory = getattr(adapters, "default_registry", None)
    return factory() if callable(factory) else adapters.AdapterRegistry()


def _anchors(args: argparse.Namespace) -> TrustAnchors:
    """The keys a dry-run manifest's signature may be by: this gate's own (keyring, HMAC secret)
    and those the options name (unusable ones raise TrustAnchorError, a GateError)."""
    from gate.keys.anchors import TrustAnchors
    from gate.services.root import signing_setup
    from gate_cli.context import load_settings

    anchors = signing_setup(load_settings()).trust_anchors()
    if args.public_key:
        anchors = anchors + TrustAnchors.from_public_key_pem(Path(args.public_key).read_text())
    if args.key_registry:
        anchors = anchors + TrustAnchors.from_registry_body(Path(args.key_registry).read_bytes())
    return anchors


def cmd_migration_check(args: argparse.Namespace) -> int:
    from gate.replay.golden import CORPUS_DIR
    from gate.replay.migration_check import check_migration

    documents = {}
    for name, path in (("manifest", args.manifest), ("rulebook", args.rulebook)):
        if path is None:
            continue
        try:
            documents[name] = parse_strict(Path(path).read_bytes())
        except (OSError, CanonicalJSONError) as exc:
            raise CliError(f"cannot read {name} {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        anchors = _anchors(args)  # a key that cannot be used: its own refusal (TrustAnchorError)
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot use the trusted keys: {exc}") from None
    result = check_migration(documents["manifest"], corpus=Path(args.corpus) if args.corpus else CORPUS_DIR,
                             rulebook=documents.get("rulebook"), adapters=_adapters(), anchors=anchors)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for fixture in result["fixtures"]:
            drift = ", ".join(fixture.get("drift_fields") or []) or "none"
            print(f"{fixture['fixture_id']:40} {fixture['mode']:10} {fixture['replay_status']:8} drift: {drift}")
        for problem in result["problems"]:
            print(f"problem: {problem}")
        print(f"ok: {str(result['ok']).lower()}  gate_passed: {str(result['gate_passed']).lower()}  "
              f"observed drift: {', '.join(result['observed_drift']) or 'none'}")
    return 0 if result["gate_passed"] else 1


def add_conformance_parser(sub: Subparsers) -> None:
    p = sub.add_parser("conformance")
    p.add_argument("--endpoint", required=True, help="base URL, e.g. http://127.0.0.1:8080")
    p.add_argument("--api-key", default=None, help="API key (default: GATE_API_KEY)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_conformance)


def add_migration_parser(sub: Subparsers) -> None:
    m = sub.add_parser("migration")
    msub = m.add_subparsers(dest="migration_command", required=True)
    c = msub.add_parser("check", help="replay the golden corpus under a migration's candidate and gate it")
    c.add_argument("manifest")
    c.add_argument("--rulebook", default=None, help="the candidate Rulebook v1 file (hash = to.rulebook_hash) "
                                                            "(default: the corpus's snapshot of that hash)")
    c.add_argument("--corpus", default=None, help="golden replay corpus folder (default: the published one)")
    c.add_argument("--public-key", default=None, help="PEM file of another trusted Ed25519 key for a dry-run's "
                                                      "manifest (default: this gate's own keys only)")
    c.add_argument("--key-registry", default=None, help="a saved receipt key registry (JSON) of trusted keys "
                                                        "(default: this gate's own keys only)")
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_migration_check)
