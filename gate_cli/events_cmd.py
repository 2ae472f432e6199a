"""`gate events …`: the operator's side of events out (docs/events.md), through the same
`EventService` as the API. Subscriptions are made as the local operator (`operator:<login>`).

    gate events subscribe   --scope S --url URL [--type T ...] [--from-beginning]   (prints the secret once)
    gate events list        --scope S
    gate events rotate      --scope S --id SUB [--overlap-seconds N]                 (prints the new secret once)
    gate events enable|disable --scope S --id SUB [--skip-pruned]
    gate events replay      --scope S --id SUB (--seq N | --since TIME --until TIME)
    gate events deliveries  --scope S --id SUB [--json]
    gate events dispatch    [--once] [--interval SECONDS]        (one pass; without --once, `gate dispatch`)
"""

from __future__ import annotations

import argparse
import dataclasses
import getpass
import json
from typing import TYPE_CHECKING

from gate.settings import Settings
from gate.strict_json import JsonValue
from gate_cli.context import load_settings, open_ledger
from gate_cli.help import Subparsers, add_id_argument

if TYPE_CHECKING:
    from gate.services.events import EventService


def add_events_parser(sub: Subparsers) -> None:
    events = sub.add_parser("events")
    esub = events.add_subparsers(dest="events_command", required=True)
    subscribe = esub.add_parser("subscribe", help="subscribe a webhook URL (its secret is printed once)")
    _scope(subscribe)
    subscribe.add_argument("--url", required=True, help="the receiver's http(s) URL (required)")
    subscribe.add_argument("--type", dest="types", action="append", default=None,
                           help="an event type it wants, repeatable (default: every type)")
    subscribe.add_argument("--from-beginning", action="store_true",
                           help="deliver every stored event too (default: only events after now)")
    subscribe.add_argument("--sign-ed25519", action="store_true",
                           help="deliveries also carry the gate's Ed25519 signature (v1a; default: HMAC only)")
    listed = esub.add_parser("list", help="the scope's subscriptions (never their secrets)")
    _scope(listed)
    for name, text in (("rotate", "a new secret (printed once); the old one signs beside it for the overlap"),
                       ("enable", "deliver again from where it stopped"), ("disable", "stop delivering"),
                       ("replay", "send one event or a time range again"),
                       ("deliveries", "success rate, latency, lag and the last failures")):
        parser = esub.add_parser(name, help=text)
        _scope(parser)
        add_id_argument(parser, "subscription_id", "the subscription's id", alias="--id")
        if name == "rotate":
            parser.add_argument("--overlap-seconds", type=int, default=None,
                                help="how long the old secret keeps signing (default: 86400)")
        if name == "replay":
            parser.add_argument("--seq", type=int, default=None, help="one event's seq (default: none; or --since/--until)")
            parser.add_argument("--since", default=None, help="ISO 8601 start of a range, with --until (default: none)")
            parser.add_argument("--until", default=None, help="ISO 8601 end of a range, with --since (default: none)")
        if name == "enable":
            parser.add_argument("--skip-pruned", action="store_true",
                                help="resume from the oldest kept event when events after the cursor were pruned "
                                     "(default: refuse, EVENTS_PRUNED)")
        if name == "deliveries":
            parser.add_argument("--json", action="store_true", help="print JSON")
    dispatch = esub.add_parser("dispatch", help="one dispatch pass (--once), or `gate dispatch` at this interval")
    dispatch.add_argument("--once", action="store_true", help="one pass, then exit (default: run until stopped)")
    dispatch.add_argument("--interval", type=float, default=1.0, help="seconds between passes (default: 1.0)")
    events.set_defaults(func=cmd_events)


def _scope(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scope", required=True, help="the scope (required)")


def cmd_events(args: argparse.Namespace) -> int:
    from gate.services.root import event_service, signing_setup

    settings = load_settings()
    ledger = open_ledger(settings)
    service = event_service(ledger, signing_setup(settings), settings=settings)
    try:
        return _run(args, service, settings)
    finally:
        ledger.dispose()


def _run(args: argparse.Namespace, service: EventService, settings: Settings) -> int:
    from workbench.reports.deliveries import delivery_lines

    command = args.events_command
    if command == "dispatch":
        return _dispatch(args, service, settings)
    if command == "subscribe":
        body: dict[str, JsonValue] = {"url": args.url, "from": "beginning" if args.from_beginning else "now"}
        if args.types:
            body["event_types"] = args.types
        if args.sign_ed25519:
            body["sign_ed25519"] = True
        view, secret = service.subscribe(args.scope, "operator:" + getpass.getuser(), body)
        print(json.dumps({"subscription": view, "secret": secret}, indent=2))
        return 0
    if command == "list":
        print(json.dumps(service.listed(args.scope), indent=2))
        return 0
    if command == "rotate":
        view, secret = service.rotate(args.scope, args.subscription_id, args.overlap_seconds)
        print(json.dumps({"subscription": view, "secret": secret}, indent=2))
        return 0
    if command in ("enable", "disable"):
        view = service.set_status(args.scope, args.subscription_id, "active" if command == "enable" else "disabled",
                                  getattr(args, "skip_pruned", False))
        print(json.dumps(view, indent=2))
        return 0
    if command == "replay":
        replay = {"seq": args.seq} if args.seq is not None else {"since": args.since, "until": args.until}
        print(f"queued {service.replay(args.scope, args.subscription_id, replay)} event(s)")
        return 0
    report = service.deliveries(args.scope, args.subscription_id)
    print(json.dumps(report, indent=2) if args.json else "\n".join(delivery_lines(report)))
    return 0


def _dispatch(args: argparse.Namespace, service: EventService, settings: Settings) -> int:
    from gate.events.stream import JetStreamPublisher
    from gate.services.notify import notifier_from_settings

    # What leaves is masked by each scope's privacy rules (docs/privacy.md), as `gate serve` masks it.
    stream = (JetStreamPublisher(service.outbox, settings.nats_url, settings.nats_stream, body_of=service.delivery.body_of)
              if settings.nats_url else None)
    notifier = notifier_from_settings(service.outbox.ledger, settings, service.safeguards,
                                      privacy=service.delivery.privacy)  # e-mail, Slack
    tasks = dict(notifier.tasks()) if notifier is not None else {}
    if args.once:
        posts = service.delivery.dispatch_once(f"cli-{getpass.getuser()}")
        published = stream.publish_pending() if stream is not None else 0
        notices = sum(task() for task in tasks.values())
        print(f"posted {posts} webhook delivery(ies), published {published} event(s), sent {notices} notice(s)")
        return 0
    # Running until stopped is `gate dispatch` (every background worker), at this interval.
    from gate_cli.dispatch_cmd import cmd_dispatch

    interval_ms = max(50, int(args.interval * 1000))
    return cmd_dispatch(args, dataclasses.replace(settings, events_interval_ms=interval_ms))
