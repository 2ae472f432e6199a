"""Who may act on a held action, and what each step does (issue 43, docs/holds.md): the one home
of the permission code of a hold. Each step maker reads a hold's row and the scope's hold policy
and answers the step's event (`gate.holds.events.Step`), the row's move and the announcement's
type, or refuses; it writes nothing (the writer, `gate.services.hold_writes`, seals and appends
what it answers, in one transaction with the row's move).

Who may act: an API key with the `resolve` permission or a person with the reviewer role in the
scope (`permissions` carries either; `HoldRules.may_act`). SECURITY: under four eyes the holder
that asked for the action never resolves it (with any of its keys); a quorum `all` hold takes votes
from its members only, and counts only theirs; a holder votes once; a live claim is its
reviewer's; a move never loosens the hold's guard nor tells its facts to a new recipient; silence
never approves (the clock's step on a hold past its deadline closes it `expired`).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from gate import bodies
from gate.clock import Clock, iso_ms
from gate.errors import GateError
from gate.holds.events import APPROVED, DENIED, EXPIRED, Step
from gate.holds.policy import (
    Guard,
    HoldPolicy,
    Queue,
    check_reason_code,
    disclosed,
    move_loosens,
    recipients,
)
from gate.ledger.holds import Approval, HoldMove, HoldRow, QueueColumns
from gate.principals import Permissions, Principal, holder_id, is_distinct_approver, is_member, require
from gate.services.hold_reads import CLAIM_TTL, requester_holder

MAX_NOTE: int = bodies.schema("hold-resolution")["properties"]["note"]["maxLength"]
HOLD_DENIED = "HOLD_PERMISSION_DENIED"  # the code of every right a hold step lacks (gate.principals.require)
_STAYS = "the escalation would loosen the hold's guard or tell a new recipient; it stays"  # the clock's note
# A step on an open hold: from its row, the event's Step, the row's move and the announcement's type.
StepMaker = Callable[[HoldRow], tuple[Step, HoldMove, str]]


def utc(text: str) -> datetime:
    """A stored ISO time (`…Z`) as an aware UTC datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def queue_columns(queue: Queue, since: datetime) -> QueueColumns:
    """The columns a queue sets on its hold: its name, quorum and escalation time."""
    escalate = (iso_ms(since + timedelta(seconds=queue.escalate_after_seconds))
                if queue.escalate_after_seconds is not None else None)
    return {"queue": queue.name, "approvals_needed": queue.approvals_needed(),
            "require_justification": int(queue.require_justification), "escalate_at": escalate}


@dataclass(frozen=True, slots=True)
class Vote:
    """A checked resolution request."""

    decision: str
    reason_code: str
    note: str | None


def parse_vote(body: Any) -> Vote:
    """`{decision: approve|deny, reason_code, note?}` (gate/bodies/hold-resolution.schema.json) or
    HOLD_RESOLUTION_INVALID (nothing changes)."""
    if isinstance(body, Mapping):
        unknown, _ = bodies.closed_members("hold-resolution", body)
        if unknown:
            raise GateError("HOLD_RESOLUTION_INVALID", f"unknown member(s): {', '.join(unknown)}", unknown=unknown)
    bodies.check("hold-resolution", body, "HOLD_RESOLUTION_INVALID")
    note = body.get("note")
    if note is not None and not all(c.isprintable() or c in "\n\t" for c in note):
        raise GateError("HOLD_RESOLUTION_INVALID", f"note must be text of at most {MAX_NOTE} characters")
    return Vote(body["decision"], body["reason_code"], note.strip() or None if isinstance(note, str) else None)


def own_request(four_eyes: bool, requester: str, holder: str) -> bool:
    """Whether, under four eyes, `holder` (a principal's `holder_id`) is the `requester` (the
    holder that asked for the hold's action), so another reviewer decides: the refusal
    HOLD_FOUR_EYES of every vote, and what the Inbox tells the requester before any click."""
    return four_eyes and not is_distinct_approver(holder, (requester,))


def _approval_holder(approval: Approval) -> str:
    """The holder of an approving vote so far (an approval stored before holders: its actor's)."""
    stated = approval.get("holder")
    return stated if isinstance(stated, str) else holder_id(approval["actor"])


