"""Writing a step on a held action (issue 43, docs/holds.md): each change is one transaction that
moves the hold's row from the version read and appends one signed event to the scope's hold chain,
checked against the chain's witnessed checkpoint in that transaction, and announces it in the
outbox; of two racing steps one commits, the other reads again (and is told, by the step maker, that
the hold is already resolved). What each step is and who may take it: `gate.services.hold_rules`.

SECURITY: a hold whose deadline has passed is expired first, whatever the sweeper has done yet,
so no vote, claim or move lands after the deadline (silence is not consent).
"""

from __future__ import annotations

import builtins
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any, TypedDict

from gate.chain.event_witness import hold_chain_id
from gate.chain.links import scope_hash
from gate.clock import Clock, iso_ms
from gate.errors import GateError
from gate.holds.events import OPEN, HoldEvent, Step, build_event
from gate.holds.links import inbox_url
from gate.keys.config import LiveSigning, SigningSetup
from gate.keys.signing import ReceiptSigner
from gate.ledger.holds import Announce, Approval, Build, HoldMove, HoldRace, HoldRow, Writing
from gate.services.chains import EventChainWitness
from gate.services.hold_reads import HoldReads, HoldView, hold_signer
from gate.services.hold_rules import HoldRules, StepMaker

RETRIES = 8


class HoldStep(TypedDict):
    """What a step on a hold answers: its signed event and the hold after it."""

    ok: bool
    event: HoldEvent
    hold: HoldView


class HoldNotices:
    """What this process tells whoever waits on a hold when it closes one: the condition a wait
    sleeps on (`HoldService.wait_closed`) and the listeners (the long-poll's wake-up)."""

    def __init__(self) -> None:
        self.closed = threading.Condition()
        self.listeners: list[Callable[[str], None]] = []

    def on_closed(self, listener: Callable[[str], None]) -> None:
        """Call `listener(decision_id)` when this process closes a hold (the long-poll's wake-up)."""
        self.listeners.append(listener)

    def announce(self, decision_id: str) -> None:
        """Wake every wait and call every listener: this process closed the hold of `decision_id`."""
        with self.closed:
            self.closed.notify_all()
        for listener in list(self.listeners):
            listener(decision_id)


