"""A data subject's data on request (GDPR Art. 15; issue 67, item 5; docs/privacy.md, "A subject's
export"): every decision of a scope whose request names the subject (its data map's `subject_key`,
asked through `gate.privacy.datamap.found_in`, the one answer every way out uses), the holds of
those decisions and the outbox events about them, each with the members that hold the subject's
values: request paths with their values, and JSON Pointers where a record, a hold or an event
copies one. `gate subject export` and `POST /api/subjects/exports` share this service; the
dataset's rows are found beside it by the command (`workbench.dataset.subjects`), with the same
keyed hash the export wrote (`subject_tokens`).

Cost: bounded per call. One call reads at most `PAGE_ROWS` rows, the scope's decisions first (the
keyset `(scope, created_at, decision_id)` of `ix_decisions_scope_created`, a stored request read
only when its canonical text contains the asked key), then the scope's kept outbox by `seq` (the
requests its events name read by primary key, a batch per page); an answer that stopped early
carries `next`, the cursor the next call resumes from. A whole export reads every decision and
kept event of the scope once: the ledger has no index by subject (a subject key may be declared
after its decisions were made, and such an index would be one more copy of the key to erase).

The subject's values are in the answer (it is their own access request) and nowhere else: this
service logs nothing, and the route takes the key in a body, never in a URL.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gate import bodies
from gate.errors import GateError
from gate.ledger import Ledger
from gate.ledger.holds import HoldLedger
from gate.ledger.outbox import Outbox
from gate.ledger.stream import iter_decisions
from gate.privacy.datamap import DROP, DataMap, Found, Rule, found_in
from gate.privacy.masking import Masker, scope_key, token
from gate.protocol.canonical import canonical_text
from gate.services.privacy import PrivacyService

SCHEMA = "subject-export"  # gate/bodies/subject-export.schema.json
PAGE_ROWS = 20_000  # rows (decisions, then outbox events) one call reads at most
MAX_SUBJECT_CHARS = 512
INVALID = "SUBJECT_EXPORT_INVALID"  # 400: the body, the key or the cursor is malformed
UNDECLARED = "SUBJECT_KEY_UNDECLARED"  # 409: the scope's data map names no subject key
_FIND = Rule(DROP, DROP)  # every declared member: what a copy of the subject's values is found by
_LOOKUP_CHUNK = 500


class MemberJSON(TypedDict):
    path: str
    kind: str
    value: Any


class DecisionJSON(TypedDict):
    decision_id: str
    created_at: str
    rulebook: dict[str, str | None]
    verdict: str
    members: list[MemberJSON]
    record_members: list[str]


class HoldJSON(TypedDict):
    hold_id: str
    state: str
    queue: str
    opened_at: str
    members: list[str]


class EventJSON(TypedDict):
    event_id: str
    seq: int
    type: str
    created_at: str
    decision_id: str
    members: list[str]


class SubjectExport(TypedDict):
    """What one call answers (docs/privacy.md): `next` is null when the scope was read to its end."""

    scope: str
    subject: str
    subject_key: str
    decisions: list[DecisionJSON]
    holds: list[HoldJSON]
    events: list[EventJSON]
    scanned: dict[str, int]
    next: str | None


def check_subject(subject: Any) -> str:
    """The asked key: text of 1 to `MAX_SUBJECT_CHARS` characters (any characters: it is data)."""
    if not isinstance(subject, str) or not 1 <= len(subject) <= MAX_SUBJECT_CHARS:
        raise GateError(INVALID, f"subject must be text of 1 to {MAX_SUBJECT_CHARS} characters")
    return subject


def subject_values(subject: str) -> tuple[Any, ...]:
    """The JSON values a request's subject key may hold for the asked text: the text itself and,
    when it is a JSON number (`42`), that number (a customer id may be stored as one)."""
    values: list[Any] = [subject]
    try:
        number = json.loads(subject)
    except ValueError:
        return tuple(values)
    if isinstance(number, int | float) and not isinstance(number, bool) and canonical_text(number) == subject:
        values.append(number)
    return tuple(values)


def matches(value: Any, subject: str) -> bool:
    """Whether a request's subject value is the asked subject (a string equal to it, or a number
    whose canonical text it is; never a boolean)."""
    if isinstance(value, str):
        return value == subject
    return isinstance(value, int | float) and not isinstance(value, bool) and canonical_text(value) == subject


def subject_tokens(privacy: PrivacyService, scope: str, subject: str) -> tuple[str, ...]:
    """The subject's keyed hashes as the scope's dataset holds them (`hash`, gate.privacy.masking)."""
    key = scope_key(privacy.key, scope)
    return tuple(token(key, value) for value in subject_values(subject))


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a call resumes: after a decision key (phase `d`), or after an outbox seq (phase `e`)."""

    phase: str = "d"
    created_at: str = ""
    decision_id: str = ""
    seq: int = 0

    def text(self) -> str:
        body = [self.phase, self.created_at, self.decision_id] if self.phase == "d" else [self.phase, self.seq]
        return base64.urlsafe_b64encode(canonical_text(body).encode("utf-8")).decode("ascii").rstrip("=")

    @classmethod
    def parse(cls, text: Any) -> Cursor:
        """A cursor an earlier answer gave (`next`), or SUBJECT_EXPORT_INVALID."""
        if text is None:
            return cls()
        try:
            padded = text + "=" * (-len(text) % 4)
            body = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8"))
        except (TypeError, ValueError, UnicodeError, binascii.Error):
            body = None
        if isinstance(body, list) and len(body) == 3 and body[0] == "d" and all(isinstance(v, str) for v in body[1:]):
            return cls("d", body[1], body[2])
        if isinstance(body, list) and len(body) == 2 and body[0] == "e" and type(body[1]) is int and body[1] >= 0:
            return cls("e", seq=body[1])
        raise GateError(INVALID, "after must be the `next` cursor of an earlier answer")


