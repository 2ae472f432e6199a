"""`gate verify FILE`: offline verification of an exported Decision Record or Decision Packet,
with the core only (the same `gate.verify` / `gate.packets` code the API runs).

Trust comes from the operator, never from the file: `--key-registry` (a registry URL or a saved
registry JSON file), `--public-key` (a PEM file) or `--hmac-secret-env` (the name of an
environment variable holding the HMAC secret). Without any of them only integrity is checked
and the exit code is non-zero, because authenticity is unproven.
`--checkpoints FILE` (a witness's checkpoint log) also checks that a packet's chain is at least
as long as, and extends, the newest checkpoint held for it (docs/verification.md §7.4); so for a
release history and a key chain (`gate keys history`) and the governance chain each carries.
`--hold-history FILE` (or FILE itself, when it is one) checks a scope's whole hold chain
(`hold_history_v1`, GET /api/holds/history; `gate.holds.history`), with `--checkpoints` also
against the checkpoint of that chain a witness held (a truncated or rewritten chain fails).
Exit codes: 0 verified, 1 verification failed, 2 unusable input (unreadable file, bad key).
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import GateError
from gate.protocol.canonical import CanonicalJSONError, parse_strict
from gate.strict_json import JsonValue
from gate.vocabulary import MIGRATION_MANIFEST_VERSION
from gate_cli.help import Subparsers

if TYPE_CHECKING:
    from gate.packets.result import PacketReport
    from gate.releases.governance import ChangeSummary
    from gate.verify import TrustAnchors
    from gate.verify.result import VerificationReport, VerificationResult

# The chains' verifiers (and the JSON Schemas of the settings they check) load with the command
# that verifies one, not with `gate --help` (issue 68).


def add_verify_parser(sub: Subparsers) -> None:
    p = sub.add_parser("verify")
    p.add_argument("file", nargs="?", default=None,
                   help="the exported record, packet or history (JSON); required unless --hold-history")
    p.add_argument("--key-registry", help="receipt key registry: a URL or a saved JSON file (default: none; without any trusted key "
                                           "only integrity is checked)")
    p.add_argument("--public-key", help="PEM file of a trusted Ed25519 public key (default: none)")
    p.add_argument("--hmac-secret-env", help="environment variable that holds the HMAC secret (default: none)")
    p.add_argument("--input", help="the original request body (JSON), checked against input_hash (default: not checked)")
    p.add_argument("--checkpoints", help="a checkpoint log (JSONL, `gate checkpoint save`, the gate's "
                                         "GATE_CHECKPOINT_LOG): a packet's chain and hold chain, or a hold, release or key history, must "
                                         "be at least as long as, and extend, the newest checkpoint held for it (default: none)")
    p.add_argument("--hold-history", default=None,
                   help="a scope's hold chain (hold_history_v1, GET /api/holds/history) to check instead of FILE: "
                        "every event's seq, link, hash and signature, each policy it sets, each hold's closing "
                        "rules (default: none)")
    p.add_argument("--json", action="store_true", help="print the verification result as JSON")
    p.set_defaults(func=cmd_verify)


def _read_json(path: str, what: str) -> Any:  # any JSON value: the caller checks its shape
    try:
        return parse_strict(Path(path).read_bytes())
    except OSError as exc:
        raise GateError("VERIFY_INPUT_UNREADABLE", f"cannot read {what} {path}: {exc.strerror}") from exc
    except CanonicalJSONError as exc:
        raise GateError("VERIFY_INPUT_UNREADABLE", f"{what} {path} is not valid JSON: {exc.message}") from exc


MAX_REGISTRY_BYTES = 4 * 1024 * 1024  # a registry of thousands of keys; a larger answer is refused


def is_url(location: str) -> bool:
    return location.startswith(("http://", "https://"))


def _registry_body(location: str) -> bytes:
    if is_url(location):
        with urllib.request.urlopen(location, timeout=10) as response:  # noqa: S310 - operator-chosen URL
            body: bytes = response.read(MAX_REGISTRY_BYTES + 1)  # typeshed leaves urlopen's answer Any
            return body
    return Path(location).read_bytes()


def load_anchors(args: argparse.Namespace) -> TrustAnchors:
    from gate.verify import SOURCE_KEY_REGISTRY_FILE, SOURCE_KEY_REGISTRY_URL, TrustAnchors

    anchors = TrustAnchors()
    if args.key_registry:
        # The result names where the trusted keys came from: a URL is labelled a URL, never a file.
        source = SOURCE_KEY_REGISTRY_URL if is_url(args.key_registry) else SOURCE_KEY_REGISTRY_FILE
        what = "key registry URL" if source == SOURCE_KEY_REGISTRY_URL else "key registry file"
        try:
            body = _registry_body(args.key_registry)
        except (OSError, ValueError) as exc:
            raise GateError("VERIFY_KEY_UNAVAILABLE", f"cannot load {what} {args.key_registry}: {exc}") from exc
        if len(body) > MAX_REGISTRY_BYTES:
            raise GateError("VERIFY_KEY_UNAVAILABLE", f"{what} {args.key_registry} is larger than 4 MiB")
        anchors = anchors + TrustAnchors.from_registry_body(body, source)
    if args.public_key:
        try:
            pem = Path(args.public_key).read_text()
        except OSError as exc:
            raise GateError("VERIFY_KEY_UNAVAILABLE", f"cannot read {args.public_key}: {exc.strerror}") from exc
        anchors = anchors + TrustAnchors.from_public_key_pem(pem)
    if args.hmac_secret_env:
        secret = os.environ.get(args.hmac_secret_env)
        if not secret:
            raise GateError("VERIFY_KEY_UNAVAILABLE", f"environment variable {args.hmac_secret_env} is empty or unset")
        anchors = anchors + TrustAnchors.from_hmac_secret(secret)
    return anchors


def _checkpoint_log(path: str | None) -> Sequence[Mapping[str, JsonValue]] | None:
    """The checkpoints of `--checkpoints` (None without it); unreadable is exit 2."""
    from gate.chain.checkpoint_log import CheckpointLogError, read_checkpoint_log

    if path is None:
        return None
    if not Path(path).is_file():
        raise GateError("VERIFY_INPUT_UNREADABLE", f"checkpoint log {path} does not exist")
    try:
        return read_checkpoint_log(path)
    except CheckpointLogError as exc:
        raise GateError("VERIFY_INPUT_UNREADABLE", exc.message) from exc


def report(result: VerificationResult) -> str:
    lines = [f"decision {result.decision_id}: " + ("VERIFIED" if result.verified else "NOT VERIFIED")]
    lines.append(f"  integrity    {'valid' if result.integrity_valid else 'INVALID'}")
    source = result.key_source or "no trusted key"
    lines.append(f"  authenticity {'valid' if result.authenticity_valid else 'NOT PROVEN'} ({source})")
    for name, outcome in sorted(result.checks.items()):
        mark = {True: "ok  ", False: "FAIL", None: "skip"}[outcome]
        lines.append(f"  [{mark}] {name}")
    for name in result.failed_checks:
        if name in result.expected:
            lines.append(f"  {name}: expected {result.expected[name]} got {result.actual.get(name)}")
    return "\n".join(lines)


def _input_file(args: argparse.Namespace) -> tuple[str, str]:
    """The one file to check and what it is called: FILE, or the --hold-history file."""
    if (args.file is None) == (args.hold_history is None):
        raise GateError("VERIFY_INPUT_UNREADABLE", "give one file: FILE or --hold-history FILE")
    if args.hold_history is not None and args.input:
        raise GateError("VERIFY_INPUT_UNREADABLE", "--input does not apply to a hold history")
    return (args.file, "record") if args.file is not None else (args.hold_history, "hold history")


def cmd_verify(args: argparse.Namespace) -> int:
    from gate.packets import verify_packet
    from gate.verify import verify_record
    from gate_cli.packet_report import is_packet, packet_report

    path, what = _input_file(args)
    record = _read_json(path, what)
    original = _read_json(args.input, "input") if args.input else None
    anchors = load_anchors(args)
    if not isinstance(record, dict):
        raise GateError("VERIFY_INPUT_UNREADABLE", f"{path} does not hold a JSON object")
    if args.hold_history is not None or "hold_history_version" in record:
        return _verify_hold_history(record, anchors, args.json, _checkpoint_log(args.checkpoints))
    if record.get("release_history_version") is not None:
        return _verify_release_history(record, anchors, args.json, _checkpoint_log(args.checkpoints))
    if record.get("api_key_grants_version") is not None:
        return _verify_key_grants(record, anchors, args.json, _checkpoint_log(args.checkpoints))
    if record.get("schema_version") == MIGRATION_MANIFEST_VERSION:  # a dry-run's, which names no decision
        raise GateError("VERIFY_INPUT_UNREADABLE", f"{path} is a dry-run's migration manifest "
                        f"({MIGRATION_MANIFEST_VERSION}), not a record: check it with gate dry-run --verify {path}")
    packet = is_packet(record)
    held = _checkpoint_log(args.checkpoints)
    if held is not None and not packet:
        raise GateError("VERIFY_INPUT_UNREADABLE", "--checkpoints applies to packets (a record carries no tree)")
    result: PacketReport | VerificationReport
    if packet:
        result = verify_packet(record, anchors=anchors, original_input=original, checkpoint_log=held).to_dict()
        text = packet_report(result)
    else:
        verification = verify_record(record, anchors=anchors, original_input=original)
        result, text = verification.to_dict(), report(verification)
    print(json.dumps(result, indent=2) if args.json else text)
    return 0 if result["verified"] else 1


def _release_witness_problems(document: dict[str, JsonValue], events: list[JsonValue], governance: list[JsonValue],
                              checkpoints: Sequence[Mapping[str, JsonValue]] | None, anchors: TrustAnchors) -> list[str]:
    """With `--checkpoints`: the release chain and the governance chain against the newest
    checkpoint of each in the log (`gate.chain.event_witness`)."""
    from gate.chain.event_witness import governance_chain_id, release_chain_id, witness_problems

    scope, rulebook_id = document.get("scope_hash"), document.get("rulebook_id")
    if checkpoints is None or not isinstance(scope, str) or not isinstance(rulebook_id, str):
        return []
    usable = None if anchors.empty else anchors
    return (witness_problems(release_chain_id(scope, rulebook_id), events, checkpoints, usable)
            + witness_problems(governance_chain_id(scope), governance, checkpoints, usable))


def _verify_release_history(document: dict[str, JsonValue], anchors: TrustAnchors, as_json: bool,
                            checkpoints: Sequence[Mapping[str, JsonValue]] | None = None) -> int:
    """A release history (GET /api/decision/rulebooks/{id}/release/history): every event's hash,
    link, signature and stated state (gate.releases.events), with the scope's policy changes
    (its governance chain): each one is listed, and a deleted or edited one fails. Verified
    needs a trusted key. With `checkpoints`, both chains must extend their witnessed checkpoints."""
    from gate.governance.table import SAFEGUARDS
    from gate.releases.events import verify_history

    events, governance = document.get("events"), document.get("governance")
    events, governance = events if isinstance(events, list) else [], governance if isinstance(governance, list) else []
    check = verify_history(events, None if anchors.empty else anchors, governance, SAFEGUARDS)
    witnessed = _release_witness_problems(document, events, governance, checkpoints, anchors)
    if witnessed:
        check = replace(check, valid=False, problems=(*check.problems, *witnessed))
    verified = check.verified  # valid, and signed by a trusted key
    result = {"verified": verified, "integrity_valid": check.valid, "authenticity_valid": verified,
              "rulebook_id": document.get("rulebook_id"), **check.to_json()}
    if as_json:
        print(json.dumps(result, indent=2))
    else:
        print(f"release history of {document.get('rulebook_id')!r}: {'VERIFIED' if verified else 'NOT VERIFIED'}"
              f" ({check.events} events, {len(check.policy_changes)} policy changes)")
        print(f"  integrity    {'valid' if check.valid else 'INVALID'}")
        print(f"  authenticity {'valid' if verified else 'NOT PROVEN (no trusted key)' if check.valid else 'INVALID'}")
        for event in events:
            print(_release_event_line(event))
        for change in check.policy_changes:
            print(f"  policy event {change['seq']} {change['created_at']} {change['setting']} {change['action']} by "
                  f"{change['actor']} ({(change.get('principal') or {}).get('kind')}){_approvers(change)}: "
                  f"{_policy_delta(change)}")
        for problem in check.problems:
            print(f"  {problem}")
    return 0 if verified else 1


def _release_event_line(event: object) -> str:
    """One release event as stated (who acted, for which holder): `release event 3 <time> approve
    v2 by <actor> (<kind>), holder <holder>`. What the signed event says, checked above."""
    if not isinstance(event, dict):
        return "  release event (not an object)"
    stated = event.get("principal")
    principal: dict[str, JsonValue] = stated if isinstance(stated, dict) else {}
    holder = principal.get("holder")
    return (f"  release event {event.get('seq')} {event.get('created_at')} {event.get('action')} "
            f"{event.get('version') or '-'} by {event.get('actor')} ({principal.get('kind', 'unstated')})"
            + (f", holder {holder}" if holder else ""))


def _approvers(change: ChangeSummary) -> str:
    """Who asked and who approved a change (a request: nobody yet)."""
    approved = [str(actor) for actor in change.get("approved_by") or ()]
    if change.get("action") == "policy_request":
        return ", waiting for a second principal"
    if change.get("action") == "policy_approve":
        return f", requested by {change.get('requested_by')}, approved by {' and '.join(approved)}"
    return f", approved by {' and '.join(approved)}"


def _verify_key_grants(document: dict[str, JsonValue], anchors: TrustAnchors, as_json: bool,
                       checkpoints: Sequence[Mapping[str, JsonValue]] | None = None) -> int:
    """A scope's key chain (`gate keys history`, gate.releases.key_grants): every grant of a key
    that acts on production, its holder and who made it. Verified needs a trusted key. With
    `checkpoints`, the key chain and the governance chain must extend their witnessed checkpoints
    (a key chain cut back fails, issue 64)."""
    from gate.chain.event_witness import governance_chain_id, key_chain_id, witness_problems
    from gate.governance.table import API_KEYS, SAFEGUARDS
    from gate.releases.governance import verify_governance
    from gate.releases.key_grants import verify_key_grants

    check = verify_key_grants(document, None if anchors.empty else anchors)
    stated = document.get("governance")
    governance_events = stated if isinstance(stated, list) else []
    governance = verify_governance(governance_events, None if anchors.empty else anchors,
                                   document.get("scope_hash"), SAFEGUARDS)
    if governance.problem is not None and check.valid:
        check = replace(check, valid=False, problems=(governance.problem,))
    scope, events = document.get("scope_hash"), document.get("events")
    if checkpoints is not None and isinstance(scope, str):
        usable = None if anchors.empty else anchors
        witnessed = (witness_problems(key_chain_id(scope), events if isinstance(events, list) else [], checkpoints,
                                      usable)
                     + witness_problems(governance_chain_id(scope), governance_events, checkpoints, usable))
        if witnessed:
            check = replace(check, valid=False, problems=(*check.problems, *witnessed))
    changes = [change for change in governance.changes if change["setting"] == API_KEYS]
    verified = check.verified  # valid, and signed by a trusted key
    if as_json:
        print(json.dumps({"verified": verified, "integrity_valid": check.valid, "authenticity_valid": verified,
                          **check.to_json(), "grant_changes": changes}, indent=2))
        return 0 if verified else 1
    print(f"key chain of scope {str(document.get('scope_hash'))[:16]}…: {'VERIFIED' if verified else 'NOT VERIFIED'}"
          f" ({check.events} grants)")
    print(f"  integrity    {'valid' if check.valid else 'INVALID'}")
    print(f"  authenticity {'valid' if verified else 'NOT PROVEN (no trusted key)' if check.valid else 'INVALID'}")
    for grant in check.grants:
        print(f"  grant {grant['seq']} {grant['created_at']} {grant['action']} {grant['api_key_id']} of {grant['holder']}"
              f" ({grant['permissions']}) by {grant['actor']}")
    for change in changes:
        print(f"  governance event {change['seq']} {change['created_at']} {change['action']} by {change['actor']}"
              f"{_approvers(change)}: {', '.join(change.get('weakens') or ()) or 'no key gains a right'}")
    if check.problem is not None:
        print(f"  {check.problem}")
    return 0 if verified else 1


def _policy_delta(change: ChangeSummary) -> str:
    """The members a policy change states differently after than before (`a: x -> y`)."""
    before, after = change.get("policy_before") or {}, change.get("policy_after") or {}
    moved = [f"{name}: {before.get(name)!r} -> {after.get(name)!r}" for name in after if before.get(name) != after.get(name)]
    return "; ".join(moved) or "no member changed"


def _verify_hold_history(document: dict[str, JsonValue], anchors: TrustAnchors, as_json: bool,
                         checkpoints: Sequence[Mapping[str, JsonValue]] | None) -> int:
    """A scope's hold chain (gate.holds.history): verified needs every check and a trusted key;
    with `--checkpoints`, the chain must extend the checkpoint of it witnessed by its head's time."""
    from gate.holds.history import verify_hold_history

    check = verify_hold_history(document, anchors, checkpoints)
    if as_json:
        print(json.dumps(check.to_json(), indent=2))
        return 0 if check.verified else 1
    closed = ", ".join(f"{outcome} {count}" for outcome, count in check.closed.items())
    print(f"hold history of scope {str(document.get('scope_hash'))[:16]}…: "
          f"{'VERIFIED' if check.verified else 'NOT VERIFIED'} ({check.events} events"
          + (f"; holds closed: {closed}" if closed else "") + f"; {len(check.policy_changes)} policy changes)")
    print(f"  integrity    {'valid' if check.valid else 'INVALID'}")
    print(f"  authenticity {'valid' if check.verified else 'INVALID' if not check.valid else 'NOT PROVEN (no trusted key)'}")
    if check.as_of is not None:
        head = document.get("head")
        print(f"  head         seq {head.get('seq') if isinstance(head, dict) else None}, signed as of {check.as_of}"
              " (events after that time are not covered)")
    for change in check.policy_changes:
        policy = change.get("policy") or {}
        print(f"  policy event {change['seq']} {change['created_at']} by {change['actor']}"
              f" ({(change.get('principal') or {}).get('kind')}): queues {', '.join(sorted(policy.get('queues') or {}))};"
              f" default {policy.get('default_queue')}; four eyes {'on' if policy.get('four_eyes') else 'off'}")
    for problem in check.problems:
        print(f"  {problem}")
    return 0 if check.verified else 1
