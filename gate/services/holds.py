"""Held actions (issue 43, docs/holds.md): open a hold with its decision, resolve it with a signed
event, expire and escalate it on the clock, and tell whoever waits.

* `HoldOpener` runs in every decide: a record whose verdict holds the action (`review`) gets
  its hold row (queue, priority, deadline, the facts a reviewer needs) and its `hold.opened`
  event in the decision's own transaction, so an idempotent retry (which replays the stored
  decision) never opens a second one.
* `HoldService` is every other use case, over parts the composition root builds once and hands
  it: the reads (`gate.services.hold_reads`), who may act and what each step does
  (`gate.services.hold_rules`, the one home of the permission code), and the transaction that
  writes a step (`gate.services.hold_writes`). Each change is one transaction that moves the row
  from the version read and appends one signed event to the scope's hold chain; of two racing
  resolutions one commits, the other reads again and is told the hold is already resolved.

Who may act: an API key with the `resolve` permission or a person with the reviewer role in the
scope (`permissions` carries either); `admin` changes the scope's hold policy. SECURITY: under
four eyes the principal that asked for the action never resolves it; a quorum `all` hold takes
votes from its members only; silence never approves (a hold past its deadline closes `expired`).
"""

from __future__ import annotations

import builtins
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from functools import partial
from typing import Any, TypedDict

from gate import bodies
from gate.clock import Clock, iso_ms
from gate.errors import GateError
from gate.governance.table import HOLD_POLICY
from gate.holds import request as hold_request
from gate.holds.events import EXPIRED, HELD_VERDICT, OPEN, HoldCommitment, HoldEvent
from gate.holds.links import inbox_url
from gate.holds.policy import PRIORITIES, HoldPolicy, Queue
from gate.holds.similar import NEAREST, WINDOW
from gate.keys.config import LiveSigning, SigningSetup
from gate.ledger import Ledger
from gate.ledger.holds import HoldLedger, HoldOpening, HoldRow
from gate.principals import Permissions, Principal
from gate.releases.governance import GovernanceEvent, PolicyRequestJSON
from gate.services.chains import EventChainWitness
from gate.services.governance import GovernanceService, SafeguardSettings
from gate.services.hold_reads import (
    HoldHistory,
    HoldPage,
    HoldReads,
    HoldResolution,
    HoldView,
    SimilarHold,
    requester_holder,
)
from gate.services.hold_rules import HoldRules, StepMaker, parse_vote, queue_columns, utc
from gate.services.hold_writes import HoldNotices, HoldStep, HoldWriter
from gate.services.periodic import PeriodicWorker

MAX_FACTS_BYTES = 16_384


def _facts_text(facts: Any) -> str:
    """The facts a reviewer sees, as stored; too large a set is replaced by a note saying so."""
    text = json.dumps(facts, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)
    if len(text.encode("utf-8")) > MAX_FACTS_BYTES:
        return json.dumps({"_omitted": f"the facts exceed {MAX_FACTS_BYTES} bytes; see the decision packet"})
    return text


class HoldOpener:
    """The hold a decide opens with its record (see the module docstring)."""

    def __init__(self, ledger: Ledger, safeguards: SafeguardSettings, inbox_base: str | None = None) -> None:
        self.holds = HoldLedger(ledger)
        self.inbox_base = inbox_base  # the workbench's address: hold events link to the Inbox
        # The composition root's one safeguard reader: the hold policy is kept by the version the
        # database states (issue 68), so a change applies to the next decide.
        self.safeguards = safeguards

    def policy(self, scope: str) -> HoldPolicy:
        """The hold policy in force (gate.services.governance: the governance chain's, or the hold
        chain's newest `policy_set` step made before issue 52, or the default)."""
        return self.safeguards.hold_policy(scope)

    def opening(self, scope: str, record: Mapping[str, Any], requested_by: str, facts: Any,
                requested_holder: str | None = None, request: str | None = None) -> list[HoldOpening]:
        """The same-transaction writes of a held record: its row and its announcement ([] when
        the verdict does not hold the action)."""
        row = self.open_row(scope, record, requested_by, facts, requested_holder, request)
        if row is None:
            return []
        return [HoldOpening(row, inbox_url(self.inbox_base, scope, row["decision_id"]))]

    def open_row(self, scope: str, record: Mapping[str, Any], requested_by: str, facts: Any,
                 requested_holder: str | None = None, request: str | None = None) -> HoldRow | None:
        """The hold row a held record opens, under the scope's policy (None: not held);
        `requested_holder`: the deciding key's stated holder (issue 52); `request`: the decide's
        canonical request text, whose summary the row keeps when it is bound to the record (issue 65)."""
        if record.get("verdict") != HELD_VERDICT:
            return None
        policy = self.policy(scope)
        assignment = policy.assign(record.get("policy_id"), record.get("matched_rule_id"))
        row = _open_row(scope, record, (requested_by, requested_holder), facts, assignment.queue,
                        assignment.priority, policy.four_eyes)
        summary = hold_request.read(request, requester_holder(row), record.get("input_hash"))
        return {**row, "request_json": hold_request.text(summary) if summary["signed"] else None,
                "target_object_id": hold_request.searchable(summary, "target_object_id"),
                "source_record_id": hold_request.searchable(summary, "source_record_id")}


