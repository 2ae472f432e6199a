"""A scope's hold policy, pure: who owns a held action, by when, and what closes it (docs/holds.md).

A record whose verdict holds the action (`review`; `unclear` in the compact form) opens a hold.
The hold policy is declared per scope outside the Rulebook v1 document, so records keep verifying
with the reference verifier:

* `queues`: named owners. Each has a `deadline_seconds` (silence past it expires the hold, which
  never approves), a `quorum` (`any`: one reviewer; `two`: two distinct reviewers approve;
  `all`: every principal in `members` approves), whether a written justification (a note) is
  required, and an optional escalation (`escalate_after_seconds` then `escalate_to` another
  queue) before the deadline.
* `routes`: which queue and priority a held record goes to, matched by `policy_id` and,
  optionally, the rule that held it (`matched_rule_id`); the first match wins, else the
  `default_queue` at `normal` priority.
* `four_eyes`: the principal that asked for the action (the decide's API key) never resolves it.
* `queues.<name>.notify` (optional): the reviewers' channels of a queue, e-mail addresses and a
  Slack channel, told of each hold at once or in a digest every `every_seconds`
  (`gate.services.notify` sends them through the events outbox).
* `queues.<name>.show` (optional): the request members and facts those channels state; the rest
  is masked (`gate.disclosure`; absent: the question, requested action, target and amount).
* `queues.<name>.reason_codes` (optional): the only reason codes a vote of that queue takes,
  `{"approve": [...], "deny": [...]}`, and the lists the Inbox offers (`reason_codes`; absent: a
  vote takes any code of the pattern, and the Inbox offers `DEFAULT_REASON_CODES`).

Any one deny closes a hold as denied, whatever the quorum: a hold never approves on fewer
approvals than its quorum names. A PUT states the whole policy; nothing falls back to a default
once a policy exists. Nothing here reads a clock or a database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from gate import bodies
from gate.disclosure import DEFAULT_SHOW
from gate.errors import GateError

SCHEMA = "hold-policy"  # gate/bodies/hold-policy.schema.json: the shape of a PUT, and these bounds
_SHAPE = bodies.schema(SCHEMA)["properties"]
_QUEUE = _SHAPE["queues"]["additionalProperties"]
_ROUTE = _SHAPE["routes"]["items"]
QUORUMS: tuple[str, ...] = tuple(_QUEUE["properties"]["quorum"]["enum"])
# ascending urgency; the inbox sorts urgent first
PRIORITIES: tuple[str, ...] = tuple(_ROUTE["properties"]["priority"]["enum"])
DEFAULT_QUEUE = "default"
# an agent's tool call may wait seconds; a deal desk, weeks
DEADLINE_RANGE: tuple[int, int] = (_QUEUE["properties"]["deadline_seconds"]["minimum"],
                                   _QUEUE["properties"]["deadline_seconds"]["maximum"])
MAX_QUEUES: int = _SHAPE["queues"]["maxProperties"]
MAX_ROUTES: int = _SHAPE["routes"]["maxItems"]
MAX_MEMBERS: int = _QUEUE["properties"]["members"]["maxItems"]
_QUEUE_MEMBERS = frozenset(_QUEUE["required"])
_NOTIFY = _QUEUE["properties"]["notify"]["properties"]
MAX_EMAILS: int = _NOTIFY["email"]["maxItems"]
# every_seconds: 0 (each hold at once) or a digest this often
DIGEST_RANGE: tuple[int, int] = (_NOTIFY["every_seconds"]["anyOf"][1]["minimum"],
                                 _NOTIFY["every_seconds"]["anyOf"][1]["maximum"])
URGENT = ("high", "urgent")  # priorities told at once whatever the digest


def _invalid(message: str, **extra: Any) -> GateError:
    return GateError("HOLD_POLICY_INVALID", message, **extra)


class SlackJSON(TypedDict):
    channel: str


class NotifyChannels(TypedDict, total=False):
    """A queue's channels, each stated only when set."""

    email: list[str]
    slack: SlackJSON