@dataclass
class _Page:
    scope: str
    subject: str
    data_map: DataMap
    decisions: list[DecisionJSON] = field(default_factory=list)
    holds: list[HoldJSON] = field(default_factory=list)
    events: list[EventJSON] = field(default_factory=list)
    scanned: dict[str, int] = field(default_factory=lambda: {"decisions": 0, "events": 0})
    hashes: list[Mapping[str, Any]] = field(default_factory=list)  # the decisions found, by their hashes

    def found(self, request_text: str) -> Found | None:
        """What the request holds, when its subject is the asked one (None otherwise)."""
        found = found_in(self.data_map, json.loads(request_text))
        return found if matches(found.subject, self.subject) else None


class SubjectService:
    """One scope's decisions, holds and events that hold a subject's values, a bounded page a call."""

    def __init__(self, ledger: Ledger, privacy: PrivacyService, page_rows: int | None = None) -> None:
        self.ledger, self.privacy = ledger, privacy
        self.page_rows = PAGE_ROWS if page_rows is None else page_rows
        self.holds, self.outbox = HoldLedger(ledger), Outbox(ledger)

    def export_body(self, scope: str, body: Any) -> SubjectExport:
        """`POST /api/subjects/exports`: a `{subject, after?}` body (gate/bodies/subject-export.schema.json)."""
        bodies.check(SCHEMA, body, INVALID)
        return self.export(scope, body["subject"], body.get("after"))

    def export(self, scope: str, subject: Any, after: Any = None) -> SubjectExport:
        """One page of the subject's export (SUBJECT_EXPORT_INVALID, SUBJECT_KEY_UNDECLARED)."""
        subject = check_subject(subject)
        page, cursor, done = self._read(scope, subject, Cursor.parse(after), events=True)
        return {"scope": scope, "subject": subject, "subject_key": str(page.data_map.subject_key),
                "decisions": page.decisions, "holds": page.holds, "events": page.events,
                "scanned": page.scanned, "next": None if done else cursor.text()}

    def erasable(self, scope: str, subject: str) -> list[Mapping[str, Any]]:
        """Every decision of the scope whose request names the subject (the export's search, its
        decisions' phase page after page), each as `{decision_id, input_hash, record_hash}`: what
        a subject's erasure names (gate.services.erasure). Another scope's are never read."""
        found: list[Mapping[str, Any]] = []
        cursor = Cursor()
        while True:
            page, cursor, done = self._read(scope, subject, cursor, events=False)
            found.extend(page.hashes)
            if done or cursor.phase == "e":
                return found

    def _read(self, scope: str, subject: str, cursor: Cursor, *, events: bool) -> tuple[_Page, Cursor, bool]:
        """One bounded page from `cursor`: the decisions' phase, then (with `events`) the outbox's."""
        data_map = self.privacy.settings(scope).data_map
        if data_map.subject_key is None:
            raise GateError(UNDECLARED, "the scope's data map names no subject key (PUT /api/privacy: "
                                        "data_map.subject_key): nothing says whose a decision is")
        page = _Page(scope, subject, data_map)
        budget = self.page_rows
        if cursor.phase == "d":
            cursor, budget = self._decisions(page, cursor, budget)
        if events and cursor.phase == "e" and budget > 0:
            cursor, budget = self._events(page, cursor, budget)
        return page, cursor, cursor.phase == "e" and budget > 0

    def _decisions(self, page: _Page, cursor: Cursor, budget: int) -> tuple[Cursor, int]:
        after = (page.scope, cursor.created_at, cursor.decision_id) if cursor.decision_id else None
        rows = next(iter_decisions(self.ledger, scope=page.scope, after=after, batch_size=budget), [])
        page.scanned["decisions"] = len(rows)
        needles = [canonical_text(value) for value in subject_values(page.subject)]
        for row in rows:
            text: str = row["request_json"]
            if not any(needle in text for needle in needles):
                continue
            found = page.found(text)
            if found is not None:
                self._decision(page, row, found)
        if len(rows) < budget:
            return Cursor("e"), budget - len(rows)
        return Cursor("d", rows[-1]["created_at"], rows[-1]["decision_id"]), 0

    def _decision(self, page: _Page, row: Mapping[str, Any], found: Found) -> None:
        page.hashes.append({"decision_id": row["decision_id"], "input_hash": row["input_hash"],
                            "record_hash": row["record_hash"]})
        finder = Masker(_FIND, b"", found)
        _, in_record = finder.mask_document(json.loads(row["record_json"]))
        page.decisions.append({
            "decision_id": row["decision_id"], "created_at": row["created_at"], "verdict": row["verdict"],
            "rulebook": {"id": row["policy_id"], "version": row["policy_version"], "hash": row["rulebook_hash"]},
            "members": [{"path": path, "kind": kind, "value": value} for path, kind, value in found.members],
            "record_members": sorted(set(in_record))})
        hold = self.holds.hold(page.scope, row["decision_id"])
        if hold is None:
            return
        _, in_facts = finder.mask_facts(json.loads(hold["facts_json"]))
        summary = json.loads(hold["request_json"]) if hold["request_json"] else None
        _, in_request = finder.mask_document(summary, ("request",))
        page.holds.append({"hold_id": hold["decision_id"], "state": hold["state"], "queue": hold["queue"],
                           "opened_at": hold["opened_at"],
                           "members": sorted({"/facts" + p for p in in_facts} | set(in_request))})

    def _events(self, page: _Page, cursor: Cursor, budget: int) -> tuple[Cursor, int]:
        rows = self.outbox.events_after(page.scope, cursor.seq, budget)
        page.scanned["events"] = len(rows)
        named = [(row, json.loads(row["event_json"])) for row in rows]
        ids = sorted({named_id for _, event in named if (named_id := _decision_of(event)) is not None})
        founds = self._founds(page, ids)
        for row, event in named:
            found = founds.get(_decision_of(event) or "")
            if found is None:
                continue
            _, in_event = Masker(_FIND, b"", found).mask_document(event)
            page.events.append({"event_id": row["event_id"], "seq": int(row["seq"]), "type": row["event_type"],
                                "created_at": row["created_at"], "decision_id": str(_decision_of(event)),
                                "members": sorted(set(in_event))})
        if len(rows) < budget:
            return Cursor("e", seq=cursor.seq), budget - len(rows)
        return Cursor("e", seq=int(rows[-1]["seq"])), 0

    def _founds(self, page: _Page, ids: Sequence[str]) -> dict[str, Found]:
        """Of these decisions of the scope, those whose subject is the asked one, with what they hold."""
        out: dict[str, Found] = {}
        for chunk in _chunks(ids, _LOOKUP_CHUNK):
            for decision_id, stored in self.holds.stored_requests(page.scope, chunk).items():
                found = page.found(stored.request_json)
                if found is not None:
                    out[decision_id] = found
        return out


def _decision_of(event: Any) -> str | None:
    data = event.get("data") if isinstance(event, Mapping) else None
    decision_id = data.get("decision_id") if isinstance(data, Mapping) else None
    return decision_id if isinstance(decision_id, str) else None


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]
