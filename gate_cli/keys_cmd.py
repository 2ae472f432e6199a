"""`gate keys`: API keys (created, listed, disabled, enabled, granted rights under the scope's
governance) and the signing keyring. `create_key` is also what the demo and the tests create keys with."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.keys.apikeys import HOLDER_REQUIRED, PERMISSIONS, new_api_key, parse_permissions, permissions_text
from gate.principals import Permissions, holder_id, parse_holder
from gate.settings import DEFAULT_PLANS, Settings
from gate_cli.context import (
    OPERATOR_PERMISSIONS,
    CliError,
    load_settings,
    now,
    open_ledger,
    operator,
    prepare_home,
)
from gate_cli.help import HelpFormatter, Subparsers

if TYPE_CHECKING:
    from gate.keys.signing import Keyring
    from gate.services.keys import KeyChange, KeyService


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
            "disabled_at": None,
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


# --------------------------------------------------------------------------- parser


def _plans_help() -> str:
    plans = ", ".join(f"{name} ({limits['rate_limit']:,}/min, {limits['monthly_cap']:,}/month)"
                      for name, limits in DEFAULT_PLANS.items())
    return f"plan: {plans}, or one defined in GATE_PLANS"



def _holder_rights() -> str:
    """The permissions that need a stated holder, in the vocabulary's order: "release, … or admin"."""
    names = [name for name in PERMISSIONS if name in HOLDER_REQUIRED]
    return f"{', '.join(names[:-1])} or {names[-1]}"



def add_keys_parser(sub: Subparsers) -> None:
    keys = sub.add_parser("keys", formatter_class=HelpFormatter)
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
