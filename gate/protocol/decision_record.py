"""The Decision Record as a value: built once, extended by returning a new value, never changed.

A record has two halves:

* its **envelope**: every member the builder writes and `record_hash` / the receipt signature
  cover (`gate.protocol.records.build_rulebook_record`, `gate.advisory.record`), fixed when built;
* its **signed parts**: members outside `record_hash` that are known only later and that the
  receipt key signs on their own (reference facts §5): the release arm that decided a decide by
  reference (`release_arm`), the decide-time confidence (`decision_confidence`) and the chain
  position (`audit_chain`). Each comes with its signature member.

`DecisionRecord.built(envelope)` encodes the envelope's JSON text once. `with_release_arm`,
`with_confidence` and `with_audit_chain` each return a new record with one more part; the text of
the new record is the envelope's text with the parts' members written before its closing brace.
That is exactly the text `json.dumps(record, ensure_ascii=False, separators=(",", ":"))` writes of
the whole record (JSON writes an object's members in their order, and a part never names a member
the envelope has: adding one twice is a `ValueError`), so the stored text is derived from the
value, never from object identity or from which members happen to come first.

A `DecisionRecord` reads as a `Mapping` of its members in wire order (the envelope's, then the
parts'), so views, checks and the hold that opens on it read it like the JSON object it is;
`as_dict()` is a fresh plain object for what needs one (an event body, a test that forges).
The members every record has (rulebook and advisory alike: `gate.protocol.types.RecordMembers`,
`gate.protocol.advisory_record.ADVISORY_RECORD_REQUIRED`) are also typed properties
(`decision_id`, `verdict`, `record_hash`, ...), which product code reads instead of string keys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any, NotRequired, TypedDict, cast

import orjson

from gate.keys.signing import ReceiptSigner
from gate.protocol.canonical import CanonicalRuns, canonical_runs, canonical_text, canonical_with
from gate.protocol.confidence import DecisionConfidence, confidence_signature_payload
from gate.protocol.records import audit_chain_signature_payload
from gate.protocol.release_arm import ArmBlock, ReleaseArm, release_arm_hash, release_arm_signature_payload
from gate.protocol.types import AuditChainMember
from gate.vocabulary import Verdict

_json_text = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# orjson writes a finite float below 1e-4 as `0.0000…` or with a one-digit exponent (`1e-7`),
# where Python writes `1e-05` and `1e-07`; everything else a record holds it writes as Python does.
# (One expression for both, `[0-9]e-[0-9]|0\.0000`, took 107 µs over the sample record's 7 KB:
# it tries each byte; a literal start is found by a fast search, 10 µs for both tests.)
_NEGATIVE_EXPONENT = re.compile(rb"e-[0-9]")


def _orjson_may_differ(data: bytes) -> bool:
    if b"0.0000" in data:
        return True
    if b"e-" not in data:  # the common case, found by a byte search (1 against 9 µs for 7 KB)
        return False
    return any(match.start() and data[match.start() - 1] in b"0123456789"
               for match in _NEGATIVE_EXPONENT.finditer(data))


def json_text(value: Any) -> str:
    """Exactly `json.dumps(value, ensure_ascii=False, separators=(",", ":"))`, about 4 times
    faster for a record (13 against 50 µs for the sample): orjson writes the text, and where it
    could differ (a float it writes otherwise, which its text shows, or what it refuses: an
    integer beyond 64 bits, a lone surrogate, a key that is not text) Python's encoder writes it.
    A record holds no NaN or infinity (its canonical text refuses them), the one value orjson
    writes (as null) without a trace in its text."""
    try:
        data = orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return _json_text(value)
    if _orjson_may_differ(data):
        return _json_text(value)
    return data.decode("utf-8")


# The members the signed parts add, by part (each part's members in their wire order).
RELEASE_ARM_MEMBERS = ("release_arm", "release_arm_signature")
CONFIDENCE_MEMBERS = ("decision_confidence", "confidence_hash", "confidence_signature")
AUDIT_CHAIN_MEMBERS = ("audit_chain", "audit_chain_signature")
PART_MEMBERS = frozenset((*RELEASE_ARM_MEMBERS, *CONFIDENCE_MEMBERS, *AUDIT_CHAIN_MEMBERS))


class ReleaseArmPart(TypedDict):
    """The release arm's members: the block and, with a signer, its signature."""

    release_arm: ReleaseArm
    release_arm_signature: NotRequired[str]