class NotifyJSON(NotifyChannels):
    """A queue's channels and how often they are told, as a policy states them."""

    every_seconds: int


class ReasonCodes(TypedDict):
    """The reason codes a reviewer picks from, per vote."""

    approve: list[str]
    deny: list[str]


class QueueJSON(TypedDict):
    """A queue as a policy states it (`notify` only when it has channels)."""

    deadline_seconds: int
    quorum: str
    members: list[str]
    require_justification: bool
    escalate_after_seconds: int | None
    escalate_to: str | None
    notify: NotRequired[NotifyJSON]
    show: NotRequired[list[str]]
    reason_codes: NotRequired[ReasonCodes]


class RouteJSON(TypedDict):
    policy_id: str
    rule_id: str | None
    queue: str
    priority: str


class HoldPolicyJSON(TypedDict):
    """A whole hold policy as a PUT states it (gate/bodies/hold-policy.schema.json)."""

    default_queue: str
    four_eyes: bool
    queues: dict[str, QueueJSON]
    routes: list[RouteJSON]


@dataclass(frozen=True, slots=True)
class Notify:
    """A queue's reviewers' channels: e-mail addresses, a Slack channel id, and how often."""

    email: tuple[str, ...] = ()
    slack_channel: str | None = None
    every_seconds: int = 0  # 0: each hold at once; N: a digest every N seconds (high, urgent: at once)

    def to_json(self) -> NotifyJSON:
        out: NotifyChannels = {}
        if self.email:
            out["email"] = list(self.email)
        if self.slack_channel is not None:
            out["slack"] = {"channel": self.slack_channel}
        return {**out, "every_seconds": self.every_seconds}

    def at_once(self, priority: str) -> bool:
        """Whether a hold of this priority is told at once (else in the next digest)."""
        return self.every_seconds == 0 or priority in URGENT


@dataclass(frozen=True, slots=True)
class Queue:
    """One owner of held actions."""

    name: str
    deadline_seconds: int = 86_400
    quorum: str = "any"
    members: tuple[str, ...] = ()
    require_justification: bool = False
    escalate_after_seconds: int | None = None
    escalate_to: str | None = None
    notify: Notify | None = None
    show: tuple[str, ...] = DEFAULT_SHOW  # what its channels state (gate.disclosure)
    # the only codes its votes take, (approve, deny); None: any code of the pattern
    codes: tuple[tuple[str, ...], tuple[str, ...]] | None = None

    def to_json(self) -> QueueJSON:
        out: QueueJSON = {"deadline_seconds": self.deadline_seconds, "quorum": self.quorum, "members": list(self.members),
               "require_justification": self.require_justification,
               "escalate_after_seconds": self.escalate_after_seconds, "escalate_to": self.escalate_to}
        if self.notify is not None:  # a queue without channels reads as it did before they existed
            out["notify"] = self.notify.to_json()
        if self.show != DEFAULT_SHOW:  # so does a queue that shows what every queue did by default
            out["show"] = list(self.show)
        if self.codes is not None:
            out["reason_codes"] = {"approve": list(self.codes[0]), "deny": list(self.codes[1])}
        return out

    def takes(self, decision: str, reason_code: str) -> bool:
        """Whether a vote `decision` (approve, deny) of this queue may give `reason_code`."""
        return self.codes is None or reason_code in self.codes[0 if decision == "approve" else 1]

    def approvals_needed(self) -> int:
        """How many distinct approving principals close a hold of this queue as approved."""
        if self.quorum == "all":
            return len(self.members)
        return 2 if self.quorum == "two" else 1

    def guard(self) -> Guard:
        """What approves a hold of this queue."""
        return Guard(self.approvals_needed(), frozenset(self.members) if self.quorum == "all" else None,
                     self.require_justification)


