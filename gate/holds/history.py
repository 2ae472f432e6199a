"""Offline verification of a scope's hold chain (`hold_history_v1`, GET /api/holds/history),
as `gate verify --hold-history FILE` runs it with no database.

The document is `{hold_history_version, scope_hash, events, head}`, the events oldest first and
`head` the chain's signed head as the gate served it (`hold_chain_head_v1`). It verifies when:

* the chain is whole from its first event: `seq` 1, 2, 3, … without a gap, each event linking
  the hash of the one before (`previous_event_hash`, null at seq 1), of the document's scope,
  its `event_hash` recomputed and its signature made by a trusted key
  (`gate.chain.sealing.chain_problem`, the check release events use), which its
  `public_key_fingerprint` names;
* every event has exactly the members of `hold_event_v1`, a known action and a well-formed
  principal whose actor it states;
* each `policy_set` event carries a hold policy that parses (`HoldPolicy.from_json`);
* each decision's events, taken together, follow the closing rules of
  `gate.holds.events.hold_events_problems`: one `record_hash` throughout, at most one close and
  only last, an approval with its quorum of distinct principals, none of them the requester
  under four eyes, an expiry that never approves.

SECURITY: an edited, deleted (other than the newest), inserted or reordered event breaks a
hash, a link or the sequence; cutting off the newest events leaves the signed head naming an
event the document lacks. A document without a head is refused. The head proves the chain as of
its `as_of` only: an older document, whole with its older head, still verifies (compare `as_of`
with when you asked). A history of more events than the endpoint returns does not start at seq 1:
it is refused, not verified from the middle. Without anchors the signatures are not checked and
the result is never `verified` (integrity only).

With checkpoints (`gate verify --hold-history FILE --checkpoints LOG`, a witness's copy of the
gate's checkpoint log, `gate.chain.event_witness`): the newest checkpoint of the scope's hold
chain made no later than the head's `as_of`, its signature verified with a trusted key, must be
extended by the document's events: fewer events (`checkpoint_log.size`: the newest were deleted,
even with the head signed again over what is left) or another RFC 6962 root over its first
`tree_size` event hashes (`checkpoint_log.consistency`: an event rewritten) fails.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gate.chain.event_check import EventChainCheck, EventChainCheckJSON, keys_given
from gate.chain.event_witness import hold_chain_id, witness_problems
from gate.chain.sealing import chain_problem, event_hash, sealed_members
from gate.errors import GateError
from gate.holds.events import (
    ACTIONS,
    HEAD_MEMBERS,
    HOLD_EVENT_VERSION,
    HOLD_HEAD_VERSION,
    HOLD_HISTORY_VERSION,
    OUTCOMES,
    fingerprint_problem,
    hold_events_problems,
    members_hold,
    signature_problem,
)
from gate.holds.policy import HoldPolicy
from gate.keys.anchors import TrustAnchors
from gate.principals import Principal
from gate.protocol.canonical import CanonicalJSONError
from gate.strict_json import JsonValue
from gate.vocabulary import HoldState

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_HEAD_MEMBERS = frozenset(HEAD_MEMBERS)


class HoldPolicyChange(TypedDict):
    """A hold-policy change a hold chain states (a `policy_set` step, made before issue 52)."""

    seq: int
    created_at: str | None
    actor: str | None
    principal: dict[str, str] | None
    policy: Any


class HoldHistoryCheckJSON(EventChainCheckJSON):
    """`HoldHistoryCheck` as JSON: the chain check's members, then the head's time, the holds
    closed per outcome and the policy changes."""

    as_of: str | None
    closed: dict[HoldState, int]
    policy_changes: list[HoldPolicyChange]


@dataclass(frozen=True, slots=True, kw_only=True)
class HoldHistoryCheck(EventChainCheck):
    """What `verify_hold_history` found: the chain check (validity: integrity, and signatures
    when anchors were given; the first problem), how many holds closed per outcome, and every
    change of the scope's hold policy."""

    closed: dict[HoldState, int] = field(default_factory=dict)
    policy_changes: tuple[HoldPolicyChange, ...] = ()
    as_of: str | None = None  # the signed head's time, once the head holds

    def to_json(self) -> HoldHistoryCheckJSON:
        return {**EventChainCheck.to_json(self), "as_of": self.as_of, "closed": dict(self.closed),
                "policy_changes": list(self.policy_changes)}


def _document_problem(document: Any) -> str | None:
    if not isinstance(document, Mapping):
        return "a hold history must be a JSON object"
    if document.get("hold_history_version") != HOLD_HISTORY_VERSION:
        return f"hold_history_version must be {HOLD_HISTORY_VERSION}"
    if not isinstance(document.get("scope_hash"), str) or not _HEX64.fullmatch(document["scope_hash"]):
        return "scope_hash must be a sha256 hex"
    if not isinstance(document.get("events"), list):
        return "events must be an array"
    return None


def _form_problem(event: Mapping[str, JsonValue], where: str) -> str | None:
    """The event's members, version, action and principal."""
    if not members_hold(event):
        return f"{where}: members differ from {HOLD_EVENT_VERSION}'s"
    if event.get("hold_event_version") != HOLD_EVENT_VERSION:
        return f"{where}: hold_event_version must be {HOLD_EVENT_VERSION}"
    if event.get("action") not in ACTIONS:
        return f"{where}: unknown action {event.get('action')!r}"
    try:
        if Principal.from_json(event.get("principal")).actor != event.get("actor"):
            return f"{where}: actor is not its principal's"
    except ValueError as exc:
        return f"{where}: principal is malformed ({exc})"
    return None