class ConfidencePart(TypedDict):
    """The confidence's members: the block, its hash and, with a signer, its signature."""

    decision_confidence: DecisionConfidence
    confidence_hash: str
    confidence_signature: NotRequired[str]


class AuditChainPart(TypedDict):
    """The chain position's members: the record's link and, with a signer, its signature."""

    audit_chain: AuditChainMember
    audit_chain_signature: NotRequired[str]


def release_arm_part(decision_id: Any, block: ArmBlock,
                     receipt_signer: ReceiptSigner | None) -> ReleaseArmPart:
    """`release_arm` (its None members dropped, `release_arm_hash` added) and, with a signer,
    `release_arm_signature` over canon({decision_id, key_id, release_arm_hash})."""
    # The block's members but the None ones (only `subject_hash` may be None), in its order, and
    # the hash written next: exactly ReleaseArm's members.
    member = cast(ReleaseArm, {k: v for k, v in block.items() if v is not None})
    arm_hash = release_arm_hash(member)
    member["release_arm_hash"] = arm_hash
    part: ReleaseArmPart = {"release_arm": member}
    if receipt_signer is not None:
        part["release_arm_signature"] = receipt_signer.sign_payload(
            release_arm_signature_payload(decision_id, receipt_signer.key_id, arm_hash))
    return part


def confidence_part(decision_id: Any, block: DecisionConfidence,
                    receipt_signer: ReceiptSigner | None) -> ConfidencePart:
    """`decision_confidence`, its top-level `confidence_hash` copy and, with a signer,
    `confidence_signature` over canon({confidence_hash, decision_id, key_id})."""
    part: ConfidencePart = {"decision_confidence": block.copy(), "confidence_hash": block["confidence_hash"]}
    if receipt_signer is not None:
        part["confidence_signature"] = receipt_signer.sign_payload(
            confidence_signature_payload(decision_id, receipt_signer.key_id, block["confidence_hash"]))
    return part


def audit_chain_part(decision_id: Any, audit_chain: AuditChainMember,
                     receipt_signer: ReceiptSigner | None) -> AuditChainPart:
    """`audit_chain` and, with a signer, `audit_chain_signature` over
    canon({audit_chain_hash, decision_id, key_id})."""
    part: AuditChainPart = {"audit_chain": audit_chain.copy()}
    if receipt_signer is not None:
        part["audit_chain_signature"] = receipt_signer.sign_payload(
            audit_chain_signature_payload(decision_id, receipt_signer.key_id, audit_chain))
    return part