def _approval_is_member(approval: Approval, queue: Queue) -> bool:
    """Whether an approval so far is one of a quorum `all` queue's members (`is_member`, from
    what the approval stored): a vote given in a queue the hold moved from counts here only then."""
    return approval["actor"].removeprefix("person:") in queue.members or _approval_holder(approval) in queue.members


def _move_loosens(row: HoldRow, target: Queue, policy: HoldPolicy) -> builtins.list[str]:
    """What moving the hold `row` to `target` would let through (`gate.holds.policy.move_loosens`):
    the hold's guard is its row's approvals needed and justification, with the members of its
    queue's quorum `all`; its facts may reach its queue's channels and those of the queues its
    record reaches by the policy (its route or the default, and their escalations), each stating
    what its `show` names (`disclosed`)."""
    current = policy.queue(row["queue"])
    members = current.guard().members if current is not None else None
    guard = Guard(row["approvals_needed"], members, bool(row["require_justification"]))
    queues = (current, *policy.reach(row["policy_id"], row["rule_id"]))
    return move_loosens(guard, recipients(queues) | disclosed(queues), target)



class HoldRules:
    """Every check of who may act on a hold and every step maker (see the module docstring)."""

    def __init__(self, policies: Callable[[str], HoldPolicy], clock: Clock) -> None:
        """`policies(scope)`: the hold policy in force (the composition root's one hold opener's,
        read through the one safeguard reader); `clock`: the holds' clock (a claim's age)."""
        self.policy = policies
        self.clock = clock

    @staticmethod
    def may_act(permissions: Permissions) -> None:
        """The right every step on a hold needs (`resolve`), or HOLD_PERMISSION_DENIED."""
        require(permissions, "resolve", HOLD_DENIED)

    def vote_step(self, row: HoldRow, principal: Principal, vote: Vote,
                   policy: HoldPolicy | None = None) -> tuple[Step, HoldMove, str]:
        """`vote` on the hold `row` under `policy` (default: the scope's in force, read now)."""
        queue = (policy or self.policy(row["scope"])).queue(row["queue"])
        holder = principal.holder_id
        if own_request(bool(row["four_eyes"]), requester_holder(row), holder):
            raise GateError("HOLD_FOUR_EYES", "the holder that asked for this action cannot resolve it "
                            "(with any of its keys)")
        if queue is not None and queue.quorum == "all" and not is_member(principal, queue.members):
            raise GateError("HOLD_NOT_A_MEMBER", "this queue takes votes from its members only")
        approvals = json.loads(row["approvals_json"])
        if not is_distinct_approver(holder, (_approval_holder(a) for a in approvals)):
            raise GateError("HOLD_ALREADY_VOTED", "this holder has already approved this hold (with one of its keys)")
        if row["require_justification"] and not vote.note:
            raise GateError("HOLD_RESOLUTION_INVALID", "this queue requires a written justification (note)")
        check_reason_code(queue, vote.decision, vote.reason_code)
        self.check_claim(row, principal)
        counted = [a for a in approvals if queue is None or queue.quorum != "all" or _approval_is_member(a, queue)]
        closes = vote.decision == "deny" or len(counted) + 1 >= row["approvals_needed"]
        outcome = (DENIED if vote.decision == "deny" else APPROVED) if closes else None
        step = Step("vote", principal, "", row["decision_id"], row["record_hash"], vote=vote.decision,
                    reason_code=vote.reason_code, note=vote.note, queue=row["queue"], outcome=outcome,
                    approvals_needed=row["approvals_needed"] if outcome == APPROVED else None,
                    votes=tuple(a["event_hash"] for a in approvals) if outcome == APPROVED else (),
                    four_eyes=bool(row["four_eyes"]), requested_by=row["requested_by"],
                    requested_holder=row.get("requested_holder"))
        name = "hold.resolved" if outcome else "hold.voted"
        return step, {}, name

    def check_claim(self, row: HoldRow, principal: Principal) -> None:
        claimed = row["claimed_by"]
        if claimed and claimed != principal.actor and utc(str(row["claimed_at"])) + CLAIM_TTL > self.clock.now():
            raise GateError("HOLD_CLAIMED", "another reviewer has claimed this hold", claimed_by=claimed)

    def claim_step(self, row: HoldRow, principal: Principal, release: bool) -> tuple[Step, HoldMove, str]:
        if release:
            if row["claimed_by"] != principal.actor:
                raise GateError("HOLD_CLAIMED", "only the reviewer who claimed this hold releases it",
                                claimed_by=row["claimed_by"])
            move: HoldMove = {"claimed_by": None, "claimed_at": None}
        else:
            self.check_claim(row, principal)
            move = {"claimed_by": principal.actor, "claimed_at": "@now"}
        step = Step("unclaim" if release else "claim", principal, "", row["decision_id"], row["record_hash"],
                    queue=row["queue"])
        return step, move, "hold.claimed" if not release else "hold.unclaimed"

    def move_step(self, row: HoldRow, principal: Principal, action: Literal["escalate", "reassign"], queue: Queue,
                   note: str | None, policy: HoldPolicy | None = None) -> tuple[Step, HoldMove, str]:
        """Move the hold to `queue` with the votes it has (docs/holds.md, "Moving a hold"). SECURITY:
        a move never loosens the hold's guard nor tells its facts to a new recipient
        (`gate.holds.policy.move_loosens`): HOLD_MOVE_LOOSENS, and nothing changes."""
        if queue.name == row["queue"]:
            raise GateError("HOLD_RESOLUTION_INVALID", "the hold is already in this queue")
        loosens = _move_loosens(row, queue, policy or self.policy(row["scope"]))
        if loosens:
            raise GateError("HOLD_MOVE_LOOSENS", f"queue {queue.name!r} would let this hold through more loosely "
                            f"({', '.join(loosens)}); a hold keeps the strictest guard it has been under",
                            queue=queue.name, loosens=loosens)
        step = Step(action, principal, "", row["decision_id"], row["record_hash"], note=note, queue=queue.name,
                    deadline_at=row["deadline_at"])
        columns = queue_columns(queue, self.clock.now())
        move: HoldMove = {"queue": columns["queue"], "approvals_needed": columns["approvals_needed"],
                          "require_justification": columns["require_justification"],
                          "escalate_at": columns["escalate_at"], "claimed_by": None, "claimed_at": None}
        return step, move, "hold.escalated" if action == "escalate" else "hold.reassigned"

    def clock_step(self, row: HoldRow, now: datetime) -> tuple[Step, HoldMove, str]:
        clock = Principal.clock()
        if row["deadline_at"] <= iso_ms(now):
            step = Step("expire", clock, "", row["decision_id"], row["record_hash"], queue=row["queue"],
                        deadline_at=row["deadline_at"], outcome=EXPIRED)
            return step, {}, "hold.expired"
        if row["escalate_at"] is not None and row["escalate_at"] <= iso_ms(now):
            policy = self.policy(row["scope"])
            current = policy.queue(row["queue"])
            target = policy.queue(current.escalate_to) if current and current.escalate_to else None
            stays = "no queue to escalate to" if target is None else (  # the policy changed since
                _STAYS if _move_loosens(row, target, policy) else None)
            if target is None or stays is not None:  # only the deadline stays due
                return (Step("escalate", clock, "", row["decision_id"], row["record_hash"], queue=row["queue"],
                             deadline_at=row["deadline_at"], note=stays),
                        {"escalate_at": None}, "hold.escalated")
            return self.move_step(row, clock, "escalate", target, None, policy)
        raise GateError("HOLD_NOT_DUE", "nothing is due on this hold")


    def escalate_step(self, row: HoldRow, principal: Principal, policy: HoldPolicy) -> tuple[Step, HoldMove, str]:
        """A reviewer's escalation of the hold `row` to its queue's `escalate_to` under `policy`."""
        current = policy.queue(row["queue"])
        target = policy.queue(current.escalate_to) if current and current.escalate_to else None
        if target is None:
            raise GateError("HOLD_NOT_ESCALABLE", "this hold's queue names no queue to escalate to")
        return self.move_step(row, principal, "escalate", target, None, policy)