def _policy_problem(event: Mapping[str, JsonValue], where: str) -> str | None:
    if event.get("action") != "policy_set":
        return None
    try:
        HoldPolicy.from_json(event.get("policy"))
    except GateError as exc:
        return f"{where}: its policy does not parse ({exc.message})"
    return None


def _event_problem(event: Any, index: int, head: tuple[int, str | None], scope: str,
                   anchors: TrustAnchors | None) -> str | None:
    """The first problem of the event at `index` after the chain head `head` (seq, hash)."""
    where = f"event {index + 1}"
    if not isinstance(event, Mapping):
        return f"{where}: must be a JSON object"
    where = f"event {index + 1} (seq {event.get('seq')!r})"
    try:
        problem = chain_problem(event, where, head[0], head[1], scope, anchors)
    except (CanonicalJSONError, TypeError, ValueError, RecursionError):
        return f"{where}: is not canonical JSON"
    if problem is None and anchors is not None:
        fingerprint = fingerprint_problem(event, anchors)
        problem = f"{where}: {fingerprint}" if fingerprint else None
    return problem or _form_problem(event, where) or _policy_problem(event, where)


def _head_problem(document: Mapping[str, Any], events: Sequence[Mapping[str, Any]],
                  anchors: TrustAnchors | None) -> str | None:
    """The first problem of the document's signed head, or None (the events already hold)."""
    head = document.get("head")
    if not isinstance(head, Mapping):
        return "head: missing (the newest events could have been cut off unseen)"
    if not sealed_members(head, _HEAD_MEMBERS):
        return f"head: members differ from {HOLD_HEAD_VERSION}'s"
    if head.get("hold_chain_head_version") != HOLD_HEAD_VERSION:
        return f"head: hold_chain_head_version must be {HOLD_HEAD_VERSION}"
    if head.get("scope_hash") != document["scope_hash"]:
        return "head: belongs to another scope"
    if not isinstance(head.get("as_of"), str) or not _ISO_MS.fullmatch(head["as_of"]):
        return "head: as_of must be a UTC time in milliseconds (YYYY-MM-DDTHH:MM:SS.mmmZ)"
    last = (events[-1]["seq"], events[-1]["event_hash"]) if events else (0, None)
    if (head.get("seq"), head.get("head_event_hash")) != last:
        return (f"head: names seq {head.get('seq')!r}, the document ends at seq {last[0]}"
                " (events cut off, or a head of another chain)")
    if head.get("event_hash") != event_hash(head):  # every hashed member is checked above: canonical
        return "head: event_hash does not match its content (tampered)"
    problem = signature_problem(head, anchors) if anchors is not None else None
    return f"head: {problem}" if problem is not None else None


def _decision_problems(events: Sequence[Mapping[str, JsonValue]]) -> list[str]:
    """Each decision's events, together, under the closing rules (signatures already checked)."""
    by_decision: dict[str, list[Mapping[str, Any]]] = {}
    for event in events:
        if event.get("action") != "policy_set":
            by_decision.setdefault(str(event.get("decision_id")), []).append(event)
    for decision_id, own in by_decision.items():
        record = {"decision_id": decision_id, "record_hash": own[0].get("record_hash")}
        problems = hold_events_problems(record, own, None)
        if problems:
            return [f"decision {decision_id}: {problem}" for problem in problems]
    return []


def _policy_change(event: Mapping[str, Any]) -> HoldPolicyChange:
    return {"seq": event["seq"], "created_at": event.get("created_at"), "actor": event.get("actor"),
            "principal": event.get("principal"), "policy": event.get("policy")}


def _witness_problem(document: Mapping[str, Any], events: Sequence[Mapping[str, Any]],
                     checkpoints: Sequence[Mapping[str, Any]], anchors: TrustAnchors | None) -> str | None:
    """The document against the newest checkpoint of its chain held by the head's `as_of`."""
    problems = witness_problems(hold_chain_id(document["scope_hash"]), events, checkpoints, anchors,
                                document["head"]["as_of"])
    return "; ".join(problems) if problems else None


def verify_hold_history(document: Any, anchors: TrustAnchors | None,
                        checkpoints: Sequence[Mapping[str, JsonValue]] | None = None) -> HoldHistoryCheck:
    """Check a `hold_history_v1` document offline (see the module docstring). `anchors` None or
    empty: hashes, links and rules only. `checkpoints`: a checkpoint log's entries to compare the
    chain with."""
    checked = keys_given(anchors)
    usable = anchors if checked else None
    problem = _document_problem(document)
    if problem is not None:
        return HoldHistoryCheck(valid=False, signatures_checked=checked, events=0, problems=(problem,))
    events: list[Any] = document["events"]
    head: tuple[int, str | None] = (0, None)
    for index, event in enumerate(events):
        problem = _event_problem(event, index, head, document["scope_hash"], usable)
        if problem is not None:
            return HoldHistoryCheck(valid=False, signatures_checked=checked, events=len(events), problems=(problem,))
        head = (event["seq"], event["event_hash"])
    problem = _head_problem(document, events, usable)
    if problem is None and checkpoints is not None:
        problem = _witness_problem(document, events, checkpoints, usable)
    if problem is not None:
        return HoldHistoryCheck(valid=False, signatures_checked=checked, events=len(events), problems=(problem,))
    problems = _decision_problems(events)
    closed = {outcome: sum(1 for e in events if e.get("outcome") == outcome) for outcome in OUTCOMES}
    changes = tuple(_policy_change(e) for e in events if e.get("action") == "policy_set")
    return HoldHistoryCheck(valid=not problems, signatures_checked=checked, events=len(events),
                            problems=tuple(problems), closed=closed, policy_changes=changes,
                            as_of=document["head"]["as_of"])
