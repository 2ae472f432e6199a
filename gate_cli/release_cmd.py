"""`gate release …`: the operator's side of policy releases (docs/releases.md), through the same
`ReleaseService` as the API and the workbench. The local operator acts on the ledger directly as
the principal `operator:<login>` (the process's login name; no option names anyone else), marked
as an operator in every signed event: approvals still need a second principal.

    gate release publish  --scope S FILE
    gate release status   --scope S --rulebook-id ID [--json]
    gate release history  --scope S --rulebook-id ID           (the offline-verifiable history)
    gate release shadow   --scope S --rulebook-id ID --version V [--reason R] [--manifest migration.json]
    gate release canary   --scope S --rulebook-id ID --version V --percent P [--subject PATH] …
    gate release activate --scope S --rulebook-id ID --version V [--manifest migration.json]
    gate release halt|rollback --scope S --rulebook-id ID [--reason R]
    gate release approve  --scope S --rulebook-id ID --request-seq N --version V --rulebook-hash H
                          (canary, activate, rollback and approve take [--override-halt --reason R]:
                          a version its guardrail halted serves again only so, docs/releases.md)
    gate release policy   --scope S [--require-approval | --no-require-approval] [--approval-ttl SECONDS]
                          [--refuse-superseded-inline | --allow-superseded-inline]
                          [--require-dry-run | --no-require-dry-run] [--dry-run-canary-percent P]
                          [--dry-run-max-age SECONDS] [--reason R]
    gate release policy-approve --scope S --request-seq N [--reason R]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import TYPE_CHECKING, Any

from gate_cli.context import OPERATOR_PERMISSIONS, CliError, load_settings, open_ledger, operator
from gate_cli.help import Subparsers, add_id_argument
from workbench.reports.numbers import rate, rate_interval

if TYPE_CHECKING:
    from gate.releases.governance import GovernanceEvent
    from gate.services.releases import ReleaseService

ACTIONS = ("shadow", "canary", "activate", "halt", "rollback", "approve")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def add_release_parser(sub: Subparsers) -> None:
    release = sub.add_parser("release")
    rsub = release.add_subparsers(dest="release_command", required=True)
    publish = rsub.add_parser("publish", help="publish a Rulebook v1 file in a scope (immutable)")
    _scope(publish)
    publish.add_argument("file", help="the Rulebook v1 JSON file")
    for name, text in (("status", "show a release's state, policy, comparison and history"),
                       ("history", "print the release history (verify it offline with gate verify)")):
        parser = rsub.add_parser(name, help=text)
        _scope(parser)
        add_id_argument(parser, "rulebook_id", "the rulebook's id", alias="--rulebook-id")
        parser.add_argument("--json", action="store_true", help="print JSON (history is always JSON)")
    for name in ACTIONS:
        parser = rsub.add_parser(name, help=f"{name} (a signed, chained release event)")
        _scope(parser)
        add_id_argument(parser, "rulebook_id", "the rulebook's id", alias="--rulebook-id")
        if name in ("shadow", "canary", "activate", "approve"):
            parser.add_argument("--version", required=True, help="the published version (required)")
        if name == "canary":
            parser.add_argument("--percent", type=float, required=True, help="share of subjects, 0 < P < 100 (required)")
            parser.add_argument("--subject", default=None,
                                help="dotted path of the request that picks the arm (default: context.source_record_id)")
        if name == "approve":
            parser.add_argument("--request-seq", type=int, required=True, help="the pending request's seq (required)")
            parser.add_argument("--rulebook-hash", required=True, help="the requested version's hash (required)")
        parser.add_argument("--reason", default=None, help="why (recorded in the signed event; default: none)")
        parser.add_argument("--manifest", default=None,
                            help="the dry-run's signed migration.json this rests on: checked in full for canary and "
                                 "activate (required where the scope's policy sets require_dry_run), its "
                                 "migration_hash recorded; default: none")
        if name in ("canary", "activate", "rollback", "approve"):
            parser.add_argument("--override-halt", action="store_true",
                                help="make a version its guardrail halted serve again (admin; needs --reason)")
        parser.add_argument("--idempotency-key", default=None, help="retry-safe key (default: none)")
        parser.add_argument("--json", action="store_true", help="print the event as JSON")
    policy = rsub.add_parser("policy", help="show or change a scope's release policy (a signed policy event)")
    _scope(policy)
    policy.add_argument("--require-approval", dest="require_approval", action="store_const", const=True, default=None,
                        help="canary and activation need a second principal's approval")
    policy.add_argument("--no-require-approval", dest="require_approval", action="store_const", const=False)
    policy.add_argument("--approval-ttl", type=int, default=None,
                        help="seconds an approval request lives (60..2592000; default: unchanged)")
    policy.add_argument("--refuse-superseded-inline", dest="refuse_inline", action="store_const", const=True,
                        default=None, help="refuse inline decides of a released id with other content (409)")
    policy.add_argument("--allow-superseded-inline", dest="refuse_inline", action="store_const", const=False)
    policy.add_argument("--require-dry-run", dest="require_dry_run", action="store_const", const=True, default=None,
                        help="activation (and a canary above --dry-run-canary-percent) needs a signed dry-run manifest")
    policy.add_argument("--no-require-dry-run", dest="require_dry_run", action="store_const", const=False)
    policy.add_argument("--dry-run-canary-percent", type=float, default=None,
                        help="canary shares above this need the manifest too (0..<100; default: unchanged)")
    policy.add_argument("--dry-run-max-age", type=int, default=None,
                        help="seconds the dry-run's history may be old (60..31536000; default: unchanged)")
    policy.add_argument("--reason", default=None, help="why (recorded in the signed policy event; default: none)")
    approve = rsub.add_parser("policy-approve", help="approve another principal's pending policy request")
    _scope(approve)
    approve.add_argument("--request-seq", type=int, required=True, help="the pending request's seq (required)")
    approve.add_argument("--reason", default=None, help="why (recorded in the signed policy event; default: none)")
    release.set_defaults(func=cmd_release)


def _scope(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scope", required=True, help="the scope (required)")


def _manifest(path: str | None) -> dict[str, Any] | None:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the migration manifest {path}: {exc}") from exc
    digest = manifest.get("migration_hash") if isinstance(manifest, dict) else None
    if not isinstance(manifest, dict) or not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        raise CliError(f"{path} has no migration_hash (is it a dry-run's migration.json?)")
    return manifest


def _body(args: argparse.Namespace) -> dict[str, Any]:
    manifest = _manifest(args.manifest)
    body: dict[str, Any] = {"action": args.release_command, "reason": args.reason}
    if manifest is not None and args.release_command in ("canary", "activate"):
        body["migration_manifest"] = manifest  # checked in full by the service
    elif manifest is not None:
        body["migration_manifest_hash"] = manifest["migration_hash"]
    if getattr(args, "override_halt", False):
        body["override"] = "guardrail_halt"
    for name in ("version", "percent", "subject", "request_seq", "rulebook_hash"):
        if getattr(args, name, None) is not None:
            body[name] = getattr(args, name)
    return {k: v for k, v in body.items() if v is not None}


def cmd_release(args: argparse.Namespace) -> int:
    from gate.services.root import decision_services, signing_setup

    settings = load_settings()
    ledger = open_ledger(settings)
    releases = decision_services(ledger, signing_setup(settings), checkpoint_log=settings.checkpoint_log).release_service()
    try:
        return _run(args, releases)
    finally:
        ledger.dispose()


def _run(args: argparse.Namespace, releases: ReleaseService) -> int:
    command = args.release_command
    if command == "publish":
        try:
            with open(args.file, encoding="utf-8") as handle:
                rulebook = json.load(handle)
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot read the rulebook {args.file}: {exc}") from exc
        metadata, created = releases.snapshots.register_rulebook(args.scope, rulebook)
        print(json.dumps({"created": created, "rulebook": metadata}, indent=2))
        return 0
    if command == "policy":
        return _policy(args, releases)
    if command == "policy-approve":
        return _policy_approve(args, releases)
    if command == "history":
        print(json.dumps(releases.history_document(args.scope, args.rulebook_id), indent=2))
        return 0
    if command == "status":
        status = releases.status(args.scope, args.rulebook_id)
        print(json.dumps(status, indent=2) if args.json else status_text(status))
        return 0
    event, created = releases.act(args.scope, operator(), OPERATOR_PERMISSIONS, args.rulebook_id, _body(args),
                                  args.idempotency_key)
    if args.json:
        print(json.dumps(event, indent=2))
    else:
        state = releases.state(args.scope, args.rulebook_id)
        print(f"{'recorded' if created else 'already recorded'} event {event['seq']} ({event['action']}) of "
              f"{args.rulebook_id!r}: {event['event_hash']}")
        print(status_text({"rulebook_id": args.rulebook_id, "state": state.to_json(), "history": [],
                           "comparison": {"shadow": None, "canary": None}}))
    return 0


def _policy(args: argparse.Namespace, releases: ReleaseService) -> int:
    changes = {"require_approval": args.require_approval, "approval_ttl_seconds": args.approval_ttl,
               "refuse_superseded_inline": args.refuse_inline, "require_dry_run": args.require_dry_run,
               "dry_run_canary_percent": args.dry_run_canary_percent,
               "dry_run_max_age_seconds": args.dry_run_max_age}
    named = {k: v for k, v in changes.items() if v is not None}
    event = None
    if named:  # the members named change, every other is kept (a PATCH)
        event, _state = releases.set_policy(args.scope, operator(), OPERATOR_PERMISSIONS, named, partial=True,
                                            reason=args.reason)
    return _print_policy(args.scope, releases, event)


def _policy_approve(args: argparse.Namespace, releases: ReleaseService) -> int:
    event, _state = releases.approve_policy(args.scope, operator(), OPERATOR_PERMISSIONS, args.request_seq,
                                            args.reason)
    return _print_policy(args.scope, releases, event)


def _print_policy(scope: str, releases: ReleaseService, event: GovernanceEvent | None) -> int:
    document = releases.policy_document(scope)
    print(json.dumps({"scope": scope, "policy": document["policy"], "pending": document["pending"],
                      "event": event}, indent=2))
    if event is not None and event["action"] == "policy_request":
        print(f"gate release: the change weakens a policy that requires approvals: request {event['seq']} waits "
              "for a second principal (gate release policy-approve, or POST /api/decision/release-policy/approvals)",
              file=sys.stderr)
    return 0


def status_text(status: dict[str, Any]) -> str:
    state = status["state"]
    lines = [f"release of {status['rulebook_id']!r} (event {state['seq']})"]
    active = state.get("active")
    lines.append(f"  active  {active['version'] if active else 'none (decide by reference answers 409)'}")
    if state.get("shadow"):
        lines.append(f"  shadow  {state['shadow']['version']}")
    if state.get("canary"):
        canary = state["canary"]
        lines.append(f"  canary  {canary['version']} at {canary['percent']}% by {canary['subject']}")
    for pending in state.get("pending", []):
        lines.append(f"  pending {pending['action']} {pending['version']} (request {pending['request_seq']}, "
                     f"by {pending['requested_by']}, expires {pending['expires_at']})")
    comparison = status.get("comparison") or {}
    shadow = comparison.get("shadow")
    if shadow:
        agreement = shadow["agreement"]
        lines.append(f"  shadow agreement {agreement['events']}/{agreement['n']} "
                     f"({rate(agreement.get('rate'))}, 95% {rate_interval(*(agreement['interval_95'] or (None, None)))}) "
                     f"over {shadow['decisions']} live decisions")
    canary = comparison.get("canary")
    if canary:
        for arm in canary["arms"]:
            failure = arm["failure_rate"]
            lines.append(f"  arm {arm['arm']:<7} {arm['decisions']} decisions; failure rate {rate(failure['rate'])} "
                         f"of {failure['n']} resolved (95% {rate_interval(*(failure['interval_95'] or (None, None)))})")
        tripped = canary["guardrails"]["tripped"]
        lines.append(f"  guardrails {'TRIPPED: ' + ', '.join(tripped) if tripped else 'holding'}")
    for event in status.get("history", [])[-10:]:
        lines.append(f"  #{event['seq']} {event['created_at']} {event['action']} {event.get('version') or ''} "
                     f"by {event['actor']}" + (f": {event['reason']}" if event.get("reason") else ""))
    return "\n".join(lines)
