"""`gate holds …`: held actions from the shell (issue 43, docs/holds.md), through the same
`HoldService` as the API and the inbox. The local operator acts on the ledger directly as the
principal `operator:<login>` (the login of the process's real user id, `gate_cli.context.operator`;
no option names anyone else) with the operator's rights, `resolve` and `admin` among them. Every
rule of a reviewer holds for it too: four eyes, a queue's quorum and members, another reviewer's
claim, a required justification; each step is a signed event of the scope's hold chain.

    gate holds list    --scope S [--state STATE] [--queue Q] [--priority P] [--policy ID]
                       [--mine | --unassigned] [--search TEXT] [--limit N] [--offset N] [--json]
                       (the most urgent first, then the least time left, over every page)
    gate holds show    --scope S ID [--json]                     (the hold, its facts and its events)
    gate holds resolve --scope S ID (--approve | --deny) --reason-code CODE [--note TEXT] [--json]
    gate holds claim   --scope S ID [--json]
    gate holds unclaim --scope S ID [--json]
    gate holds reassign --scope S ID --queue Q [--note TEXT] [--json]   (to another of the scope's queues)
    gate holds escalate --scope S ID [--json]                  (to the queue its queue escalates to)
    gate holds policy  --scope S [--set FILE]                    (always JSON)
    gate holds policy-approve --scope S --request-seq N [--reason R] (always JSON)

A refusal (an unknown hold, one already resolved, a malformed reason code, four eyes, a queue the
policy does not name, a queue with nowhere to escalate to, a queue that would loosen the hold's
guard, …) ends in one line, `gate holds: CODE: message`, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gate_cli.context import OPERATOR_PERMISSIONS, CliError, load_settings, open_ledger, operator
from gate_cli.help import Subparsers

if TYPE_CHECKING:
    from gate.services.holds import HoldPolicyAnswer, HoldService

STATES = ("open", "approved", "denied", "expired", "closed", "all")
MAX_LIMIT = 500
_STEPS = ("resolve", "claim", "unclaim", "reassign", "escalate")


def add_holds_parser(sub: Subparsers) -> None:
    holds = sub.add_parser("holds")
    hsub = holds.add_subparsers(dest="holds_command", required=True)
    listed = hsub.add_parser("list", help="the scope's holds, the most urgent first, then the least time left")
    _scope(listed)
    listed.add_argument("--state", default="open", help=f"one of {', '.join(STATES)} (default: open)")
    listed.add_argument("--queue", default=None, help="only this queue's holds (default: every queue)")
    listed.add_argument("--priority", default=None, help="only this priority's holds (low, normal, high, urgent; "
                                                          "default: every priority)")
    listed.add_argument("--policy", default=None, help="only the holds of this rulebook policy id (default: every one)")
    assignee = listed.add_mutually_exclusive_group()
    assignee.add_argument("--mine", dest="assignee", action="store_const", const="mine",
                          help="only the holds you (the local operator) have claimed")
    assignee.add_argument("--unassigned", dest="assignee", action="store_const", const="unassigned",
                          help="only the holds no reviewer has claimed (or whose claim has lapsed)")
    listed.add_argument("--search", default=None, help="only the holds of this target object id or source record id, or of this decision id "
                                                   "(or ids beginning so; default: no search)")
    listed.add_argument("--limit", type=int, default=50, help=f"at most this many, 1..{MAX_LIMIT} (default: 50)")
    listed.add_argument("--offset", type=int, default=0, help="skip this many of the ordered holds (default: 0)")
    listed.add_argument("--json", action="store_true", help="print the page as JSON")
    show = hsub.add_parser("show", help="one hold: its facts, the rule that held it and its signed events")
    _scope(show)
    show.add_argument("decision_id", help="the held decision's id")
    show.add_argument("--json", action="store_true", help="print the hold as JSON")
    texts = {"resolve": "approve or deny a hold (a signed vote; it closes the hold when its quorum is met)",
             "claim": "claim a hold, so other reviewers leave it to you for 30 minutes",
             "unclaim": "release your claim on a hold",
             "reassign": "move an open hold, with its votes, to another of the scope's queues (never a looser one)",
             "escalate": "move an open hold to the queue its queue escalates to, before its escalation time"}
    for name in _STEPS:
        parser = hsub.add_parser(name, help=texts[name])
        _scope(parser)
        parser.add_argument("decision_id", help="the held decision's id")
        if name == "resolve":
            vote = parser.add_mutually_exclusive_group(required=True)
            vote.add_argument("--approve", dest="vote", action="store_const", const="approve",
                              help="approve the held action (this or --deny is required)")
            vote.add_argument("--deny", dest="vote", action="store_const", const="deny", help="deny the held action (this or --approve is required)")
            parser.add_argument("--reason-code", required=True,
                                help="why, as a code: an upper-case letter, then upper-case letters, digits or _ "
                                     "(2-64 characters; one of the queue's reason_codes where it states them; "
                                     "required)")
            parser.add_argument("--note", default=None,
                                help="a note for the record (required where the queue asks for a justification; "
                                     "default: none)")
        if name == "reassign":
            parser.add_argument("--queue", required=True, help="the queue to move the hold to (required)")
            parser.add_argument("--note", default=None, help="why, for the record (default: none)")
        parser.add_argument("--json", action="store_true", help="print the signed event and the hold as JSON")
    policy = hsub.add_parser("policy", help="show the scope's hold policy, or replace it (a signed policy event)")
    _scope(policy)
    policy.add_argument("--set", dest="set_file", default=None,
                        help="a JSON file holding the whole new policy (admin; default: only show the policy)")
    approve = hsub.add_parser("policy-approve", help="approve another principal's pending hold-policy request "
                                                     "(a signed governance event; never your own)")
    _scope(approve)
    approve.add_argument("--request-seq", type=int, required=True, help="the request's seq (required)")
    approve.add_argument("--reason", default=None, help="why, for the record (default: none)")
    holds.set_defaults(func=cmd_holds)


def _scope(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scope", required=True, help="the scope (required)")


def cmd_holds(args: argparse.Namespace) -> int:
    from gate.services.root import hold_service, signing_setup

    settings = load_settings()
    ledger = open_ledger(settings)
    signing = signing_setup(settings)
    try:
        # The events this command writes link to the Inbox as the server's do (GATE_WORKBENCH_URL).
        return _run(args, hold_service(ledger, signing, settings=settings))
    finally:
        ledger.dispose()


def _run(args: argparse.Namespace, service: HoldService) -> int:
    command = args.holds_command
    if command == "list":
        if not 1 <= args.limit <= MAX_LIMIT:
            raise CliError(f"--limit must be 1..{MAX_LIMIT}")
        if args.offset < 0:
            raise CliError("--offset must be 0 or more")
        filters = {"priority": args.priority, "policy": args.policy, "assignee": args.assignee, "search": args.search}
        page = service.list(args.scope, state=args.state, queue=args.queue, limit=args.limit, offset=args.offset,
                            filters=filters, reader=operator().actor)
        print(json.dumps(page, indent=2) if args.json else list_text(args.scope, args.state, page))
        return 0
    if command == "show":
        hold = service.show(args.scope, args.decision_id)
        print(json.dumps(hold, indent=2) if args.json else show_text(hold))
        return 0
    if command == "policy":
        return _policy(args, service)
    if command == "policy-approve":
        return _print_policy(args.scope, service.approve_policy(args.scope, operator(), OPERATOR_PERMISSIONS,
                                                                args.request_seq, args.reason))
    if command == "resolve":
        body = {"decision": args.vote, "reason_code": args.reason_code, "note": args.note}
        answer = service.resolve(args.scope, operator(), OPERATOR_PERMISSIONS, args.decision_id, body)
    elif command == "reassign":
        answer = service.reassign(args.scope, operator(), OPERATOR_PERMISSIONS, args.decision_id,
                                  {"queue": args.queue, "note": args.note})
    elif command == "escalate":
        answer = service.escalate(args.scope, operator(), OPERATOR_PERMISSIONS, args.decision_id)
    else:
        answer = service.claim(args.scope, operator(), OPERATOR_PERMISSIONS, args.decision_id,
                               release=command == "unclaim")
    print(json.dumps(answer, indent=2) if args.json else step_text(answer["event"], answer["hold"]))
    return 0


def _policy(args: argparse.Namespace, service: HoldService) -> int:
    if args.set_file is None:
        return _print_policy(args.scope, {**service.policy_document(args.scope), "requested": False, "event": None})
    try:
        with open(args.set_file, encoding="utf-8") as handle:
            body = json.load(handle)
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the hold policy {args.set_file}: {exc}") from exc
    return _print_policy(args.scope, service.set_policy(args.scope, operator(), OPERATOR_PERMISSIONS, body))


def _print_policy(scope: str, answer: HoldPolicyAnswer) -> int:
    """The policy in force, its pending requests and the change's signed governance event."""
    print(json.dumps({"scope": scope, "policy": answer["policy"], "pending": answer["pending"],
                      "event": answer["event"]}, indent=2))
    event = answer["event"]
    if event is not None and event["action"] == "policy_request":
        print(f"gate holds: the change weakens the hold policy while the scope requires approvals: request "
              f"{event['seq']} waits for a second principal (gate holds policy-approve, or POST "
              "/api/holds/policy/approvals)", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- text


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns as wide as their widest cell, two spaces apart."""
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
            for row in (header, *rows)]


def list_text(scope: str, state: str, page: Mapping[str, Any]) -> str:
    """The inbox page as a table, with the scope's count of holds per state."""
    counts = page.get("counts") or {}
    tally = ", ".join(f"{name} {counts.get(name, 0)}" for name in STATES[:4])
    if not page["holds"]:
        return f"no {state} holds in scope {scope!r} ({tally})"
    rows = [(h["decision_id"], *_asked(h.get("request")), h["state"], h["priority"], h["queue"], h["deadline_at"],
             f"{len(h['approvals'])}/{h['approvals_needed']}", h["claimed_by"] or "-",
             h["rule_id"] or "-", h["reason_code"] or "-") for h in page["holds"]]
    header = ("DECISION", "ACTION", "TARGET", "AMOUNT", "STATE", "PRIORITY", "QUEUE", "DEADLINE", "APPROVALS",
              "CLAIMED BY", "RULE", "REASON")
    lines = [f"{page['count']} of {page['total']} {state} holds in scope {scope!r} ({tally})"]
    return "\n".join(lines + _table(header, rows))


def _line(value: Any, limit: int = 60) -> str:
    """A caller's value on one line of a terminal: a control character is a space, cut at `limit`."""
    text = "".join(c if c.isprintable() else " " for c in (value if isinstance(value, str) else json.dumps(value)))
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _asked(request: Mapping[str, Any] | None) -> tuple[str, str, str]:
    """A hold's requested action, target and amount (with its currency) for the list; `-` when
    the request states none or was not read as signed."""
    if not request or not request.get("signed"):
        return "-", "-", "-"
    target = request.get("target_object_id")
    system = request.get("target_system")
    where = f"{target} ({system})" if target is not None and system is not None else target or system
    amount = request.get("amount")
    money = None if amount is None else " ".join(str(v) for v in (amount, request.get("currency")) if v is not None)
    action = request.get("requested_action")
    return (_line(action, 40) if action is not None else "-", _line(where, 40) if where is not None else "-",
            _line(money, 40) if money is not None else "-")


REQUEST_LABELS = (("question", "question"), ("requested_action", "action"), ("target_system", "target system"),
                  ("target_object_id", "target"), ("amount", "amount"), ("currency", "currency"),
                  ("source_record_id", "source record"), ("workflow", "workflow"), ("requester", "requested by"))


def request_lines(request: Mapping[str, Any] | None) -> list[str]:
    """What the caller asked, first: read from the stored request bound to the record's input_hash."""
    if not request or not request.get("signed"):
        holder = (request or {}).get("requester") or "-"
        return [f"request: not shown (no stored request is bound to this record's input_hash); asked by {holder}"]
    return ["request (as signed: the stored request bound to the record's input_hash):",
            *(f"  {label:<14}{_line(request[name], 200)}" for name, label in REQUEST_LABELS
              if request.get(name) is not None)]


def show_text(hold: Mapping[str, Any]) -> str:
    """One hold: what it asks, what held it, its owner and clock, its facts and its signed events."""
    lines = [f"hold {hold['decision_id']}: {hold['state']} (queue {hold['queue']}, priority {hold['priority']})",
             *request_lines(hold.get("request")),
             f"  record_hash   {hold['record_hash']}",
             f"  held by       rule {hold['rule_id'] or '-'} ({hold['reason_code'] or 'no reason code'}) of policy "
             f"{hold['policy_id'] or '-'} {hold['policy_version'] or ''}".rstrip(),
             f"  requested by  {hold['requested_by']}",
             f"  opened        {hold['opened_at']}; deadline {hold['deadline_at']}"
             + (f"; escalates {hold['escalate_at']}" if hold.get("escalate_at") else ""),
             f"  quorum        {hold['approvals_needed']} approval(s)"
             + (f", {len(hold['approvals'])} so far" if hold["state"] == "open" else "")
             + ("; four eyes" if hold["four_eyes"] else "")
             + ("; a justification is required" if hold["require_justification"] else "")]
    if hold.get("claimed_by"):
        lines.append(f"  claimed by    {hold['claimed_by']} at {hold['claimed_at']}")
    if hold.get("resolved_at"):
        lines.append(f"  resolved      {hold['resolved_at']} by {hold['resolved_by']}")
    facts = hold.get("facts")
    lines.append("facts:")
    if isinstance(facts, Mapping) and facts:
        lines += [f"  {name}: {json.dumps(value, ensure_ascii=False)}" for name, value in facts.items()]
    else:
        lines.append(f"  {json.dumps(facts, ensure_ascii=False)}")
    lines.append("events:")
    lines += [f"  {event_line(event)}" for event in hold.get("events") or []] or ["  none yet"]
    return "\n".join(lines)


def event_line(event: Mapping[str, Any]) -> str:
    """`#seq time action [vote CODE] [queue] by actor [-> outcome]: note`."""
    words = [f"#{event['seq']}", str(event["created_at"]), str(event["action"])]
    if event.get("vote"):
        words += [str(event["vote"]), str(event.get("reason_code") or "")]
    if event["action"] in ("reassign", "escalate") and event.get("queue"):
        words.append(f"to {event['queue']}")
    words.append(f"by {event['actor']}")
    if event.get("outcome"):
        words.append(f"-> {event['outcome']}")
    line = " ".join(word for word in words if word)
    return line + (f": {event['note']}" if event.get("note") else "")


def step_text(event: Mapping[str, Any], hold: Mapping[str, Any]) -> str:
    """What one signed step did, and the hold after it."""
    lines = [f"hold {hold['decision_id']}: recorded {event_line(event)}", f"  event_hash {event['event_hash']}"]
    if hold["state"] == "open":
        claim = f"; claimed by {hold['claimed_by']}" if hold.get("claimed_by") else ""
        lines.append(f"the hold is open: {len(hold['approvals'])} of {hold['approvals_needed']} approvals{claim}")
    else:
        lines.append(f"the hold is {hold['state']}")
    return "\n".join(lines)