@dataclass(frozen=True, slots=True)
class Guard:
    """What approves a held action: `approvals_needed` distinct holders, every one of `members`
    among them (quorum `all`; None: any holder that may resolve), each vote with a note when
    `require_justification`. One guard is looser than another when it lets a hold be approved by
    fewer holders, by other holders, or without a note."""

    approvals_needed: int
    members: frozenset[str] | None = None
    require_justification: bool = False

    def loosened_by(self, other: Guard) -> list[str]:
        """What `other` lets through that this guard does not: fewer approvals (`quorum`), a
        member it no longer requires (`members`), a vote without a note (`require_justification`)."""
        out = []
        if other.approvals_needed < self.approvals_needed:
            out.append("quorum")
        if self.members is not None and (other.members is None or not self.members <= other.members):
            out.append("members")
        if self.require_justification and not other.require_justification:
            out.append("require_justification")
        return out


@dataclass(frozen=True, slots=True)
class Route:
    policy_id: str
    queue: str
    rule_id: str | None = None
    priority: str = "normal"

    def to_json(self) -> RouteJSON:
        return {"policy_id": self.policy_id, "rule_id": self.rule_id, "queue": self.queue, "priority": self.priority}

    def matches(self, policy_id: Any, rule_id: Any) -> bool:
        return self.policy_id == policy_id and (self.rule_id is None or self.rule_id == rule_id)


@dataclass(frozen=True, slots=True)
class Assignment:
    """Where a held record goes: its queue, priority and the queue's timings."""

    queue: Queue
    priority: str


@dataclass(frozen=True, slots=True)
class HoldPolicy:
    """A scope's hold policy (`GET/PUT /api/holds/policy`)."""

    default_queue: str = DEFAULT_QUEUE
    four_eyes: bool = True
    queues: tuple[Queue, ...] = field(default_factory=lambda: (Queue(DEFAULT_QUEUE),))
    routes: tuple[Route, ...] = ()

    def to_json(self) -> HoldPolicyJSON:
        return {"default_queue": self.default_queue, "four_eyes": self.four_eyes,
                "queues": {q.name: q.to_json() for q in self.queues},
                "routes": [r.to_json() for r in self.routes]}

    def queue(self, name: str | None) -> Queue | None:
        """The queue of this name (None: none, as for a queue with no escalation)."""
        return next((q for q in self.queues if q.name == name), None)

    def path(self, name: str | None) -> tuple[Queue, ...]:
        """The queue of this name and the queues its escalations move a hold to, in order."""
        out: list[Queue] = []
        queue = self.queue(name)
        while queue is not None and queue not in out:  # from_json refuses a loop; a read is bounded anyway
            out.append(queue)
            queue = self.queue(queue.escalate_to)
        return tuple(out)

    def reach(self, policy_id: Any, rule_id: Any) -> tuple[Queue, ...]:
        """Every queue a record held under `policy_id` by `rule_id` reaches by this policy: where
        it is routed (or the default queue) and the escalations from there."""
        return self.path(self.assign(policy_id, rule_id).queue.name)

    def assign(self, policy_id: Any, rule_id: Any) -> Assignment:
        """The queue and priority of a record held under `policy_id` by `rule_id`."""
        for route in self.routes:
            if route.matches(policy_id, rule_id):
                queue = self.queue(route.queue)
                if queue is not None:  # always: from_json checks every route's queue exists
                    return Assignment(queue, route.priority)
        return Assignment(self.queue(self.default_queue) or Queue(self.default_queue), "normal")

    @classmethod
    def from_json(cls, body: Any) -> HoldPolicy:
        """A whole policy as a PUT states it: every member present and valid (HOLD_POLICY_INVALID).
        The shape is `gate/bodies/hold-policy.schema.json`; what it cannot say is checked here."""
        if isinstance(body, Mapping):
            unknown, missing = bodies.closed_members(SCHEMA, body)
            if unknown or missing:
                raise _invalid("a PUT states the whole hold policy: " + "; ".join(
                    ([f"unknown member(s) {', '.join(unknown)}"] if unknown else [])
                    + ([f"missing {', '.join(missing)}"] if missing else [])), unknown=unknown, missing=missing)
        bodies.check(SCHEMA, body, "HOLD_POLICY_INVALID")
        queues = tuple(_queue(name, spec) for name, spec in body["queues"].items())
        names = {q.name for q in queues}
        if body["default_queue"] not in names:
            raise _invalid("default_queue must name one of the queues")
        policy = cls(body["default_queue"], body["four_eyes"], queues, _routes(body["routes"], names))
        _check_escalations(policy)
        return policy


