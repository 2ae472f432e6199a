"""Held actions (issue 43, docs/holds.md): open a hold with its decision, resolve it with a signed
event, expire and escalate it on the clock, and tell whoever waits.

* `HoldOpener` runs in every decide: a record whose verdict holds the action (`review`) gets
  its hold row (queue, priority, deadline, the facts a reviewer needs) and its `hold.opened`
  event in the decision's own transaction, so an idempotent retry (which replays the stored
  decision) never opens a second one.
* `HoldService` is every other use case. Each change is one transaction that moves the row from
  the version read and appends one signed event to the scope's hold chain; of two racing
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
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Literal, TypedDict

from gate import bodies
from gate.chain.event_witness import event_tree_root, hold_chain_id
from gate.chain.links import scope_hash
from gate.clock import Clock, iso_ms
from gate.errors import GateError, SigningUnavailable
from gate.governance.table import HOLD_POLICY
from gate.holds import request as hold_request
from gate.holds.events import (
    APPROVED,
    DENIED,
    EXPIRED,
    HELD_VERDICT,
    HOLD_HISTORY_VERSION,
    OPEN,
    OUTCOMES,
    STATES,
    HoldCommitment,
    HoldEvent,
    HoldHead,
    Step,
    build_commitment,
    build_event,
    build_head,
)
from gate.holds.links import inbox_url
from gate.holds.policy import (
    PRIORITIES,
    Guard,
    HoldPolicy,
    Queue,
    check_reason_code,
    disclosed,
    move_loosens,
    recipients,
)
from gate.holds.request import HoldRequest
from gate.holds.similar import NEAREST, WINDOW, nearest
from gate.keys.config import LiveSigning, SigningSetup
from gate.keys.signing import ReceiptSigner
from gate.ledger import Ledger
from gate.ledger.holds import (
    Announce,
    Approval,
    Build,
    HoldLedger,
    HoldMove,
    HoldOpening,
    HoldQuery,
    HoldRace,
    HoldRow,
    QueueColumns,
    StoredRequest,
    Writing,
)
from gate.principals import Permissions, Principal, holder_id, is_distinct_approver, is_member, require
from gate.releases.governance import GovernanceEvent, PolicyRequestJSON
from gate.services.chains import EventChainWitness
from gate.services.governance import GovernanceService, SafeguardSettings
from gate.services.periodic import PeriodicWorker
from gate.vocabulary import HoldState

MAX_FACTS_BYTES = 16_384
MAX_NOTE: int = bodies.schema("hold-resolution")["properties"]["note"]["maxLength"]
CLAIM_TTL = timedelta(minutes=30)
RETRIES = 8
# A step on an open hold: from its row, the event's Step, the row's move and the announcement's type.
StepMaker = Callable[[HoldRow], tuple[Step, HoldMove, str]]


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


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
        summary = hold_request.read(request, _requester_holder(row), record.get("input_hash"))
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
    opened = _utc(str(record["created_at"]))
    return {
        "decision_id": record["decision_id"], "scope": scope, "record_hash": record["record_hash"],
        "policy_id": record.get("policy_id"), "policy_version": record.get("policy_version"),
        "rule_id": record.get("matched_rule_id"), "reason_code": record.get("reason_code"),
        "requested_by": requester[0], **_queue_columns(queue, opened), "priority": priority,
        "priority_rank": PRIORITIES.index(priority), "opened_at": record["created_at"],
        "deadline_at": iso_ms(opened + timedelta(seconds=queue.deadline_seconds)),
        "four_eyes": int(four_eyes), "state": OPEN, "claimed_by": None, "claimed_at": None, "approvals_json": "[]",
        "resolved_at": None, "resolved_by": None, "resolution_seq": None, "row_version": 0,
        "facts_json": _facts_text(facts), "requested_holder": requester[1],
        "request_json": None, "target_object_id": None, "source_record_id": None,
    }


def _queue_columns(queue: Queue, since: datetime) -> QueueColumns:
    """The columns a queue sets on its hold: its name, quorum and escalation time."""
    escalate = (iso_ms(since + timedelta(seconds=queue.escalate_after_seconds))
                if queue.escalate_after_seconds is not None else None)
    return {"queue": queue.name, "approvals_needed": queue.approvals_needed(),
            "require_justification": int(queue.require_justification), "escalate_at": escalate}


class HoldView(TypedDict):
    """A hold as the API, the CLI and the inbox show it (`facts`: the JSON the decide stored)."""

    decision_id: str
    state: HoldState
    queue: str
    priority: str
    opened_at: str
    deadline_at: str
    escalate_at: str | None
    policy_id: str | None
    policy_version: str | None
    rule_id: str | None
    reason_code: str | None
    record_hash: str
    requested_by: str
    requested_holder: str
    claimed_by: str | None
    claimed_at: str | None
    approvals: list[Approval]
    approvals_needed: int
    require_justification: bool
    four_eyes: bool
    resolved_at: str | None
    resolved_by: str | None
    facts: Any
    request: HoldRequest


class HoldHistory(TypedDict):
    """`hold_history_v1`: a scope's hold chain as `gate verify --hold-history` checks it."""

    hold_history_version: str
    scope_hash: str
    events: list[HoldEvent]
    head: HoldHead