class HoldWriter:
    """The transaction of every step on a hold (see the module docstring)."""

    def __init__(self, reads: HoldReads, rules: HoldRules, signing: SigningSetup | LiveSigning, clock: Clock, *,
                 witness: EventChainWitness, notices: HoldNotices, inbox_base: str | None) -> None:
        """Built by the composition root over the hold reads' one `HoldLedger`, with the one
        witness of the event chains and the workbench's address (hold events link to the Inbox)."""
        self.reads = reads
        self.rules = rules
        self.signing = signing
        self.clock = clock
        self.witness = witness
        self.notices = notices
        self.inbox_base = inbox_base

    def step(self, scope: str, decision_id: str, make: StepMaker, *, by_clock: bool = False) -> HoldStep:
        """Read the row, make the step, write it with the row's move; on a race read again.
        SECURITY: a hold whose deadline has passed is expired first, whatever the sweeper has
        done yet, so no vote, claim or move lands after the deadline (silence is not consent)."""
        signer = hold_signer(self.signing)
        for _ in range(RETRIES):
            row = self.reads.row(scope, decision_id)
            now = self.clock.now()
            if row["state"] == OPEN and row["deadline_at"] <= iso_ms(now) and not by_clock:
                self.expire(scope, decision_id, now)
                continue
            build, move_of, announce = self.writing(row, make, signer)
            try:
                event = self.append(scope, build, move=move_of, decision_id=decision_id,
                                     expected_version=row["row_version"], announce=announce)
            except HoldRace:
                continue
            if event["outcome"] is not None:
                self.notices.announce(decision_id)
            after = self.reads.row(scope, decision_id)
            return {"ok": True, "event": event, "hold": self.reads.view(after)}
        raise GateError("HOLD_BUSY", "the hold changed too often while this request was made; retry")

    def writing(self, row: HoldRow, make: StepMaker, signer: ReceiptSigner | None) -> Writing:
        """What writes the step `make(row)` on an open hold at the clock's time: the sealed event's
        build, the row's move and the announcement (`HoldLedger.append` / `insert_whole`)."""
        if row["state"] != OPEN:
            raise GateError("HOLD_ALREADY_RESOLVED", f"this hold is already {row['state']}", state=row["state"])
        scope, decision_id = row["scope"], row["decision_id"]
        step, move, name = make(row)
        at = iso_ms(self.clock.now())
        step = replace(step, at=at)
        if move.get("claimed_at") == "@now":  # a claim's time is the step's
            move = {**move, "claimed_at": at}

        def build(seq: int, previous: str | None) -> HoldEvent:
            return build_event(step, scope_hash=scope_hash(scope), seq=seq, previous_event_hash=previous, signer=signer)

        def move_of(event: HoldEvent) -> HoldMove:
            return {**move, **closing_move(step, row, event)}
        return build, move_of, Announce(name, {
            "decision_id": decision_id, "record_hash": row["record_hash"], "queue": step.queue,
            "outcome": step.outcome, "inbox_url": inbox_url(self.inbox_base, scope, decision_id)})

    def append(self, scope: str, build: Build, **step: Any) -> HoldEvent:
        """`HoldLedger.append` on a hold chain checked against its witnessed checkpoint in the
        write's own transaction (a chain cut back or rewritten takes no event:
        `CHAIN_INTEGRITY_FAILED`), then the chain's new checkpoint appended to the log."""
        chain_id = hold_chain_id(scope_hash(scope))
        read: builtins.list[builtins.list[str]] = []
        event = self.reads.holds.append(scope, build, witness=lambda hashes: read.append(
            self.witness.check(chain_id, hashes)), **step)
        self.witness.publish(chain_id, [*read[-1], event["event_hash"]])
        return event

    def expire(self, scope: str, decision_id: str, now: datetime) -> bool:
        """The clock's step on a due hold (expiry or escalation); False when nothing was due."""
        try:
            self.step(scope, decision_id, lambda current: self.rules.clock_step(current, now), by_clock=True)
        except GateError:
            return False  # resolved or moved meanwhile: nothing is due any more
        return True

    def insert_whole(self, row: HoldRow, makes: Sequence[StepMaker]) -> builtins.list[HoldEvent]:
        """`HoldLedger.insert_whole` on a hold chain checked against its witnessed checkpoint in
        the write's own transaction, then the chain's new checkpoint; on a race, again."""
        signer = hold_signer(self.signing)
        chain_id = hold_chain_id(scope_hash(row["scope"]))
        read: builtins.list[builtins.list[str]] = []  # the chain as each try's transaction read it
        for _ in range(RETRIES):
            if self.reads.holds.hold(row["scope"], row["decision_id"]) is not None:
                raise ValueError(f"the hold of {row['decision_id']} is written already")
            try:
                events = self.reads.holds.insert_whole(
                    row, [partial(self.writing, make=make, signer=signer) for make in makes],
                    inbox_url=inbox_url(self.inbox_base, row["scope"], row["decision_id"]),
                    witness=lambda hashes: read.append(self.witness.check(chain_id, hashes)))
            except HoldRace:
                continue
            if events:
                self.witness.publish(chain_id, [*read[-1], *(e["event_hash"] for e in events)])
            if any(e["outcome"] is not None for e in events):
                self.notices.announce(row["decision_id"])
            return events
        raise GateError("HOLD_BUSY", "the hold changed too often while this request was made; retry")


def closing_move(step: Step, row: HoldRow, event: HoldEvent) -> HoldMove:
    """The row's columns after the step's event: its state and the approvals so far. An approving
    vote adds itself, the closing one too, so an approved hold lists every approval it rests on
    (issue 56: a hold closed at 2 of 2 showed 1 of 2)."""
    move: HoldMove = {}
    if step.action == "vote" and step.vote == "approve":
        vote: Approval = {"actor": step.principal.actor, "holder": step.principal.holder_id, "event_hash": event["event_hash"]}
        move["approvals_json"] = json.dumps([*json.loads(row["approvals_json"]), vote])
    if step.outcome is not None:
        move["state"], move["resolved_at"] = step.outcome, step.at
        move["resolved_by"], move["resolution_seq"] = step.principal.actor, event["seq"]
    return move

