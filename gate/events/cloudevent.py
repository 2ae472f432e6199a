"""An event as a CloudEvents 1.0 structured-mode JSON document (https://github.com/cloudevents/spec,
`spec.md` and `formats/json-format.md`): the required attributes `specversion`, `id`, `source`,
`type`, the optional `subject`, `time` and `datacontenttype`, the `sequence` extension (a string,
as the sequence extension states) and `data`. The document is written once, as canonical JSON, into
the outbox row in the transaction of the fact it announces; every delivery sends those exact bytes.

Each type's `data` is declared once, in `gate/bodies/event-data.schema.json`; `cloud_event` checks
it there, so a payload built wrong raises `EventDataInvalid` and its fact's transaction rolls back
(in production as in tests: receivers code against the schema, docs/events.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from gate.bodies import check_event_data
from gate.protocol.canonical import canonical_spliced, canonical_text, sha256_hex, splice_mark
from gate.strict_json import JsonValue

SPEC_VERSION = "1.0"
CONTENT_TYPE = "application/cloudevents+json"
TYPE_PREFIX = "dev.decision-gate."
SOURCE_PREFIX = "urn:decision-gate:scope:"

# Every type an event can have (without TYPE_PREFIX), with what it announces. Its data is declared
# in gate/bodies/event-data.schema.json; tests/events/test_event_types.py holds the types here, the
# schema's and docs/events.md's equal, and each documented member list equal to its schema's.
EVENT_TYPES: dict[str, str] = {
    "release.shadow": "a version started running in shadow beside the active one",
    "release.canary": "a canary started (or changed its share) for a version",
    "release.activated": "a version became the active one",
    "release.halted": "a canary or shadow stopped (by a principal, or by its guardrail with the evidence)",
    "release.rolled_back": "the previously active version became active again",
    "release.approval_requested": "an activation or canary waits for a second principal's approval",
    "release.approved": "a second principal approved a pending request (which then took effect)",
    "release.policy_changed": "the scope's release policy changed (set, or a weakening request approved)",
    "release.policy_change_requested": "a weakening of the release policy waits for a second principal",
    "rulebook.published": "a rulebook version was published (bound) in the scope",
    "checkpoint.saved": "a signed checkpoint of the scope's audit chain was stored (its Merkle root at a size)",
    "subscription.disabled": "a webhook subscription was disabled after sustained delivery failure",
    "subscription.requested": "a new webhook endpoint (or wider event types to one) waits for a second holder "
                              "(the scope requires approvals)",
    "subscription.approved": "a second holder approved a subscription request: its subscriptions deliver",
    "hold.opened": "a decide held the action: its hold opened in a queue with a deadline (docs/holds.md)",
    "hold.voted": "a reviewer approved a hold whose quorum needs more approvals (it stays open)",
    "hold.resolved": "a hold closed as approved or denied; data.hold_event is the signed resolution",
    "hold.expired": "a hold's deadline passed with no resolution; it closed as expired, which never approves",
    "hold.escalated": "a hold moved to the next queue before its deadline",
    "hold.reassigned": "a reviewer moved a hold to another queue",
    "hold.claimed": "a reviewer claimed a hold",
    "hold.unclaimed": "a reviewer released a claimed hold",
    "hold.policy_changed": "the scope's hold policy changed (set, or a weakening request approved: a signed "
                           "governance event)",
    "hold.policy_change_requested": "a weakening of the hold policy waits for a second principal",
    "decision.created": "a decision was stored (opt-in per scope): its full record, for those who mirror the ledger",
    "anomaly.detected": "the scope's scheduled anomaly report found an anomaly (announced once until it clears)",
    "anomaly.cleared": "an anomaly announced before is no longer in the scope's scheduled report",
    "events.settings_changed": "the scope's event settings changed (set, or a request approved: a signed "
                               "governance event)",
    "events.settings_change_requested": "turning decision_created on waits for a second principal",
    "keys.granted": "the scope's keys that act on production changed (a key granted, enabled, widened or "
                    "disabled, or a grant request approved: a signed governance event)",
    "keys.grant_requested": "a key's release, approve, resolve or admin grant waits for a second holder",
    "privacy.changed": "the scope's data map or a destination's masking rule changed (set, or a weakening "
                       "approved: a signed governance event)",
    "privacy.change_requested": "a weakening of the scope's masking rules waits for a second holder",
    "subject.erased": "a data subject's erasure was approved by a second holder: the named decisions' inputs "
                      "were removed (a signed governance event naming their input_hash and record_hash)",
    "subject.erasure_requested": "a data subject's erasure waits for a second holder (it names the decisions "
                                 "found, by id and hashes; never the subject)",
}


def full_type(name: str) -> str:
    if name not in EVENT_TYPES:
        raise ValueError(f"unknown event type {name!r}")
    return TYPE_PREFIX + name


def event_id(scope: str, seq: int) -> str:
    """A deterministic id for the scope's `seq`-th event: the same event keeps its id across
    retries, replays and the stream (receivers and JetStream deduplicate by it)."""
    return "evt_" + sha256_hex({"scope": scope, "seq": seq})[:40]


class CloudEvent(TypedDict):
    """An event document, its members in the order `cloud_event` writes them (`subject` only
    when the event has one)."""

    specversion: str
    id: str
    source: str
    type: str
    time: str
    datacontenttype: str
    sequence: str
    subject: NotRequired[str]
    data: dict[str, JsonValue]


def cloud_event(scope: str, seq: int, name: str, subject: str | None, time: str,
                data: Mapping[str, Any]) -> CloudEvent:
    """The event document (attributes in the order the JSON format lists them); `data` must match
    its type's schema (`EventDataInvalid`)."""
    kind = full_type(name)
    check_event_data(name, data)
    ident, source, sequence = event_id(scope, seq), SOURCE_PREFIX + scope, str(seq)
    if subject is None:
        return {"specversion": SPEC_VERSION, "id": ident, "source": source, "type": kind, "time": time,
                "datacontenttype": "application/json", "sequence": sequence, "data": dict(data)}
    return {"specversion": SPEC_VERSION, "id": ident, "source": source, "type": kind, "time": time,
            "datacontenttype": "application/json", "sequence": sequence, "subject": subject, "data": dict(data)}


def event_text(event: Mapping[str, Any], rendered: Mapping[str, str] | None = None) -> str:
    """The event's canonical text: what the outbox stores and every delivery sends. `rendered`
    names members of its `data` whose canonical text is already written (a `decision.created`'s
    record, `DecisionRecord.canonical_text`, which the decide's request thread starts before the
    writer seals it): spliced in rather than written again, the text is the same."""
    if rendered:
        marked = {**event, "data": {**event["data"], **{name: splice_mark(name) for name in rendered}}}
        text = canonical_spliced(marked, rendered)
        if text is not None:
            return text
    return canonical_text(event)


class OutboxRow(TypedDict):
    """An event as the outbox stores it (`event_outbox`, written by `gate.ledger.outbox_write`):
    the scope's sequence number, the event's id, type and time, and its canonical text. Named
    here, below the ledger, so what reads the outbox (the stream publisher) can name it too."""

    scope: str
    seq: int
    event_id: str
    event_type: str
    created_at: str
    event_json: str