class DecisionRecord(Mapping[str, Any]):
    """A Decision Record: its envelope as built, its signed parts in the order they were added,
    and its JSON text (the text the ledger stores and a `full` answer sends)."""

    __slots__ = ("_envelope", "_envelope_runs", "_parts", "_text")

    def __init__(self, envelope: Mapping[str, Any], parts: Mapping[str, Any], text: str,
                 envelope_runs: list[CanonicalRuns] | None = None) -> None:
        self._envelope = envelope
        self._parts = parts
        self._text = text
        # The envelope's canonical text cut where the parts go (`canonical_text`), written at most
        # once and shared by every record extended from this one (the envelope never changes).
        self._envelope_runs: list[CanonicalRuns] = [] if envelope_runs is None else envelope_runs

    @classmethod
    def built(cls, envelope: Mapping[str, Any]) -> DecisionRecord:
        """A record just built: its envelope, no part yet, its text encoded once here."""
        held = PART_MEMBERS.intersection(envelope)
        if held:
            raise ValueError(f"a built record holds no signed part; this one holds {sorted(held)}")
        return cls(envelope, {}, json_text(envelope))

    @classmethod
    def stored(cls, members: Mapping[str, Any], text: str) -> DecisionRecord:
        """A record read back from the ledger: `members` parsed from its stored `text`."""
        return cls(members, {}, text)

    @property
    def text(self) -> str:
        """The record's compact JSON text: what the ledger stores."""
        return self._text

    def canonical_text(self) -> str:
        """`canonical_text(self.as_dict())`, the text a `decision.created` event carries: the
        envelope's share is written once, on the first call for any record extended from the same
        envelope (the decide's request thread calls it before the writer seals the record), and
        each call writes only the parts' members (the chain member the writer adds)."""
        if not self._envelope_runs:
            self._envelope_runs.append(canonical_runs(self._envelope, PART_MEMBERS))
        return canonical_with(self._envelope_runs[0],
                              {name: canonical_text(value) for name, value in self._parts.items()})

    @property
    def envelope(self) -> Mapping[str, Any]:
        return self._envelope

    # The members both record kinds always carry, typed as the builders write them (read as
    # stored, never converted: the text and the hashes stay the record's own). `policy_id` and `policy_version` are the
    # rulebook's own id and version (or the advisor panel's), which the rulebook states as it likes.
    @property
    def decision_id(self) -> str:
        decision_id: str = self["decision_id"]
        return decision_id

    @property
    def verdict(self) -> Verdict:
        verdict: Verdict = self["verdict"]
        return verdict

    @property
    def status(self) -> str:
        status: str = self["status"]
        return status

    @property
    def action(self) -> str:
        action: str = self["action"]
        return action

    @property
    def record_hash(self) -> str:
        record_hash: str = self["record_hash"]
        return record_hash

    @property
    def receipt_hash(self) -> str:
        receipt_hash: str = self["receipt_hash"]
        return receipt_hash

    @property
    def created_at(self) -> str:
        created_at: str = self["created_at"]
        return created_at

    @property
    def policy_id(self) -> Any:
        return self.get("policy_id")

    @property
    def policy_version(self) -> Any:
        return self.get("policy_version")

    @property
    def policy_bundle_hash(self) -> str | None:
        """The rulebook record's policy bundle hash; None on an advisory record, which has none."""
        policy_bundle_hash: str | None = self.get("policy_bundle_hash")
        return policy_bundle_hash

    def with_release_arm(self, block: ArmBlock, receipt_signer: ReceiptSigner | None) -> DecisionRecord:
        return self._with(release_arm_part(self.decision_id, block, receipt_signer))

    def with_confidence(self, block: DecisionConfidence, receipt_signer: ReceiptSigner | None) -> DecisionRecord:
        return self._with(confidence_part(self.decision_id, block, receipt_signer))

    def with_audit_chain(self, audit_chain: AuditChainMember,
                         receipt_signer: ReceiptSigner | None) -> DecisionRecord:
        return self._with(audit_chain_part(self.decision_id, audit_chain, receipt_signer))

    def _with(self, part: ReleaseArmPart | ConfidencePart | AuditChainPart) -> DecisionRecord:
        """A new record with `part`'s members after the ones it has; its text is this one's with
        them written before the closing brace (the JSON of the whole, as `json_text` writes it)."""
        again = [name for name in part if name in self._parts or name in self._envelope]
        if again:
            raise ValueError(f"the record already holds {again}: a part is added once")
        parts = {**self._parts, **part}
        if len(self._text) < 3:  # `{}`: an empty envelope has no member to follow
            return DecisionRecord(self._envelope, parts, json_text({**self._envelope, **parts}), self._envelope_runs)
        return DecisionRecord(self._envelope, parts, self._text[:-1] + "," + json_text(part)[1:], self._envelope_runs)

    def as_dict(self) -> dict[str, Any]:
        """The record as a fresh JSON object (its members shared, not copied)."""
        return {**self._envelope, **self._parts}

    def __getitem__(self, key: str) -> Any:
        if key in self._parts:
            return self._parts[key]
        return self._envelope[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._envelope
        yield from self._parts

    def __len__(self) -> int:
        return len(self._envelope) + len(self._parts)

    def __contains__(self, key: object) -> bool:
        return key in self._parts or key in self._envelope

    def __repr__(self) -> str:
        return f"DecisionRecord({self._envelope.get('decision_id')!r}, parts={list(self._parts)})"


__all__ = [
    "AUDIT_CHAIN_MEMBERS",
    "CONFIDENCE_MEMBERS",
    "PART_MEMBERS",
    "RELEASE_ARM_MEMBERS",
    "DecisionRecord",
    "audit_chain_part",
    "confidence_part",
    "json_text",
    "release_arm_part",
]