class DeferredOpener(HoldOpener):
    """An opener for a writer of history (the demo seed): a held record's decide writes no hold;
    its row, as `HoldOpener` would have opened it, waits in `deferred` (by decision id) until the
    writer writes the hold whole at its close (`HoldService.write_whole`), so no sweeper ever
    finds a backdated hold open. A decide that fails after its opening leaves its row here: the
    writer of history stops at the failure."""

    def __init__(self, ledger: Ledger, safeguards: SafeguardSettings, inbox_base: str | None = None) -> None:
        super().__init__(ledger, safeguards, inbox_base)
        self.deferred: dict[str, HoldRow] = {}

    def opening(self, scope: str, record: Mapping[str, Any], requested_by: str, facts: Any,
                requested_holder: str | None = None, request: str | None = None) -> list[HoldOpening]:
        row = self.open_row(scope, record, requested_by, facts, requested_holder, request)
        if row is not None:
            self.deferred[row["decision_id"]] = row
        return []


def _open_row(scope: str, record: Mapping[str, Any], requester: tuple[str, str | None], facts: Any, queue: Queue,
              priority: str, four_eyes: bool) -> HoldRow:
    """`requester`: the deciding key's id and its stated holder (None: none stated)."""
    opened = utc(str(record["created_at"]))
    return {
        "decision_id": record["decision_id"], "scope": scope, "record_hash": record["record_hash"],
        "policy_id": record.get("policy_id"), "policy_version": record.get("policy_version"),
        "rule_id": record.get("matched_rule_id"), "reason_code": record.get("reason_code"),
        "requested_by": requester[0], **queue_columns(queue, opened), "priority": priority,
        "priority_rank": PRIORITIES.index(priority), "opened_at": record["created_at"],
        "deadline_at": iso_ms(opened + timedelta(seconds=queue.deadline_seconds)),
        "four_eyes": int(four_eyes), "state": OPEN, "claimed_by": None, "claimed_at": None, "approvals_json": "[]",
        "resolved_at": None, "resolved_by": None, "resolution_seq": None, "row_version": 0,
        "facts_json": _facts_text(facts), "requested_holder": requester[1],
        "request_json": None, "target_object_id": None, "source_record_id": None,
    }



class HoldPolicyDocument(TypedDict):
    """The hold policy in force, its pending requests and the governance chain's seq."""

    ok: bool
    policy: Any
    pending: builtins.list[PolicyRequestJSON]
    governance_seq: int


class HoldPolicyAnswer(HoldPolicyDocument):
    """A hold policy change's answer: the document after it, whether it waits, its event."""

    requested: bool
    event: GovernanceEvent | None



