"""`gate checkpoint save`: a witness keeps the gate's signed chain checkpoints outside the ledger.

From a running gate (`--url`, `--chain`, `--api-key-env`, and the gate's keys from
`--key-registry` or `--public-key`): fetch `GET /api/decision/chains/{chain}/checkpoint`, with
`first=<the newest held tree size>` so the gate includes the consistency proof; verify the
checkpoint's signature with a trusted key (never one from the answer); append it to the JSONL
log unless it is shorter than, or does not extend, the newest checkpoint held for that chain.

From the local ledger (`--scope`, with GATE_* configuration): the operator's own witness; the
checkpoint is signed with the local keyring and checked with its public key. Its default log
is the gate's own (GATE_CHECKPOINT_LOG), so it can be written on demand from cron.

Exit codes: 0 appended (or already held), 1 refused (bad signature, inconsistent with the
log), 2 unusable input (unreadable log, unreachable gate, no key).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.chain.links import chain_id_for
from gate.clock import SystemClock
from gate.errors import CodedError, GateError
from gate.strict_json import JsonValue
from gate_cli.context import FAILED, load_settings, open_ledger, refusal_text
from gate_cli.help import Subparsers
from gate_cli.verify_cmd import load_anchors

if TYPE_CHECKING:  # the chain's log, its Merkle proofs and the verifier load when a checkpoint is saved
    from gate.chain.merkle import Checkpoint
    from gate.verify import TrustAnchors

MAX_ANSWER_BYTES = 1024 * 1024


def add_checkpoint_parser(sub: Subparsers) -> None:
    p = sub.add_parser("checkpoint")
    csub = p.add_subparsers(dest="checkpoint_command", required=True, metavar="CHECKPOINT_COMMAND")
    s = csub.add_parser("save", help="append the chain's current signed checkpoint to a JSONL log",
                        description=__doc__.split("\n\n")[1])
    s.add_argument("--log", help="the checkpoint log (JSONL; created on first use); "
                                 "default with --scope: GATE_CHECKPOINT_LOG")
    s.add_argument("--url", help="a running gate's base URL, e.g. https://gate.example (required unless --scope)")
    s.add_argument("--chain", help="with --url: the chain id (a record's audit_chain.chain_id) (required with --url)")
    s.add_argument("--api-key-env", help="with --url: environment variable holding an API key of the chain's scope "
                                         "(required with --url)")
    s.add_argument("--key-registry", help="with --url: receipt key registry (URL or saved JSON) to check signatures "
                                          "(default: none)")
    s.add_argument("--public-key", help="with --url: PEM file of the gate's Ed25519 public key (default: none)")
    s.add_argument("--scope", help="read the local ledger (GATE_DATABASE_URL) instead: the scope whose chain to save "
                                   "(required unless --url)")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(func=cmd_checkpoint)


class _Refused(CodedError):
    """The checkpoint is not appended: exit 1."""

    CODE = "CHECKPOINT_REFUSED"


class _OutOfRange(CodedError):
    """The gate refused `first` (larger than its chain): the chain is shorter than held."""

    CODE = "VERIFY_INPUT_UNREADABLE"


def _get_json(url: str, api_key: str) -> Any:
    request = urllib.request.Request(url, headers={"x-api-key": api_key,  # noqa: S310 - operator-chosen URL
                                                   "accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=15) as response:  # noqa: S310 - operator-chosen URL
            body = response.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        detail = exc.read(4096).decode("utf-8", "replace")
        with contextlib.suppress(ValueError, AttributeError):
            detail = json.loads(detail).get("error", detail)
        if exc.code == 409:
            raise _Refused(f"the gate refuses to publish a checkpoint: {detail}") from exc
        if exc.code == 400:
            raise _OutOfRange(f"{url} answered 400 {detail}") from exc
        raise GateError("VERIFY_KEY_UNAVAILABLE", f"{url} answered {exc.code} {detail}") from exc
    except (OSError, ValueError) as exc:
        raise GateError("VERIFY_KEY_UNAVAILABLE", f"cannot reach {url}: {exc}") from exc
    if len(body) > MAX_ANSWER_BYTES:
        raise GateError("VERIFY_KEY_UNAVAILABLE", f"{url} answered more than 1 MiB")
    return json.loads(body)


def _trusted(checkpoint: Any, anchors: TrustAnchors) -> None:
    """Raise _Refused unless a trusted Ed25519 key verifies the checkpoint."""
    from gate.chain.merkle import verify_checkpoint

    signature = checkpoint.get("signature") if isinstance(checkpoint, dict) else None
    signature = signature if isinstance(signature, dict) else {}
    key = anchors.select_ed25519(signature.get("key_id"), signature.get("public_key_fingerprint"))
    if key is None:
        raise _Refused("no trusted key for the checkpoint's signature (unsigned, or signed by an unknown key)")
    result = verify_checkpoint(checkpoint, key.public_key_pem)
    if not result.valid:
        raise _Refused(f"the checkpoint does not verify: {', '.join(result.failed_checks)}")


def _from_gate(args: argparse.Namespace,
               held: dict[str, JsonValue] | None) -> tuple[dict[str, JsonValue], list[str] | None, TrustAnchors]:
    if not (args.chain and args.api_key_env):
        raise GateError("VERIFY_INPUT_UNREADABLE", "--url needs --chain and --api-key-env")
    api_key = os.environ.get(args.api_key_env)
    if not api_key:
        raise GateError("VERIFY_KEY_UNAVAILABLE", f"environment variable {args.api_key_env} is empty or unset")
    args.hmac_secret_env = None
    anchors = load_anchors(args)
    url = f"{args.url.rstrip('/')}/api/decision/chains/{urllib.parse.quote(args.chain, safe='')}/checkpoint"
    try:
        body = _get_json(url + (f"?first={held['tree_size']}" if held else ""), api_key)
    except _OutOfRange:
        body = _get_json(url, api_key)  # a chain shorter than the held tree: the log names it
    checkpoint = body.get("checkpoint") if isinstance(body, dict) else None
    if not isinstance(checkpoint, dict) or checkpoint.get("chain_id") != args.chain:
        raise _Refused("the gate's answer is not a checkpoint of this chain")
    consistency = body.get("consistency") if isinstance(body.get("consistency"), dict) else {}
    proof = consistency.get("proof") if held and consistency.get("first") == held["tree_size"] else None
    return checkpoint, proof, anchors


def _from_ledger(args: argparse.Namespace, held_of: Callable[[Path, str], dict[str, Any] | None],
                 ) -> tuple[Checkpoint, list[str] | None, TrustAnchors, Path]:
    # Lazy: the ledger brings SQLAlchemy, which `gate --version` does without.
    from gate.services.chains import AuditChainService
    from gate.services.root import signing_setup

    settings = load_settings()
    log = Path(args.log) if args.log else settings.checkpoint_log
    if log is None:
        raise GateError("VERIFY_INPUT_UNREADABLE", "no --log and GATE_CHECKPOINT_LOG is off")
    chain_id = chain_id_for(args.scope)
    held = held_of(log, chain_id)
    signing = signing_setup(settings)
    ledger = open_ledger(settings)
    try:
        audit = AuditChainService(ledger, signing, SystemClock())  # no log here: this command appends
        published = audit.publish_checkpoint(chain_id)
        if published is None:
            raise GateError("VERIFY_INPUT_UNREADABLE", f"scope {args.scope!r} has no decisions yet")
        size = published["checkpoint"]["tree_size"]
        proof = audit.consistency_proof(chain_id, held["tree_size"], size) if held and held["tree_size"] <= size \
            else None
    finally:
        ledger.dispose()
    return published["checkpoint"], proof, signing.trust_anchors(), log


def _held(log: Path, chain_id: str) -> dict[str, JsonValue] | None:
    from gate.chain.checkpoint_log import latest_checkpoint, read_checkpoint_log

    return latest_checkpoint(read_checkpoint_log(log), chain_id)


def _save(args: argparse.Namespace) -> dict[str, JsonValue]:
    from gate.chain.checkpoint_log import CheckpointLogError, append_checkpoint

    if bool(args.url) == bool(args.scope):
        raise GateError("VERIFY_INPUT_UNREADABLE", "give either --url (a running gate) or --scope (the local ledger)")
    checkpoint: Mapping[str, Any]  # the gate's answer as read, or the checkpoint the local ledger made
    if args.url:
        if not args.log:
            raise GateError("VERIFY_INPUT_UNREADABLE", "--url needs --log")
        log = Path(args.log)
        held = _held(log, args.chain or "")
        checkpoint, proof, anchors = _from_gate(args, held)
    else:
        checkpoint, proof, anchors, log = _from_ledger(args, _held)
    _trusted(checkpoint, anchors)
    try:
        appended = append_checkpoint(log, checkpoint, proof)
    except CheckpointLogError as exc:
        if exc.details.get("failed_checks"):
            raise _Refused(exc.message) from exc
        raise
    return {"appended": appended, "log": str(log), "chain_id": checkpoint["chain_id"],
            "tree_size": checkpoint["tree_size"], "root_hash": checkpoint["root_hash"]}


def cmd_checkpoint(args: argparse.Namespace) -> int:
    try:
        result = _save(args)
    except GateError as exc:
        # The witness's check failed (exit 1, docs/errors.md "Exit status"): the local chain does not
        # extend the checkpoint it witnessed (CHECKPOINT_REFUSED), or contradicts itself. Any
        # other refusal is gate_cli.main's to print (exit 2).
        if not isinstance(exc, _Refused) and exc.code != "CHAIN_INTEGRITY_FAILED":
            raise
        failed = exc.details.get("failed_checks", [])
        print(f"gate checkpoint: {refusal_text(exc)}" + (f" ({', '.join(failed)})" if failed else ""), file=sys.stderr)
        return FAILED
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        state = "appended to" if result["appended"] else "already held in"
        print(f"checkpoint of {result['chain_id']} at tree size {result['tree_size']} {state} {result['log']}")
    return 0
