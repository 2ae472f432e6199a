"""Reading held actions (issue 43, docs/holds.md): a hold as every shell shows it, with the request
it holds read from the decision's stored canonical request; a page of the Inbox's triage queue
under its checked filters; a hold's resolution, the closed holds like it, and the scope's hold
chain and a decision's hold events as the offline checks take them.

`HoldReads` reads and signs what it reads (a hold chain's head, a packet's hold commitment); it
never changes a hold. The composition root (`gate.services.root`) builds it once for the hold
service and its writer (`gate.services.hold_writes`), over the one `HoldLedger` they share.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypedDict

from gate.chain.event_witness import event_tree_root, hold_chain_id
from gate.chain.links import scope_hash
from gate.clock import Clock, iso_ms
from gate.errors import GateError, SigningUnavailable
from gate.holds import request as hold_request
from gate.holds.events import (
    APPROVED,
    HELD_VERDICT,
    HOLD_HISTORY_VERSION,
    OPEN,
    OUTCOMES,
    STATES,
    HoldCommitment,
    HoldEvent,
    HoldHead,
    build_commitment,
    build_head,
)
from gate.holds.policy import PRIORITIES
from gate.holds.request import HoldRequest
from gate.holds.similar import NEAREST, WINDOW, nearest
from gate.keys.config import LiveSigning, SigningSetup
from gate.keys.signing import ReceiptSigner
from gate.ledger import Ledger
from gate.ledger.holds import Approval, HoldLedger, HoldQuery, HoldRow, StoredRequest
from gate.principals import holder_id
from gate.services.chains import EventChainWitness
from gate.vocabulary import HoldState

CLAIM_TTL = timedelta(minutes=30)


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

def hold_view(row: HoldRow, request: HoldRequest) -> HoldView:
    """A hold as the API, the CLI and the inbox show it, with its `request` (`hold_requests`)."""
    return {
        "decision_id": row["decision_id"], "state": row["state"], "queue": row["queue"],
        "priority": row["priority"], "opened_at": row["opened_at"], "deadline_at": row["deadline_at"],
        "escalate_at": row["escalate_at"], "policy_id": row["policy_id"], "policy_version": row["policy_version"],
        "rule_id": row["rule_id"], "reason_code": row["reason_code"], "record_hash": row["record_hash"],
        "requested_by": row["requested_by"], "requested_holder": requester_holder(row),
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
    requester = requester_holder(row)
    if stored is None or stored.record_hash != row["record_hash"]:
        return hold_request.unsigned(requester)
    try:
        record = json.loads(stored.record_json)
    except ValueError:
        return hold_request.unsigned(requester)
    signed_hash = record.get("input_hash") if isinstance(record, dict) else None
    return hold_request.read(stored.request_json, requester, stored.input_hash, signed_hash)


def requester_holder(row: HoldRow) -> str:
    """The holder of the key that asked for a held action (its stated one, else key:<id>)."""
    return holder_id(row["requested_by"], row.get("requested_holder"))


def hold_signer(signing: SigningSetup | LiveSigning) -> ReceiptSigner | None:
    """The key a hold event, head or commitment is signed with now (None: unsigned, allowed);
    SigningUnavailable when signing is required and no key is loaded."""
    signer = signing.receipt_signer()
    if signer is None and signing.required:
        raise SigningUnavailable()
    return signer


class HoldReads:
    """Every read of held actions (see the module docstring)."""

    def __init__(self, ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock, *,
                 witness: EventChainWitness) -> None:
        """Built by the composition root with the one witness of the event chains: a hold chain
        is read only as far as it extends its witnessed checkpoint."""
        self.holds = HoldLedger(ledger)
        self.signing = signing
        self.clock = clock
        self.witness = witness

    def show(self, scope: str, decision_id: str) -> dict[str, Any]:
        row = self.row(scope, decision_id)
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
        row = self.row(scope, decision_id)
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
        row = self.row(scope, decision_id)
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
                "head": build_head(hashed, events, as_of, hold_signer(self.signing))}

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
                                        hold_signer(self.signing))

    def view(self, row: HoldRow) -> HoldView:
        """The hold as shown, with its request read from the stored request (`hold_requests`)."""
        return hold_view(row, hold_requests(self.holds, row["scope"], [row])[row["decision_id"]])

    def row(self, scope: str, decision_id: str) -> HoldRow:
        """The hold of `decision_id` in `scope`, or HOLD_NOT_FOUND."""
        row = self.holds.hold(scope, decision_id)
        if row is None:  # SECURITY: another scope's hold is exactly as absent as none
            raise GateError("HOLD_NOT_FOUND", "no hold for this decision in this scope", decision_id=decision_id)
        return row
