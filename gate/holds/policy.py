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

Any one deny closes a hold as denied, whatever the quorum: a hold never approves on fewer
approvals than its quorum names. A PUT states the whole policy; nothing falls back to a default
once a policy exists. Nothing here reads a clock or a database.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gate.errors import GateError

QUORUMS = ("any", "two", "all")
PRIORITIES = ("low", "normal", "high", "urgent")  # ascending urgency; the inbox sorts urgent first
DEFAULT_QUEUE = "default"
DEADLINE_RANGE = (5, 30 * 86_400)  # an agent's tool call may wait seconds; a deal desk, weeks
MAX_QUEUES = 50
MAX_ROUTES = 200
MAX_MEMBERS = 50
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,159}$")
_QUEUE_MEMBERS = frozenset({"deadline_seconds", "quorum", "members", "require_justification",
                            "escalate_after_seconds", "escalate_to"})
_OPTIONAL_QUEUE_MEMBERS = frozenset({"notify"})
_NOTIFY_MEMBERS = frozenset({"email", "slack", "every_seconds"})
MAX_EMAILS = 10
MAX_EMAIL_LENGTH = 254
DIGEST_RANGE = (60, 86_400)  # every_seconds: 0 (each hold at once) or a digest this often
URGENT = ("high", "urgent")  # priorities told at once whatever the digest
# An address a reviewer reads: no display name, comment, space or line break (nothing that could
# add a header or a second recipient), one @, a domain of labels.
_EMAIL = re.compile(r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
_SLACK_CHANNEL = re.compile(r"^[CG][A-Z0-9]{8,20}$")  # a channel's id (C...; G... for an older private one)
_ROUTE_MEMBERS = frozenset({"policy_id", "rule_id", "queue", "priority"})
_POLICY_MEMBERS = ("default_queue", "four_eyes", "queues", "routes")


def _invalid(message: str, **extra: Any) -> GateError:
    return GateError("HOLD_POLICY_INVALID", message, **extra)


@dataclass(frozen=True, slots=True)
class Notify:
    """A queue's reviewers' channels: e-mail addresses, a Slack channel id, and how often."""

    email: tuple[str, ...] = ()
    slack_channel: str | None = None
    every_seconds: int = 0  # 0: each hold at once; N: a digest every N seconds (high, urgent: at once)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.email:
            out["email"] = list(self.email)
        if self.slack_channel is not None:
            out["slack"] = {"channel": self.slack_channel}
        out["every_seconds"] = self.every_seconds
        return out

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

    def to_json(self) -> dict[str, Any]:
        out = {"deadline_seconds": self.deadline_seconds, "quorum": self.quorum, "members": list(self.members),
               "require_justification": self.require_justification,
               "escalate_after_seconds": self.escalate_after_seconds, "escalate_to": self.escalate_to}
        if self.notify is not None:  # a queue without channels reads as it did before they existed
            out["notify"] = self.notify.to_json()
        return out

    def approvals_needed(self) -> int:
        """How many distinct approving principals close a hold of this queue as approved."""
        if self.quorum == "all":
            return len(self.members)
        return 2 if self.quorum == "two" else 1


@dataclass(frozen=True, slots=True)
class Route:
    policy_id: str
    queue: str
    rule_id: str | None = None
    priority: str = "normal"

    def to_json(self) -> dict[str, Any]:
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

    def to_json(self) -> dict[str, Any]:
        return {"default_queue": self.default_queue, "four_eyes": self.four_eyes,
                "queues": {q.name: q.to_json() for q in self.queues},
                "routes": [r.to_json() for r in self.routes]}

    def queue(self, name: str | None) -> Queue | None:
        """The queue of this name (None: none, as for a queue with no escalation)."""
        return next((q for q in self.queues if q.name == name), None)

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
        """A whole policy as a PUT states it: every member present and valid (HOLD_POLICY_INVALID)."""
        if not isinstance(body, Mapping):
            raise _invalid("the hold policy must be a JSON object")
        unknown = sorted(set(map(str, body)) - set(_POLICY_MEMBERS))
        missing = [name for name in _POLICY_MEMBERS if name not in body]
        if unknown or missing:
            raise _invalid("a PUT states the whole hold policy: " + "; ".join(
                ([f"unknown member(s) {', '.join(unknown)}"] if unknown else [])
                + ([f"missing {', '.join(missing)}"] if missing else [])), unknown=unknown, missing=missing)
        if not isinstance(body["four_eyes"], bool):
            raise _invalid("four_eyes must be true or false")
        queues = _queues(body["queues"])
        names = {q.name for q in queues}
        if body["default_queue"] not in names:
            raise _invalid("default_queue must name one of the queues")
        policy = cls(body["default_queue"], body["four_eyes"], queues, _routes(body["routes"], names))
        _check_escalations(policy)
        return policy


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise _invalid(f"{what} must match {_NAME.pattern}")
    return value


def _seconds(value: Any, what: str) -> int:
    low, high = DEADLINE_RANGE
    if type(value) is not int or not low <= value <= high:
        raise _invalid(f"{what} must be a whole number of seconds from {low} to {high}")
    return value


def _queues(body: Any) -> tuple[Queue, ...]:
    if not isinstance(body, Mapping) or not body or len(body) > MAX_QUEUES:
        raise _invalid(f"queues must be an object of 1 to {MAX_QUEUES} named queues")
    return tuple(_queue(_name(name, "a queue name"), spec) for name, spec in body.items())


def _queue(name: str, spec: Any) -> Queue:
    if not isinstance(spec, Mapping) or not _QUEUE_MEMBERS <= set(map(str, spec)) <= \
            _QUEUE_MEMBERS | _OPTIONAL_QUEUE_MEMBERS:
        raise _invalid(f"queue {name!r} states exactly: {', '.join(sorted(_QUEUE_MEMBERS))} "
                       f"(and optionally notify)")
    if spec["quorum"] not in QUORUMS:
        raise _invalid(f"queue {name!r}: quorum must be one of {', '.join(QUORUMS)}")
    members = spec["members"]
    if not isinstance(members, list) or len(members) > MAX_MEMBERS or not all(
            isinstance(m, str) and 0 < len(m) <= 512 and m.isprintable() for m in members) \
            or len(set(members)) != len(members):
        raise _invalid(f"queue {name!r}: members must be distinct principal ids (at most {MAX_MEMBERS})")
    if spec["quorum"] == "all" and len(members) < 2:
        raise _invalid(f"queue {name!r}: quorum 'all' needs at least two members")
    if not isinstance(spec["require_justification"], bool):
        raise _invalid(f"queue {name!r}: require_justification must be true or false")
    deadline = _seconds(spec["deadline_seconds"], f"queue {name!r}: deadline_seconds")
    after, to = spec["escalate_after_seconds"], spec["escalate_to"]
    if (after is None) != (to is None):
        raise _invalid(f"queue {name!r}: escalate_after_seconds and escalate_to go together")
    if after is not None and _seconds(after, f"queue {name!r}: escalate_after_seconds") >= deadline:
        raise _invalid(f"queue {name!r}: escalation must come before the deadline")
    return Queue(name, deadline, spec["quorum"], tuple(members), spec["require_justification"], after,
                 None if to is None else _name(to, f"queue {name!r}: escalate_to"),
                 _notify(name, spec.get("notify")))


def _notify(name: str, spec: Any) -> Notify | None:
    """`{"email": [addresses], "slack": {"channel": "C..."}, "every_seconds": 0}` (email or slack,
    or both; null or absent: no channels)."""
    if spec is None:
        return None
    where = f"queue {name!r}: notify"
    if not isinstance(spec, Mapping) or "every_seconds" not in spec or not set(map(str, spec)) <= _NOTIFY_MEMBERS \
            or not {"email", "slack"} & set(spec):
        raise _invalid(f"{where} states every_seconds and email, slack or both (and nothing else)")
    every = spec["every_seconds"]
    low, high = DIGEST_RANGE
    if type(every) is not int or not (every == 0 or low <= every <= high):
        raise _invalid(f"{where}.every_seconds must be 0 (each hold at once) or a whole number from {low} to {high}")
    email = spec.get("email", [])
    if "email" in spec and (not isinstance(email, list) or not 0 < len(email) <= MAX_EMAILS or not all(
            isinstance(a, str) and len(a) <= MAX_EMAIL_LENGTH and _EMAIL.fullmatch(a) for a in email)
            or len({a.lower() for a in email}) != len(email)):
        raise _invalid(f"{where}.email must be 1 to {MAX_EMAILS} distinct e-mail addresses "
                       f"(name@domain, at most {MAX_EMAIL_LENGTH} characters, no display name)")
    slack = spec.get("slack")
    channel = None
    if "slack" in spec:
        if not isinstance(slack, Mapping) or set(map(str, slack)) != {"channel"} or not isinstance(
                slack["channel"], str) or not _SLACK_CHANNEL.fullmatch(slack["channel"]):
            raise _invalid(f"{where}.slack must be {{\"channel\": id}} with a channel id ({_SLACK_CHANNEL.pattern})")
        channel = slack["channel"]
    return Notify(tuple(email), channel, every)


def _routes(body: Any, names: set[str]) -> tuple[Route, ...]:
    if not isinstance(body, list) or len(body) > MAX_ROUTES:
        raise _invalid(f"routes must be a list of at most {MAX_ROUTES} routes")
    routes = []
    for index, spec in enumerate(body):
        where = f"routes[{index}]"
        if not isinstance(spec, Mapping) or set(map(str, spec)) != _ROUTE_MEMBERS:
            raise _invalid(f"{where} states exactly: {', '.join(sorted(_ROUTE_MEMBERS))}")
        if not isinstance(spec["policy_id"], str) or not _ID.fullmatch(spec["policy_id"]):
            raise _invalid(f"{where}.policy_id must be a policy id")
        rule = spec["rule_id"]
        if rule is not None and (not isinstance(rule, str) or not _ID.fullmatch(rule)):
            raise _invalid(f"{where}.rule_id must be a rule id or null")
        if spec["queue"] not in names:
            raise _invalid(f"{where}.queue must name one of the queues")
        if spec["priority"] not in PRIORITIES:
            raise _invalid(f"{where}.priority must be one of {', '.join(PRIORITIES)}")
        routes.append(Route(spec["policy_id"], spec["queue"], rule, spec["priority"]))
    return tuple(routes)


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


def _recipients(queue: Queue | None) -> set[str]:
    notify = queue.notify if queue is not None else None
    if notify is None:
        return set()
    return {f"email:{a.lower()}" for a in notify.email} | (
        {f"slack:{notify.slack_channel}"} if notify.slack_channel else set())


def _notify_weakenings(before: Queue | None, after: Queue) -> list[str]:
    """A channel added: a hold's facts then leave the gate for an address or a Slack channel they
    did not reach before (as `decision_created` turned on does). A channel removed, or a longer
    digest, is not: a hold nobody hears of expires, which never approves."""
    return ["notify"] if _recipients(after) - _recipients(before) else []


def _queue_weakenings(before: Queue, after: Queue) -> list[str]:
    """The members by which `after` loosens `before`'s guard on a held action: fewer approvals,
    fewer members under `all`, a later deadline, no written justification, an escalation removed
    or later."""
    out = []
    if after.approvals_needed() < before.approvals_needed():
        out.append("quorum")
    if before.quorum == "all" and after.quorum == "all" and set(before.members) - set(after.members):
        out.append("members")
    if after.deadline_seconds > before.deadline_seconds:
        out.append("deadline_seconds")
    if before.require_justification and not after.require_justification:
        out.append("require_justification")
    if before.escalate_after_seconds is not None and (
            after.escalate_after_seconds is None or after.escalate_after_seconds > before.escalate_after_seconds):
        out.append("escalate_after_seconds")
    return out


def _looser(went: Queue | None, goes: Queue | None) -> bool:
    """Whether held records that went to `went` now go to another queue with a looser guard."""
    return went is not None and goes is not None and went.name != goes.name and bool(_queue_weakenings(went, goes))


def _escalation(policy: HoldPolicy, queue: Queue) -> Queue | None:
    return policy.queue(queue.escalate_to)


def _route_keys(before: HoldPolicy, after: HoldPolicy) -> list[tuple[str, str | None]]:
    """One (policy id, rule id) per class of records the routes tell apart: each rule a route
    names, and any other rule of a named policy (None: only a route for every rule matches it)."""
    routes = (*before.routes, *after.routes)
    return sorted({(r.policy_id, r.rule_id) for r in routes if r.rule_id is not None}) + sorted(
        {(r.policy_id, None) for r in routes})


def weakenings(before: HoldPolicy, after: HoldPolicy) -> tuple[str, ...]:
    """The members `after` weakens (docs/holds.md, "Changing the hold policy"): four eyes off; a
    queue removed; a queue's guard loosened (`_queue_weakenings`); a queue's reviewers' channel
    added (`_notify_weakenings`: facts leave the gate for a new recipient); a class of held records routed
    (or escalated) to a queue whose guard is looser than the one it went to before."""
    out = ["four_eyes"] if before.four_eyes and not after.four_eyes else []
    for queue in before.queues:
        kept = after.queue(queue.name)
        if kept is None:
            out.append(f"queues.{queue.name}")
            continue
        out += [f"queues.{queue.name}.{member}" for member in _queue_weakenings(queue, kept)]
        out += [f"queues.{queue.name}.{member}" for member in _notify_weakenings(queue, kept)]
        if _looser(_escalation(before, queue), _escalation(after, kept)):
            out.append(f"queues.{queue.name}.escalate_to")
    for queue in after.queues:
        if before.queue(queue.name) is None:  # a new queue's channels are new recipients too
            out += [f"queues.{queue.name}.{member}" for member in _notify_weakenings(None, queue)]
    for policy_id, rule_id in _route_keys(before, after):
        if _looser(before.assign(policy_id, rule_id).queue, after.assign(policy_id, rule_id).queue):
            out.append(f"routes[{policy_id}/{rule_id or '*'}]")
    if _looser(before.queue(before.default_queue), after.queue(after.default_queue)):
        out.append("default_queue")
    return tuple(dict.fromkeys(out))