def _queue(name: str, spec: Mapping[str, Any]) -> Queue:
    """A queue the schema has passed: the rules across its members."""
    where = f"queues.{name}"
    if not all(member.isprintable() for member in spec["members"]):
        raise _invalid(f"{where}.members must be distinct principal ids (at most {MAX_MEMBERS})")
    if spec["quorum"] == "all" and len(spec["members"]) < 2:
        raise _invalid(f"{where}: quorum 'all' needs at least two members")
    deadline, after, to = spec["deadline_seconds"], spec["escalate_after_seconds"], spec["escalate_to"]
    if (after is None) != (to is None):
        raise _invalid(f"{where}: escalate_after_seconds and escalate_to go together")
    if after is not None and after >= deadline:
        raise _invalid(f"{where}: escalation must come before the deadline")
    return Queue(name, deadline, spec["quorum"], tuple(spec["members"]), spec["require_justification"], after, to,
                 _notify(where, spec.get("notify")), tuple(spec.get("show", DEFAULT_SHOW)),
                 _codes(spec.get("reason_codes")))


def _codes(spec: Mapping[str, Any] | None) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """A queue's reason codes the schema has passed (absent: None, any code)."""
    return None if spec is None else (tuple(spec["approve"]), tuple(spec["deny"]))


def _notify(where: str, spec: Mapping[str, Any] | None) -> Notify | None:
    """A queue's channels the schema has passed (`{"email": [...], "slack": {"channel": "C..."},
    "every_seconds": 0}`; null or absent: none): the addresses distinct whatever their case."""
    if spec is None:
        return None
    email = tuple(spec.get("email", ()))
    if len({address.lower() for address in email}) != len(email):
        raise _invalid(f"{where}.notify.email must be 1 to {MAX_EMAILS} distinct e-mail addresses "
                       f"(whatever their case)")
    slack = spec.get("slack")
    return Notify(email, None if slack is None else slack["channel"], spec["every_seconds"])


def _routes(body: list[Mapping[str, Any]], names: set[str]) -> tuple[Route, ...]:
    """Routes the schema has passed: each names one of the queues."""
    for index, spec in enumerate(body):
        if spec["queue"] not in names:
            raise _invalid(f"routes[{index}].queue must name one of the queues")
    return tuple(Route(spec["policy_id"], spec["queue"], spec["rule_id"], spec["priority"]) for spec in body)


def _check_escalations(policy: HoldPolicy) -> None:
    """Every escalation names a queue, and following them never comes back to a queue."""
    for start in policy.queues:
        seen = {start.name}
        queue: Queue | None = start
        while queue is not None and queue.escalate_to is not None:
            if queue.escalate_to in seen:
                raise _invalid(f"escalation from queue {start.name!r} comes back to {queue.escalate_to!r}")
            nxt = policy.queue(queue.escalate_to)
            if nxt is None:
                raise _invalid(f"queue {queue.name!r}: escalate_to must name one of the queues")
            seen.add(nxt.name)
            queue = nxt


def recipients(queues: Iterable[Queue | None]) -> frozenset[str]:
    """Every e-mail address (whatever its case) and Slack channel the queues' channels tell."""
    out: set[str] = set()
    for queue in queues:
        notify = queue.notify if queue is not None else None
        if notify is not None:
            out |= {f"email:{a.lower()}" for a in notify.email}
            out |= {f"slack:{notify.slack_channel}"} if notify.slack_channel else set()
    return frozenset(out)


