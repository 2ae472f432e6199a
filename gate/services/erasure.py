"""A data subject erased, every proof intact, the use case (GDPR Art. 17; issue 67, item 4;
docs/privacy.md, "Erasure"). `POST /api/subjects/erasures` and `gate subject erase` share it.

An erasure destroys evidence, so it is governed, always by two distinct holders: one (`admin`)
asks (`request`), a second (`approve`, never of the asker's holder) approves (`approve`), each a
signed event of the scope's governance chain (setting `subject_erasure`, gate.governance.table:
an act that never applies on one holder's word, whatever the scope requires).

The request finds the subject's decisions with the subject export's search
(`SubjectService.erasable`, the one search) and keeps, in its signed event, only what the removal
needs: each decision's id with its `input_hash` and `record_hash`. The subject's key is never
stored, logged or announced: it is in memory for the search and forgotten. The approval removes
the inputs of exactly those decisions through the one removal home (`InputRemoval.remove`, cause
`erasure`, ref `governance event N`: the approval's seq), which keeps every hash, chain link and
checkpoint. A decision made for the subject after the request is not in it: ask again.

The approval's event and the removal are two writes: if the removal fails after the event is
signed (the ledger went away between them), `resume` removes what the scope's approved erasures
named and is still there (`gate subject erase-resume`; a removal done before changes nothing).
"""

from __future__ import annotations

from typing import Any, TypedDict

from gate import bodies
from gate.errors import GateError
from gate.governance.table import SUBJECT_ERASURE
from gate.principals import Permissions, Principal
from gate.privacy.erasure import INVALID, MAX_DECISIONS, NOT_FOUND, ErasedDecision, ErasedJSON, Erasure
from gate.privacy.removal import ERASURE
from gate.releases.governance import GovernanceEvent, PolicyRequestJSON
from gate.services.governance import GovernanceService, require_permission
from gate.services.removal import InputRemoval
from gate.services.subjects import SubjectService

SCHEMA = "subject-erasure"  # gate/bodies/subject-erasure.schema.json


class ErasureRequested(TypedDict):
    """A request's answer: it waits for a second holder (`request_seq`, until `expires_at`)."""

    scope: str
    request_seq: int
    expires_at: str | None
    decisions: list[ErasedJSON]
    more: bool  # the subject has more decisions than one request names: ask again once this one is approved
    event: GovernanceEvent


class Erased(TypedDict):
    """An approval's answer: the event that erased, what it named and what was removed now."""

    scope: str
    erasure_event: int
    decisions: list[ErasedJSON]
    removed: list[str]
    event: GovernanceEvent


class Pending(TypedDict):
    scope: str
    pending: list[PolicyRequestJSON]
    governance_seq: int


def cause_ref(seq: int) -> str:
    """An erasure's removal cause reference: the approving governance event."""
    return f"governance event {seq}"


class ErasureService:
    """A subject's erasure: asked by one holder, approved by another, removed through one home."""

    def __init__(self, subjects: SubjectService, governance: GovernanceService, removal: InputRemoval) -> None:
        self.subjects, self.governance, self.removal = subjects, governance, removal

    def request(self, scope: str, principal: Principal, permissions: Permissions, body: Any) -> ErasureRequested:
        """Ask to erase the subject of a `{subject, reason?}` body (admin): a pending, signed
        request naming the decisions found (SUBJECT_ERASURE_INVALID, SUBJECT_NOT_FOUND,
        SUBJECT_KEY_UNDECLARED)."""
        require_permission(SUBJECT_ERASURE, principal, permissions, "admin")
        bodies.check(SCHEMA, body, INVALID)
        found = self.subjects.erasable(scope, body["subject"])
        if not found:
            raise GateError(NOT_FOUND, "no decision of the scope holds this subject's values (none names it at "
                                       "the subject key, or their inputs were removed already)")
        # One request names at most MAX_DECISIONS (the oldest): `more` says to ask again once it is approved.
        erasure = Erasure(tuple(ErasedDecision(str(row["decision_id"]), str(row["input_hash"]),
                                               str(row["record_hash"])) for row in found[:MAX_DECISIONS]))
        event, _ = self.governance.change(scope, SUBJECT_ERASURE, principal, permissions, lambda _before: erasure,
                                          body.get("reason"))
        if event is None or event["action"] != "policy_request":  # an act is never applied by one holder
            raise RuntimeError("an erasure request was not filed as a request")
        return {"scope": scope, "request_seq": event["seq"], "expires_at": event["expires_at"],
                "decisions": [d.to_json() for d in erasure.decisions], "more": len(found) > MAX_DECISIONS,
                "event": event}

    def approve(self, scope: str, principal: Principal, permissions: Permissions, request_seq: Any,
                reason: str | None = None) -> Erased:
        """A second, distinct holder (`approve`) approves a pending erasure: a signed event, then
        the named decisions' inputs removed (GOVERNANCE_REQUEST_NOT_FOUND, GOVERNANCE_SELF_APPROVAL)."""
        event, _ = self.governance.approve(scope, SUBJECT_ERASURE, principal, permissions, request_seq, reason)
        erasure = Erasure.from_json(event["policy_after"])
        removed = self.removal.remove(scope, erasure.ids, self.removal.cause(ERASURE, cause_ref(event["seq"])))
        return {"scope": scope, "erasure_event": event["seq"], "decisions": [d.to_json() for d in erasure.decisions],
                "removed": removed, "event": event}

    def pending(self, scope: str, principal: Principal, permissions: Permissions) -> Pending:
        """The scope's erasure requests waiting for a second holder (admin)."""
        require_permission(SUBJECT_ERASURE, principal, permissions, "admin")
        document = self.governance.document(scope, SUBJECT_ERASURE)
        return {"scope": scope, "pending": document["pending"], "governance_seq": document["governance_seq"]}

    def resume(self, scope: str) -> list[str]:
        """Remove what an approved erasure of the scope named and is still there (an approval
        whose removal did not run); returns the ids removed now."""
        done: list[str] = []
        for event in self.governance.history(scope):
            if event.get("setting") == SUBJECT_ERASURE and event["action"] == "policy_approve":
                ids = Erasure.from_json(event["policy_after"]).ids  # those removed before are left as they are
                done += self.removal.remove(scope, ids, self.removal.cause(ERASURE, cause_ref(event["seq"])))
        return done


__all__ = ["SCHEMA", "Erased", "ErasureRequested", "ErasureService", "Pending", "cause_ref"]
