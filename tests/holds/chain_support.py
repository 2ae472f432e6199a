"""A scope's hold chain built with the real event builder and an Ed25519 key, for the offline
checks (gate.holds.history, the packet's hold_events): no ledger, no clock."""

from __future__ import annotations

from typing import Any

from gate.chain.links import scope_hash
from gate.holds.events import HOLD_HISTORY_VERSION, Step, build_event, build_head
from gate.keys.signing import Ed25519Key, Ed25519ReceiptSigner, ReceiptSigner
from gate.principals import Principal
from gate.verify import TrustAnchors
from tests.holds.support import policy, queue

KEY = Ed25519Key.from_seed(bytes(range(100, 132)))
OTHER = Ed25519Key.from_seed(bytes(range(1, 33)))
SCOPE = "tenant_a"
REQUESTER = "key_caller"
# The held decisions, as far as their events name them (id and record hash).
RECORDS = {name: {"decision_id": f"dec_{name}", "record_hash": name * 64} for name in ("a", "b", "c", "d")}


def anchors(key: Ed25519Key = KEY) -> TrustAnchors:
    return TrustAnchors.from_registry_entries([{
        "key_id": key.key_id, "algorithm": "ed25519", "public_key": key.public_key_pem,
        "public_key_fingerprint": key.fingerprint, "status": "active", "not_before": "2026-01-01T00:00:00.000Z"}])


def _at(second: int) -> str:
    return f"2026-11-03T09:{second // 60:02d}:{second % 60:02d}.000Z"


def steps() -> list[Step]:
    """Policy set; a claimed and approved hold (a); an expired one (b); a denied one (c); a
    two-reviewer approval (d); an escalation of nothing."""
    alice, bob = Principal.person("https://id.example", "alice"), Principal.person("https://id.example", "bob")
    two = {"default": queue(), "pair": queue(quorum="two")}
    a, b, c, d = (RECORDS[n] for n in "abcd")
    close = {"four_eyes": True, "requested_by": REQUESTER}
    return [
        Step("policy_set", Principal.operator("ops"), "", policy=policy(two)),
        Step("claim", alice, "", a["decision_id"], a["record_hash"], queue="default"),
        Step("vote", alice, "", a["decision_id"], a["record_hash"], vote="approve", reason_code="CHECKED",
             note="fine by finance", queue="default", outcome="approved", approvals_needed=1, **close),
        Step("expire", Principal.clock(), "", b["decision_id"], b["record_hash"], queue="default",
             deadline_at=_at(3), outcome="expired"),
        Step("vote", bob, "", c["decision_id"], c["record_hash"], vote="deny", reason_code="TOO_THIN", queue="default",
             outcome="denied", **close),
        Step("vote", alice, "", d["decision_id"], d["record_hash"], vote="approve", reason_code="CHECKED",
             queue="pair", **close),
        Step("vote", bob, "", d["decision_id"], d["record_hash"], vote="approve", reason_code="CHECKED",
             queue="pair", outcome="approved", approvals_needed=2, votes=("@previous",), **close),
    ]


def chain(key: Ed25519Key = KEY, scope: str = SCOPE, signer: ReceiptSigner | None = None) -> list[dict[str, Any]]:
    """The events of `steps()`, sealed and chained (seq 1…), each a second after the one before,
    signed with `key` (or `signer`)."""
    signer = signer or Ed25519ReceiptSigner(key)
    events: list[dict[str, Any]] = []
    for index, step in enumerate(steps()):
        votes = tuple(events[-1]["event_hash"] if v == "@previous" else v for v in step.votes)
        at_step = Step(**{**{f: getattr(step, f) for f in step.__slots__}, "at": _at(index), "votes": votes})
        previous = events[-1]["event_hash"] if events else None
        events.append(build_event(at_step, scope_hash=scope_hash(scope), seq=index + 1,
                                  previous_event_hash=previous, signer=signer))
    return events


AS_OF = "2026-11-03T10:00:00.000Z"


def history(events: list[Any] | None = None, scope: str = SCOPE,
            signer: ReceiptSigner | None = None) -> dict[str, Any]:
    """The served document: the events (those of `chain()` by default) and the head that names
    the last of them, signed with `KEY` (or `signer`) as of `AS_OF`."""
    events = chain() if events is None else events
    last = [event for event in events[-1:] if isinstance(event, dict)]
    return {"hold_history_version": HOLD_HISTORY_VERSION, "scope_hash": scope_hash(scope), "events": events,
            "head": build_head(scope_hash(scope), last, AS_OF, signer or Ed25519ReceiptSigner(KEY))}


def of_decision(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e["decision_id"] == RECORDS[name]["decision_id"]]