class HoldPage(TypedDict):
    """One page of a scope's holds, with the count of its holds in each state."""

    ok: bool
    holds: builtins.list[HoldView]
    count: int
    total: int
    counts: dict[str, int]


class HoldResolution(TypedDict):
    """A hold's state and, once closed, its signed resolution (the closing event)."""

    ok: bool
    decision_id: str
    state: HoldState
    approved: bool
    resolution: HoldEvent | None
    hold: HoldView


class HoldStep(TypedDict):
    """What a step on a hold answers: its signed event and the hold after it."""

    ok: bool
    event: HoldEvent
    hold: HoldView


class ClosedHow(TypedDict):
    """How a closed hold closed: its resolution's vote, reason, note, actor and time."""

    vote: str | None
    reason_code: str | None
    note: str | None
    actor: str | None
    created_at: str | None


class SimilarHold(HoldView):
    """A closed hold like another: its view, its distance and how it closed."""

    distance: float
    resolution: ClosedHow


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


def hold_view(row: HoldRow, request: HoldRequest) -> HoldView:
    """A hold as the API, the CLI and the inbox show it, with its `request` (`hold_requests`)."""
    return {
        "decision_id": row["decision_id"], "state": row["state"], "queue": row["queue"],
        "priority": row["priority"], "opened_at": row["opened_at"], "deadline_at": row["deadline_at"],
        "escalate_at": row["escalate_at"], "policy_id": row["policy_id"], "policy_version": row["policy_version"],
        "rule_id": row["rule_id"], "reason_code": row["reason_code"], "record_hash": row["record_hash"],
        "requested_by": row["requested_by"], "requested_holder": _requester_holder(row),
        "claimed_by": row["claimed_by"], "claimed_at": row["claimed_at"],
        "approvals": json.loads(row["approvals_json"]), "approvals_needed": row["approvals_needed"],
        "require_justification": bool(row["require_justification"]), "four_eyes": bool(row["four_eyes"]),
        "resolved_at": row["resolved_at"], "resolved_by": row["resolved_by"], "facts": json.loads(row["facts_json"]),
        "request": request,
    }


LIST_FILTERS = ("assignee", "priority", "policy", "search")
ASSIGNEES = ("mine", "unassigned")
MAX_SEARCH = 200
# One line: no control character and no line or paragraph separator (the API documents the same
# as SEARCH_PATTERN, so a client's schema check and this one agree).
SEARCH_PATTERN = "^[^\u0000-\u001f\u007f-\u009f\u2028\u2029]*$"
_NOT_ONE_LINE = frozenset({*map(chr, range(0x20)), *map(chr, range(0x7F, 0xA0)), "\u2028", "\u2029"})