def disclosed(queues: Iterable[Queue | None]) -> frozenset[str]:
    """Every (recipient, name) the queues' channels state a value of, as `"<recipient> <name>"`:
    each recipient of a queue (`recipients`) with each name of its `show`."""
    out: set[str] = set()
    for queue in queues:
        if queue is not None:
            out |= {f"{recipient} {name}" for recipient in recipients((queue,)) for name in queue.show}
    return frozenset(out)


def move_loosens(guard: Guard, reached: frozenset[str], target: Queue) -> list[str]:
    """What moving a hold of `guard`, whose facts may reach `reached` (`recipients` and
    `disclosed` of the queues it may reach), to `target` would let through (docs/holds.md,
    "Moving a hold"): a looser guard (`Guard.loosened_by`), `notify` when the target's channels
    would tell a recipient the hold may not reach, `show` when they would state to a recipient it
    already reaches a value that recipient had masked (a new recipient is `notify`'s, as in
    `_notify_weakenings`). [] : the move keeps the hold as guarded and as contained as it is."""
    widened = {entry for entry in disclosed((target,)) - reached if entry.split(" ", 1)[0] in reached}
    return (guard.loosened_by(target.guard()) + (["notify"] if recipients((target,)) - reached else [])
            + (["show"] if widened else []))


def _lets_through(before: Sequence[Queue], after: Sequence[Queue]) -> bool:
    """Whether a held record that reaches the queues `after` instead of `before` can be approved
    by fewer or other holders, or without a note (some queue of `after` is looser than every
    queue of `before`), or its facts reach a recipient none of `before` tells."""
    looser = any(all(b.guard().loosened_by(a.guard()) for b in before) for a in after)
    return looser or bool(recipients(after) - recipients(before)) or bool(disclosed(after) - disclosed(before))


def _notify_weakenings(before: Queue | None, after: Queue) -> list[str]:
    """A channel added: a hold's facts then leave the gate for an address or a Slack channel they
    did not reach before (as `decision_created` turned on does); `show` widened: a request member
    or fact leaves the gate for a channel that had it masked (issue 65). A channel removed, a
    narrower `show` or a longer digest is not: a hold nobody hears of expires, which never approves."""
    out = ["notify"] if recipients((after,)) - recipients((before,)) else []
    widened = disclosed((after,)) - disclosed((before,))
    if before is not None and {entry for entry in widened if entry.split(" ", 1)[0] in recipients((before,))}:
        out.append("show")
    return out


def _timing_weakenings(before: Queue, after: Queue) -> list[str]:
    """A later deadline, an escalation removed or later: a held action waits longer for its guard."""
    out = []
    if after.deadline_seconds > before.deadline_seconds:
        out.append("deadline_seconds")
    if before.escalate_after_seconds is not None and (
            after.escalate_after_seconds is None or after.escalate_after_seconds > before.escalate_after_seconds):
        out.append("escalate_after_seconds")
    return out


def _queue_weakenings(before: Queue, after: Queue) -> list[str]:
    """The members by which `after` loosens `before`'s guard on a held action: its guard looser
    (`Guard.loosened_by`: fewer approvals, a member no longer required, no written
    justification), a later deadline, an escalation removed or later."""
    return before.guard().loosened_by(after.guard()) + _timing_weakenings(before, after)


def _route_keys(before: HoldPolicy, after: HoldPolicy) -> list[tuple[str, str | None]]:
    """One (policy id, rule id) per class of records the routes tell apart: each rule a route
    names, and any other rule of a named policy (None: only a route for every rule matches it)."""
    routes = (*before.routes, *after.routes)
    return sorted({(r.policy_id, r.rule_id) for r in routes if r.rule_id is not None}) + sorted(
        {(r.policy_id, None) for r in routes})