class HoldService:
    """Every use case of held actions but the opening (see the module docstring)."""

    def __init__(self, reads: HoldReads, rules: HoldRules, writer: HoldWriter, *, governance: GovernanceService,
                 opener: HoldOpener) -> None:
        """Built by the composition root (`gate.services.root`) with its parts, built there once over
        one `HoldLedger`, one clock and its one witness of the event chains (the gate's checkpoint
        log, `GATE_CHECKPOINT_LOG`), its one governed-change service (the hold policy changes
        through it) and its one hold opener."""
        self.reads = reads
        self.rules = rules
        self.writer = writer
        self.notices: HoldNotices = writer.notices
        self.holds: HoldLedger = reads.holds
        self.opener = opener  # its inbox_base: the workbench's address (GATE_WORKBENCH_URL)
        self.signing: SigningSetup | LiveSigning = reads.signing  # its trust anchors verify what the holds sign
        self.witness: EventChainWitness = reads.witness
        self.governance = governance
        self.clock: Clock = reads.clock  # one clock for the holds, their witness and the hold policy's changes

    # -- reads (gate.services.hold_reads) ---------------------------------------------------
    def policy(self, scope: str) -> HoldPolicy:
        return self.opener.policy(scope)

    def show(self, scope: str, decision_id: str) -> dict[str, Any]:
        return self.reads.show(scope, decision_id)

    def list(self, scope: str, *, state: str = OPEN, queue: str | None = None, limit: int = 50,
             offset: int = 0, filters: Mapping[str, str | None] | None = None,
             reader: str | None = None) -> HoldPage:
        """One page of the scope's holds (`HoldReads.list`: the filters, their order, their refusals)."""
        return self.reads.list(scope, state=state, queue=queue, limit=limit, offset=offset, filters=filters,
                               reader=reader)

    def version(self, scope: str) -> tuple[int, int]:
        """What changes whenever the scope's holds do: what the Inbox polls (`HoldReads.version`)."""
        return self.reads.version(scope)

    def resolution(self, scope: str, decision_id: str) -> HoldResolution:
        """The hold's state and, once closed, its signed resolution (the closing event)."""
        return self.reads.resolution(scope, decision_id)

    def similar(self, scope: str, decision_id: str, limit: int = NEAREST,
                window: int = WINDOW) -> builtins.list[SimilarHold]:
        """The closed holds most like this one, each with how it closed (`HoldReads.similar`)."""
        return self.reads.similar(scope, decision_id, limit, window)

    def history_document(self, scope: str, limit: int = 10_000) -> HoldHistory:
        """The scope's hold chain and its signed head (`HoldReads.history_document`)."""
        return self.reads.history_document(scope, limit)

    def packet_part(self, scope: str, record: Mapping[str, Any]) -> tuple[builtins.list[HoldEvent],
                                                                          HoldCommitment | None]:
        """A decision's hold events and signed commitment (`HoldReads.packet_part`)."""
        return self.reads.packet_part(scope, record)

    def view(self, row: HoldRow) -> HoldView:
        return self.reads.view(row)

    # -- changes (who may act: gate.services.hold_rules; the write: gate.services.hold_writes) --
    def resolve(self, scope: str, principal: Principal, permissions: Permissions, decision_id: str,
                body: Any) -> HoldStep:
        """A reviewer's vote; it closes the hold when it denies or completes the quorum."""
        self.rules.may_act(permissions)
        self.reads.row(scope, decision_id)  # SECURITY: another scope's hold is a 404 before any body check
        vote = parse_vote(body)
        return self.writer.step(scope, decision_id, lambda row: self.rules.vote_step(row, principal, vote))

    def claim(self, scope: str, principal: Principal, permissions: Permissions, decision_id: str,
              release: bool = False) -> HoldStep:
        self.rules.may_act(permissions)
        return self.writer.step(scope, decision_id, lambda row: self.rules.claim_step(row, principal, release))

    def reassign(self, scope: str, principal: Principal, permissions: Permissions, decision_id: str,
                 body: Any) -> HoldStep:
        self.rules.may_act(permissions)
        self.reads.row(scope, decision_id)  # SECURITY: another scope's hold is a 404 before any body check
        bodies.check("hold-reassign", body, "HOLD_RESOLUTION_INVALID")
        policy = self.policy(scope)
        queue, note = policy.queue(body["queue"]), body.get("note")
        if queue is None:
            raise GateError("HOLD_RESOLUTION_INVALID", "queue must name one of the scope's queues")
        return self.writer.step(scope, decision_id,
                                lambda row: self.rules.move_step(row, principal, "reassign", queue, note, policy))

    def escalate(self, scope: str, principal: Principal, permissions: Permissions,
                 decision_id: str) -> HoldStep:
        self.rules.may_act(permissions)
        policy = self.policy(scope)
        return self.writer.step(scope, decision_id, lambda row: self.rules.escalate_step(row, principal, policy))

    def set_policy(self, scope: str, principal: Principal, permissions: Permissions, body: Any) -> HoldPolicyAnswer:
        """State the scope's whole hold policy (admin) through the one governed-change service: a
        signed governance event; a weakening while the scope requires approvals is a pending
        request (`requested`) a second, distinct principal approves (`approve_policy`)."""
        event, _state = self.governance.change(scope, HOLD_POLICY, principal, permissions,
                                               lambda _before: HoldPolicy.from_json(body))
        return self._policy_answer(scope, event)

    def approve_policy(self, scope: str, principal: Principal, permissions: Permissions, request_seq: Any,
                       reason: str | None = None) -> HoldPolicyAnswer:
        """A second, distinct principal (`approve`) applies a pending hold-policy request."""
        event, _state = self.governance.approve(scope, HOLD_POLICY, principal, permissions, request_seq, reason)
        return self._policy_answer(scope, event)

    def policy_document(self, scope: str) -> HoldPolicyDocument:
        """The hold policy in force, its pending requests and the governance chain's seq."""
        return {"ok": True, **self.governance.document(scope, HOLD_POLICY)}

    def _policy_answer(self, scope: str, event: GovernanceEvent | None) -> HoldPolicyAnswer:
        requested = event is not None and event["action"] == "policy_request"
        return {**self.policy_document(scope), "requested": requested, "event": event}

    def sweep(self, limit: int = 200) -> int:
        """Expire every open hold past its deadline and escalate those whose time has come (any
        scope). Run by every serving process: each step happens once, whoever gets there first."""
        now = self.clock.now()
        done = 0
        for row in self.holds.due(iso_ms(now), limit):
            if self.writer.expire(row["scope"], row["decision_id"], now):
                done += 1
        return done

    def write_whole(self, row: HoldRow, votes: Sequence[tuple[Principal, Permissions, Any]] = (), *,
                    expire: bool = False) -> builtins.list[HoldEvent]:
        """A held decision's hold written whole in one transaction, at the clock's time: its row
        as its decide opened it (`DeferredOpener`), each reviewer's vote (principal, permissions,
        body, as `resolve` takes them) and, with `expire`, the clock's expiry of a hold due by
        then: the same checks, signed events on the scope's hold chain, witness and announcements
        as `resolve` and `sweep` one step at a time (without votes or expiry the hold is written
        open). What a writer of history uses (the demo seed, issue 53): a live gate's sweeper
        never finds its backdated hold open. Returns the events."""
        parsed = []
        for principal, permissions, body in votes:
            self.rules.may_act(permissions)
            parsed.append((principal, parse_vote(body)))
        now = self.clock.now()
        if parsed and row["deadline_at"] <= iso_ms(now):  # silence is not consent: the deadline came first
            raise GateError("HOLD_ALREADY_RESOLVED", "this hold is already expired", state=EXPIRED)
        policy = self.policy(row["scope"])  # read before the write: its steps read nothing more
        makes: builtins.list[StepMaker] = [partial(self.rules.vote_step, principal=principal, vote=vote,
                                                   policy=policy) for principal, vote in parsed]
        if expire:
            makes.append(partial(self.rules.clock_step, now=now))
        return self.writer.insert_whole(row, makes)

    # -- waiting ---------------------------------------------------------------------------
    def on_closed(self, listener: Callable[[str], None]) -> None:
        """Call `listener(decision_id)` when this process closes a hold (the long-poll's wake-up)."""
        self.notices.on_closed(listener)

    def wait_closed(self, scope: str, decision_id: str, seconds: float, poll: float = 0.25) -> HoldResolution:
        """The resolution, waiting up to `seconds` for the hold to close (here or in another
        process: the row is read again every `poll` seconds). For servers without parking."""
        deadline = time.monotonic() + seconds  # a wait is measured in real time, whatever the clock says
        answer = self.resolution(scope, decision_id)
        while answer["state"] == OPEN:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            with self.notices.closed:
                self.notices.closed.wait(min(poll, left))
            answer = self.resolution(scope, decision_id)
        return answer


def hold_sweeper(service: HoldService, interval: float = 1.0) -> PeriodicWorker:
    """The worker that runs `HoldService.sweep` every `interval` seconds (one per serving process;
    every process may run one, each step still happens once). A sweep that fails (the ledger is
    away) is logged with its traceback under `gate.holds` and the next pass tries again."""
    return PeriodicWorker("hold-sweeper", service.sweep, interval, log=logging.getLogger("gate.holds"))