def list_query(filters: Mapping[str, str | None], reader: str | None, now: datetime) -> HoldQuery:
    """The checked filters of an inbox page (`HoldService.list`), or REQUEST_INVALID naming the
    one that is not: an unknown name, an assignee other than mine or unassigned (mine needs a
    reader), a priority the hold policy does not rank, a search that is not one line of at most
    MAX_SEARCH characters. A claim older than CLAIM_TTL is no one's (as `_check_claim` treats it)."""
    unknown = sorted(set(filters) - set(LIST_FILTERS))
    if unknown:
        raise GateError("REQUEST_INVALID", f"unknown filter(s): {', '.join(unknown)}", unknown=unknown)
    assignee, priority = filters.get("assignee") or None, filters.get("priority") or None
    raw_search = filters.get("search") or ""
    search = raw_search.strip() or None
    if assignee is not None and (assignee not in ASSIGNEES or (assignee == "mine" and not reader)):
        raise GateError("REQUEST_INVALID", f"assignee must be one of {', '.join(ASSIGNEES)}", field="assignee")
    if priority is not None and priority not in PRIORITIES:
        raise GateError("REQUEST_INVALID", f"priority must be one of {', '.join(PRIORITIES)}", field="priority")
    if len(raw_search) > MAX_SEARCH or not _NOT_ONE_LINE.isdisjoint(raw_search):
        raise GateError("REQUEST_INVALID", f"search must be one line of at most {MAX_SEARCH} characters",
                        field="search")
    return HoldQuery(states=(OPEN,), priority=priority, policy_id=filters.get("policy") or None,
                     claimed_by=reader if assignee == "mine" else None, unassigned=assignee == "unassigned",
                     live_since=iso_ms(now - CLAIM_TTL), search=search)


def hold_requests(holds: HoldLedger, scope: str, rows: Sequence[HoldRow]) -> dict[str, HoldRequest]:
    """What each hold of `scope` asks (issue 65), the one home of every shell's request: read
    from its decision's stored canonical request, signed only when that request's hash is the
    decision row's `input_hash` and its record's, and the record is the hold's (`gate.holds.request`).
    The row's own `request_json` is a copy for searching; it is never what is shown."""
    stored = holds.stored_requests(scope, [row["decision_id"] for row in rows])
    return {row["decision_id"]: _bound_request(row, stored.get(row["decision_id"])) for row in rows}


def _bound_request(row: HoldRow, stored: StoredRequest | None) -> HoldRequest:
    requester = _requester_holder(row)
    if stored is None or stored.record_hash != row["record_hash"]:
        return hold_request.unsigned(requester)
    try:
        record = json.loads(stored.record_json)
    except ValueError:
        return hold_request.unsigned(requester)
    signed_hash = record.get("input_hash") if isinstance(record, dict) else None
    return hold_request.read(stored.request_json, requester, stored.input_hash, signed_hash)


HOLD_DENIED = "HOLD_PERMISSION_DENIED"
_STAYS = "the escalation would loosen the hold's guard or tell a new recipient; it stays"  # the clock's note  # the code of every right a hold step lacks (gate.principals.require)


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