def weakenings(before: HoldPolicy, after: HoldPolicy) -> tuple[str, ...]:
    """The members `after` weakens (docs/holds.md, "Changing the hold policy"), derived from what
    the change lets through: four eyes off; a queue removed; a queue's own guard loosened, its
    deadline or escalation later (`_queue_weakenings`); a reviewers' channel added; and, for every
    queue a held record reaches (a queue and its escalations, `escalate_to`; where a route or the
    default sends a class of records, `routes[P/R]`, `default_queue`), a queue whose guard is
    looser than every queue it reached before, or a recipient it did not reach (`_lets_through`).
    A move never reaches more (`move_loosens`), so a reassignment adds nothing to compare."""
    out = ["four_eyes"] if before.four_eyes and not after.four_eyes else []
    for queue in before.queues:
        kept = after.queue(queue.name)
        if kept is None:
            out.append(f"queues.{queue.name}")
            continue
        out += [f"queues.{queue.name}.{member}" for member in _queue_weakenings(queue, kept)]
        out += [f"queues.{queue.name}.{member}" for member in _notify_weakenings(queue, kept)]
        if _lets_through(before.path(queue.name), after.path(kept.name)[1:]):
            out.append(f"queues.{queue.name}.escalate_to")
    for queue in after.queues:
        if before.queue(queue.name) is None:  # a new queue's channels are new recipients too
            out += [f"queues.{queue.name}.{member}" for member in _notify_weakenings(None, queue)]
    for policy_id, rule_id in _route_keys(before, after):
        went, goes = before.assign(policy_id, rule_id).queue, after.assign(policy_id, rule_id).queue
        if _moved_through(before, after, went, goes):
            out.append(f"routes[{policy_id}/{rule_id or '*'}]")
    if _moved_through(before, after, before.assign(None, None).queue, after.assign(None, None).queue):
        out.append("default_queue")
    return tuple(dict.fromkeys(out))


def _moved_through(before: HoldPolicy, after: HoldPolicy, went: Queue, goes: Queue) -> bool:
    """Whether records that went to `went` (and its escalations) now reach more through `goes`, or
    wait longer (a queue of the same name is compared queue by queue above)."""
    return went.name != goes.name and (bool(_timing_weakenings(went, goes)) or _lets_through(
        before.path(went.name) or (went,), after.path(goes.name) or (goes,)))


# The reason codes the Inbox offers for a queue whose policy states none (issue 65: picked, not
# typed); such a queue's votes take any code of the pattern.
DEFAULT_REASON_CODES: ReasonCodes = {
    "approve": ["CHECKED_WITH_REQUESTER", "WITHIN_POLICY", "EXCEPTION_JUSTIFIED"],
    "deny": ["OUTSIDE_POLICY", "NEEDS_MORE_EVIDENCE", "DUPLICATE_REQUEST", "NOT_RECOGNISED"],
}


def reason_codes(queue: Queue | None) -> ReasonCodes:
    """The reason codes a reviewer of `queue` picks from (the Inbox's lists): the queue's
    `reason_codes`, or the defaults where it states none."""
    if queue is not None and queue.codes is not None:
        return {"approve": list(queue.codes[0]), "deny": list(queue.codes[1])}
    return {"approve": list(DEFAULT_REASON_CODES["approve"]), "deny": list(DEFAULT_REASON_CODES["deny"])}


def check_reason_code(queue: Queue | None, decision: str, reason_code: str) -> None:
    """A vote's reason code against its queue's list (`Queue.takes`): HOLD_RESOLUTION_INVALID,
    naming the codes the queue takes, and nothing changes."""
    if queue is not None and not queue.takes(decision, reason_code):
        codes = reason_codes(queue)["approve" if decision == "approve" else "deny"]
        raise GateError("HOLD_RESOLUTION_INVALID", f"reason_code {reason_code!r} is not one of queue {queue.name!r}'s "
                        f"{decision} codes: {', '.join(codes)}", reason_codes=codes)
