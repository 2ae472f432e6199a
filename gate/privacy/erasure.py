"""A data subject's erasure as the governance chain states it (issue 67, item 4; docs/privacy.md,
"Erasure"): pure, so the service, the chain's fold and every offline verifier read one value.

An erasure is a governed *act*, not a setting (`gate.governance.table`, row `subject_erasure`):
its request names the decisions found for the subject when it was asked, each with the
`input_hash` and `record_hash` its chain holds, and never the subject's value: the key is given
to the request, searched for, and forgotten. The approval (a second, distinct holder, always)
applies exactly those decisions; nothing is in force after it (each request stands alone).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gate.errors import GateError

SUBJECT_ERASURE = "subject_erasure"
INVALID = "SUBJECT_ERASURE_INVALID"  # 400: a malformed erasure body or stated erasure
NOT_FOUND = "SUBJECT_NOT_FOUND"  # 404: the scope holds no decision naming the subject
MAX_DECISIONS = 10_000  # decisions one erasure names at most (a request and its event stay bounded)


class ErasedJSON(TypedDict):
    decision_id: str
    input_hash: str
    record_hash: str


@dataclass(frozen=True, slots=True)
class ErasedDecision:
    decision_id: str
    input_hash: str
    record_hash: str

    def to_json(self) -> ErasedJSON:
        return {"decision_id": self.decision_id, "input_hash": self.input_hash, "record_hash": self.record_hash}


@dataclass(frozen=True, slots=True)
class Erasure:
    """The decisions an erasure removes the inputs of (none: the value before any request)."""

    decisions: tuple[ErasedDecision, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, object]:
        return {"decisions": [d.to_json() for d in self.decisions]}

    @property
    def ids(self) -> list[str]:
        return [d.decision_id for d in self.decisions]

    @classmethod
    def from_json(cls, body: Any) -> Erasure:
        """An erasure as an event states it, or SUBJECT_ERASURE_INVALID."""
        if not isinstance(body, Mapping) or set(body) != {"decisions"} or not isinstance(body["decisions"], list):
            raise GateError(INVALID, "an erasure states {decisions: [{decision_id, input_hash, record_hash}]}")
        if len(body["decisions"]) > MAX_DECISIONS:
            raise GateError(INVALID, f"an erasure names at most {MAX_DECISIONS} decisions")
        return cls(tuple(_decision(item) for item in body["decisions"]))


def _decision(item: Any) -> ErasedDecision:
    if (not isinstance(item, Mapping) or set(item) != {"decision_id", "input_hash", "record_hash"}
            or not isinstance(item["decision_id"], str) or not 1 <= len(item["decision_id"]) <= 64
            or not all(isinstance(item[n], str) and 1 <= len(item[n]) <= 128 for n in ("input_hash", "record_hash"))):
        raise GateError(INVALID, "an erased decision is {decision_id, input_hash, record_hash}")
    return ErasedDecision(item["decision_id"], item["input_hash"], item["record_hash"])


def weakenings(_before: Erasure, after: Erasure) -> tuple[str, ...]:
    """An erasure destroys evidence: any that names a decision is a weakening, always."""
    return ("decisions",) if after.decisions else ()