class HoldService:
    """Every use case of held actions but the opening (see the module docstring)."""

    def __init__(self, ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock, *,
                 witness: EventChainWitness, governance: GovernanceService, opener: HoldOpener) -> None:
        """Built by the composition root (`gate.services.root`) with its one witness of the
        event chains (the gate's checkpoint log, `GATE_CHECKPOINT_LOG`), its one governed-change
        service (the hold policy changes through it) and its one hold opener."""
        self.holds = HoldLedger(ledger)
        self.opener = opener  # its inbox_base: the workbench's address (GATE_WORKBENCH_URL)
        self.signing = signing
        self.witness = witness
        self.governance = governance
        self.clock = clock  # one clock for the holds, their witness and the hold policy's governed changes
        self._closed = threading.Condition()
        self._listeners: list[Callable[[str], None]] = []

    # -- reads -------------------------------------------------------------------------------
    def policy(self, scope: str) -> HoldPolicy:
        return self.opener.policy(scope)

    def show(self, scope: str, decision_id: str) -> dict[str, Any]:
        row = self._row(scope, decision_id)
        return {**self.view(row), "events": self.holds.events_of(scope, decision_id)}

    def list(self, scope: str, *, state: str = OPEN, queue: str | None = None, limit: int = 50,
             offset: int = 0, filters: Mapping[str, str | None] | None = None,
             reader: str | None = None) -> HoldPage:
        """One page of the scope's holds in `state`, the most urgent first, then the least time
        left, over every hold the filters select (`ledger.holds.HoldLedger.page`). `filters`
        (LIST_FILTERS, as the API's query and `gate holds list` name them): `assignee` (`mine`:
        under the `reader`'s live claim; `unassigned`: under no live claim), `priority`, `policy`,
        `search` (a target object or source record id, or a decision id or its beginning). A bad
        value: REQUEST_INVALID, naming it."""
        if state not in (*STATES, "closed", "all"):
            raise GateError("REQUEST_INVALID", f"state must be one of {', '.join((*STATES, 'closed', 'all'))}")
        states = {"closed": OUTCOMES, "all": STATES}.get(state, (state,))
        query = replace(list_query(filters or {}, reader, self.clock.now()), states=states, queue=queue)
        page = self.holds.page(scope, query, limit=limit, offset=offset)
        requests = hold_requests(self.holds, scope, page.rows)
        return {"ok": True, "holds": [hold_view(r, requests[r["decision_id"]]) for r in page.rows],
                "count": len(page.rows),
                "total": page.total, "counts": self.holds.counts(scope)}

    def version(self, scope: str) -> tuple[int, int]:
        """What changes whenever the scope's holds do (a hold opened, any step, the clock's too),
        read in two index lookups: what the Inbox polls before reading a page again."""
        return self.holds.version(scope)

    def resolution(self, scope: str, decision_id: str) -> HoldResolution:
        """The hold's state and, once closed, its signed resolution (the closing event)."""
        row = self._row(scope, decision_id)
        resolution = None
        if row["state"] != OPEN:
            events = self.holds.events_of(scope, decision_id)
            resolution = next((e for e in reversed(events) if e.get("outcome") is not None), None)
        return {"ok": True, "decision_id": decision_id, "state": row["state"],
                "approved": row["state"] == APPROVED and resolution is not None,
                "resolution": resolution, "hold": self.view(row)}

    def similar(self, scope: str, decision_id: str, limit: int = NEAREST,
                window: int = WINDOW) -> builtins.list[SimilarHold]:
        """The closed holds most like this one (`gate.holds.similar`): of the scope's newest
        `window` closed holds of the same policy and rule, the `limit` nearest by their numeric
        facts, nearest first, each with how it closed (its resolution's vote, reason and note)."""
        row = self._row(scope, decision_id)
        candidates = self.holds.closed_like(scope, row["policy_id"], row["rule_id"], limit=window,
                                            excluding=decision_id)
        picked = nearest(json.loads(row["facts_json"]), [json.loads(c["facts_json"]) for c in candidates], limit)
        seqs = [candidates[i]["resolution_seq"] for i, _ in picked]
        closing = self.holds.events_at(scope, [seq for seq in seqs if seq is not None])
        found: builtins.list[SimilarHold] = []
        requests = hold_requests(self.holds, scope, [candidates[i] for i, _ in picked])
        for (index, score), seq in zip(picked, seqs, strict=True):
            event = closing.get(seq) if seq is not None else None
            how: ClosedHow = ({"vote": None, "reason_code": None, "note": None, "actor": None, "created_at": None}
                              if event is None else
                              {"vote": event.get("vote"), "reason_code": event.get("reason_code"),
                               "note": event.get("note"), "actor": event.get("actor"),
                               "created_at": event.get("created_at")})
            found.append({**hold_view(candidates[index], requests[candidates[index]["decision_id"]]), "distance": score, "resolution": how})
        return found

    def history_document(self, scope: str, limit: int = 10_000) -> HoldHistory:
        """The scope's hold chain as `gate verify --hold-history` checks it offline: its newest
        `limit` events, oldest first, and the signed head that names the newest of them.
        `CHAIN_INTEGRITY_FAILED` when the stored chain does not extend its witnessed checkpoint:
        no head is signed over a chain cut back or rewritten."""
        hashed = scope_hash(scope)
        as_of = iso_ms(self.clock.now())
        with self.holds.ledger.one_snapshot():
            self.witness.check(hold_chain_id(hashed), lambda: self.holds.event_hashes(scope))
            events = self.holds.history(scope, limit)
        return {"hold_history_version": HOLD_HISTORY_VERSION, "scope_hash": hashed, "events": events,
                "head": build_head(hashed, events, as_of, self._signer())}

    def packet_part(self, scope: str, record: Mapping[str, Any]) -> tuple[builtins.list[HoldEvent],
                                                                          HoldCommitment | None]:
        """A decision's hold events (oldest first) and, for a held decision, its signed hold
        commitment (`gate.holds.events.build_commitment`), read in one snapshot from a hold chain
        checked against its witnessed checkpoint (`CHAIN_INTEGRITY_FAILED` otherwise). A decision
        that was never held has no events and no commitment: its scope's chain is not read."""
        decision_id = str(record.get("decision_id"))
        if record.get("verdict") != HELD_VERDICT:
            return self.holds.events_of(scope, decision_id), None
        hashed = scope_hash(scope)
        as_of = iso_ms(self.clock.now())  # before the reads: every checkpoint made by then is in them
        with self.holds.ledger.one_snapshot():
            hashes = self.witness.check(hold_chain_id(hashed), lambda: self.holds.event_hashes(scope))
            events = self.holds.events_of(scope, decision_id)
        return events, build_commitment(hashed, record, events, (len(hashes), event_tree_root(hashes)), as_of,
                                        self._signer())

    def view(self, row: HoldRow) -> HoldView:
        """The hold as shown, with its request read from the stored request (`hold_requests`)."""
        return hold_view(row, hold_requests(self.holds, row["scope"], [row])[row["decision_id"]])

    def _row(self, scope: str, decision_id: str) -> HoldRow:
        row = self.holds.hold(scope, decision_id)
        if row is None:  # SECURITY: another scope's hold is exactly as absent as none
            raise GateError("HOLD_NOT_FOUND", "no hold for this decision in this scope", decision_id=decision_id)
        return row

    # -- changes -----------------------------------------------------------------------------
    def resolve(self, scope: str, principal: Principal, permissions: Permissions, decision_id: str,
                body: Any) -> HoldStep:
        """A reviewer's vote; it closes the hold when it denies or completes the quorum."""
        require(permissions, "resolve", HOLD_DENIED)
        self._row(scope, decision_id)  # SECURITY: another scope's hold is a 404 before any body check
        vote = parse_vote(body)
        return self._step(scope, decision_id, lambda row: self._vote_step(row, principal, vote))

    def claim(self, scope: str, principal: Principal, permissions: Permissions, decision_id: str,
              release: bool = False) -> HoldStep:
        require(permissions, "resolve", HOLD_DENIED)
        return self._step(scope, decision_id, lambda row: self._claim_step(row, principal, release))

    def reassign(self, scope: str, principal: Principal, permissions: Permissions, decision_id: str,
                 body: Any) -> HoldStep:
        require(permissions, "resolve", HOLD_DENIED)
        self._row(scope, decision_id)  # SECURITY: another scope's hold is a 404 before any body check
        bodies.check("hold-reassign", body, "HOLD_RESOLUTION_INVALID")
        policy = self.policy(scope)
        queue, note = policy.queue(body["queue"]), body.get("note")
        if queue is None:
            raise GateError("HOLD_RESOLUTION_INVALID", "queue must name one of the scope's queues")
        return self._step(scope, decision_id,
                          lambda row: self._move_step(row, principal, "reassign", queue, note, policy))

    def escalate(self, scope: str, principal: Principal, permissions: Permissions,
                 decision_id: str) -> HoldStep:
        require(permissions, "resolve", HOLD_DENIED)
        policy = self.policy(scope)

        def step(row: HoldRow) -> tuple[Step, HoldMove, str]:
            current = policy.queue(row["queue"])
            target = policy.queue(current.escalate_to) if current and current.escalate_to else None
            if target is None:
                raise GateError("HOLD_NOT_ESCALABLE", "this hold's queue names no queue to escalate to")
            return self._move_step(row, principal, "escalate", target, None, policy)
        return self._step(scope, decision_id, step)

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
            if self._expire(row["scope"], row["decision_id"], now):
                done += 1
        return done

    def _expire(self, scope: str, decision_id: str, now: datetime) -> bool:
        """The clock's step on a due hold (expiry or escalation); False when nothing was due."""
        try:
            self._step(scope, decision_id, lambda current: self._clock_step(current, now), by_clock=True)
        except GateError:
            return False  # resolved or moved meanwhile: nothing is due any more
        return True

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
            require(permissions, "resolve", HOLD_DENIED)
            parsed.append((principal, parse_vote(body)))
        now = self.clock.now()
        if parsed and row["deadline_at"] <= iso_ms(now):  # silence is not consent: the deadline came first
            raise GateError("HOLD_ALREADY_RESOLVED", "this hold is already expired", state=EXPIRED)
        policy = self.policy(row["scope"])  # read before the write: its steps read nothing more
        makes: builtins.list[StepMaker] = [
            partial(self._vote_step, principal=principal, vote=vote, policy=policy) for principal, vote in parsed]
        if expire:
            makes.append(partial(self._clock_step, now=now))
        return self._insert_whole(row, makes)

    def _insert_whole(self, row: HoldRow, makes: Sequence[StepMaker]) -> builtins.list[HoldEvent]:
        """`HoldLedger.insert_whole` on a hold chain checked against its witnessed checkpoint in
        the write's own transaction, then the chain's new checkpoint; on a race, again."""
        signer = self._signer()
        chain_id = hold_chain_id(scope_hash(row["scope"]))
        read: builtins.list[builtins.list[str]] = []  # the chain as each try's transaction read it
        for _ in range(RETRIES):
            if self.holds.hold(row["scope"], row["decision_id"]) is not None:
                raise ValueError(f"the hold of {row['decision_id']} is written already")
            try:
                events = self.holds.insert_whole(
                    row, [partial(self._writing, make=make, signer=signer) for make in makes],
                    inbox_url=inbox_url(self.opener.inbox_base, row["scope"], row["decision_id"]),
                    witness=lambda hashes: read.append(self.witness.check(chain_id, hashes)))
            except HoldRace:
                continue
            if events:
                self.witness.publish(chain_id, [*read[-1], *(e["event_hash"] for e in events)])
            if any(e["outcome"] is not None for e in events):
                self._announce_closed(row["decision_id"])
            return events
        raise GateError("HOLD_BUSY", "the hold changed too often while this request was made; retry")

    # -- steps -------------------------------------------------------------------------------
    def _vote_step(self, row: HoldRow, principal: Principal, vote: Vote,
                   policy: HoldPolicy | None = None) -> tuple[Step, HoldMove, str]:
        """`vote` on the hold `row` under `policy` (default: the scope's in force, read now)."""
        queue = (policy or self.policy(row["scope"])).queue(row["queue"])
        holder = principal.holder_id
        if own_request(bool(row["four_eyes"]), _requester_holder(row), holder):
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
        self._check_claim(row, principal)
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

    def _check_claim(self, row: HoldRow, principal: Principal) -> None:
        claimed = row["claimed_by"]
        if claimed and claimed != principal.actor and _utc(str(row["claimed_at"])) + CLAIM_TTL > self.clock.now():
            raise GateError("HOLD_CLAIMED", "another reviewer has claimed this hold", claimed_by=claimed)

    def _claim_step(self, row: HoldRow, principal: Principal, release: bool) -> tuple[Step, HoldMove, str]:
        if release:
            if row["claimed_by"] != principal.actor:
                raise GateError("HOLD_CLAIMED", "only the reviewer who claimed this hold releases it",
                                claimed_by=row["claimed_by"])
            move: HoldMove = {"claimed_by": None, "claimed_at": None}
        else:
            self._check_claim(row, principal)
            move = {"claimed_by": principal.actor, "claimed_at": "@now"}
        step = Step("unclaim" if release else "claim", principal, "", row["decision_id"], row["record_hash"],
                    queue=row["queue"])
        return step, move, "hold.claimed" if not release else "hold.unclaimed"

    def _move_step(self, row: HoldRow, principal: Principal, action: Literal["escalate", "reassign"], queue: Queue,
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
        columns = _queue_columns(queue, self.clock.now())
        move: HoldMove = {"queue": columns["queue"], "approvals_needed": columns["approvals_needed"],
                          "require_justification": columns["require_justification"],
                          "escalate_at": columns["escalate_at"], "claimed_by": None, "claimed_at": None}
        return step, move, "hold.escalated" if action == "escalate" else "hold.reassigned"

    def _clock_step(self, row: HoldRow, now: datetime) -> tuple[Step, HoldMove, str]:
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
            return self._move_step(row, clock, "escalate", target, None, policy)
        raise GateError("HOLD_NOT_DUE", "nothing is due on this hold")

    def _step(self, scope: str, decision_id: str, make: StepMaker, *, by_clock: bool = False) -> HoldStep:
        """Read the row, make the step, write it with the row's move; on a race read again.
        SECURITY: a hold whose deadline has passed is expired first, whatever the sweeper has
        done yet, so no vote, claim or move lands after the deadline (silence is not consent)."""
        signer = self._signer()
        for _ in range(RETRIES):
            row = self._row(scope, decision_id)
            now = self.clock.now()
            if row["state"] == OPEN and row["deadline_at"] <= iso_ms(now) and not by_clock:
                self._expire(scope, decision_id, now)
                continue
            build, move_of, announce = self._writing(row, make, signer)
            try:
                event = self._append(scope, build, move=move_of, decision_id=decision_id,
                                     expected_version=row["row_version"], announce=announce)
            except HoldRace:
                continue
            if event["outcome"] is not None:
                self._announce_closed(decision_id)
            after = self._row(scope, decision_id)
            return {"ok": True, "event": event, "hold": self.view(after)}
        raise GateError("HOLD_BUSY", "the hold changed too often while this request was made; retry")

    def _writing(self, row: HoldRow, make: StepMaker, signer: ReceiptSigner | None) -> Writing:
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
            return {**move, **_closing_move(step, row, event)}
        return build, move_of, Announce(name, {
            "decision_id": decision_id, "record_hash": row["record_hash"], "queue": step.queue,
            "outcome": step.outcome, "inbox_url": inbox_url(self.opener.inbox_base, scope, decision_id)})

    def _append(self, scope: str, build: Build, **step: Any) -> HoldEvent:
        """`HoldLedger.append` on a hold chain checked against its witnessed checkpoint in the
        write's own transaction (a chain cut back or rewritten takes no event:
        `CHAIN_INTEGRITY_FAILED`), then the chain's new checkpoint appended to the log."""
        chain_id = hold_chain_id(scope_hash(scope))
        read: builtins.list[builtins.list[str]] = []
        event = self.holds.append(scope, build, witness=lambda hashes: read.append(
            self.witness.check(chain_id, hashes)), **step)
        self.witness.publish(chain_id, [*read[-1], event["event_hash"]])
        return event

    def _signer(self) -> ReceiptSigner | None:
        signer = self.signing.receipt_signer()
        if signer is None and self.signing.required:
            raise SigningUnavailable()
        return signer

    # -- waiting ---------------------------------------------------------------------------
    def on_closed(self, listener: Callable[[str], None]) -> None:
        """Call `listener(decision_id)` when this process closes a hold (the long-poll's wake-up)."""
        self._listeners.append(listener)

    def _announce_closed(self, decision_id: str) -> None:
        with self._closed:
            self._closed.notify_all()
        for listener in list(self._listeners):
            listener(decision_id)

    def wait_closed(self, scope: str, decision_id: str, seconds: float, poll: float = 0.25) -> HoldResolution:
        """The resolution, waiting up to `seconds` for the hold to close (here or in another
        process: the row is read again every `poll` seconds). For servers without parking."""
        deadline = time.monotonic() + seconds  # a wait is measured in real time, whatever the clock says
        answer = self.resolution(scope, decision_id)
        while answer["state"] == OPEN:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            with self._closed:
                self._closed.wait(min(poll, left))
            answer = self.resolution(scope, decision_id)
        return answer


def own_request(four_eyes: bool, requester: str, holder: str) -> bool:
    """Whether, under four eyes, `holder` (a principal's `holder_id`) is the `requester` (the
    holder that asked for the hold's action), so another reviewer decides: the refusal
    HOLD_FOUR_EYES of every vote, and what the Inbox tells the requester before any click."""
    return four_eyes and not is_distinct_approver(holder, (requester,))


def _requester_holder(row: HoldRow) -> str:
    """The holder of the key that asked for a held action (its stated one, else key:<id>)."""
    return holder_id(row["requested_by"], row.get("requested_holder"))


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


def _closing_move(step: Step, row: HoldRow, event: HoldEvent) -> HoldMove:
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


def hold_sweeper(service: HoldService, interval: float = 1.0) -> PeriodicWorker:
    """The worker that runs `HoldService.sweep` every `interval` seconds (one per serving process;
    every process may run one, each step still happens once). A sweep that fails (the ledger is
    away) is logged with its traceback under `gate.holds` and the next pass tries again."""
    return PeriodicWorker("hold-sweeper", service.sweep, interval, log=logging.getLogger("gate.holds"))
