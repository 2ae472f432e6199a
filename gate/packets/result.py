"""What `verify_packet` reports (`PacketVerification`), and `_State`, which collects it check by check."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gate.packets.common import PACKET_CHECKS
from gate.strict_json import JsonValue
from gate.verify.result import VerificationReport
from gate.vocabulary import DECISION_PACKET_VERSION, VERIFICATION_RESULT_VERSION


class PacketReport(TypedDict):
    """`PacketVerification.to_dict()`: the result as JSON (`POST /api/packet/verify` without `ok`,
    `gate verify --json` on a packet), in this member order."""

    verification_version: str
    artifact: str
    verified: bool
    integrity_valid: bool
    authenticity_valid: bool
    key_source: str | None
    checkpoint_key_source: str | None
    decision_id: Any  # as the packet states it (untrusted)
    packet_hash: Any  # as the packet states it (untrusted)
    checks: dict[str, bool | None]
    failed_checks: list[str]
    details: dict[str, list[str]]
    record: VerificationReport | None
    expected: dict[str, JsonValue]
    actual: dict[str, JsonValue]
    notes: list[str]


@dataclass(frozen=True)
class PacketVerification:
    """The result of `verify_packet`. `checks` maps each check to True / False / None (not
    applicable or not checkable); `failed_checks` is the sorted list of False ones, including
    per-item names (`execution_receipts[2].execution_hash`) and the embedded record's failures
    prefixed `record.`; `details` gives readable reasons per failed check."""

    verified: bool
    integrity_valid: bool
    authenticity_valid: bool
    key_source: str | None
    checks: dict[str, bool | None]
    failed_checks: tuple[str, ...]
    record: VerificationReport | None
    expected: dict[str, JsonValue]
    actual: dict[str, JsonValue]
    details: dict[str, list[str]] = field(default_factory=dict)
    decision_id: Any = None
    packet_hash: Any = None
    checkpoint_key_source: str | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> PacketReport:
        return {
            "verification_version": VERIFICATION_RESULT_VERSION,
            "artifact": DECISION_PACKET_VERSION,
            "verified": self.verified,
            "integrity_valid": self.integrity_valid,
            "authenticity_valid": self.authenticity_valid,
            "key_source": self.key_source,
            "checkpoint_key_source": self.checkpoint_key_source,
            "decision_id": self.decision_id,
            "packet_hash": self.packet_hash,
            "checks": dict(self.checks),
            "failed_checks": list(self.failed_checks),
            "details": {name: list(items) for name, items in self.details.items()},
            "record": self.record,
            "expected": dict(self.expected),
            "actual": dict(self.actual),
            "notes": list(self.notes),
        }


class _State:
    """Collects check outcomes, readable details and expected/actual values."""

    def __init__(self) -> None:
        self.checks: dict[str, bool | None] = dict.fromkeys(PACKET_CHECKS)
        self.details: dict[str, list[str]] = {}
        self.expected: dict[str, JsonValue] = {}
        self.actual: dict[str, JsonValue] = {}
        self.notes: list[str] = []

    def fail(self, name: str, message: str | None = None) -> None:
        self.checks[name] = False
        if message:
            self.details.setdefault(name, []).append(message)

    def conclude(self, name: str, problems: list[str]) -> None:
        """The check holds exactly when no problem was found."""
        if problems:
            for problem in problems:
                self.fail(name, problem)
        else:
            self.checks[name] = True

    def value(self, name: str, expected: Any, actual: Any) -> None:
        self.expected[name] = expected
        self.actual[name] = actual

    def guard(self, name: str, step: Callable[..., None], *args: Any) -> None:
        """Run one step; verification never raises on malformed content."""
        try:
            step(*args)
        except Exception as exc:  # noqa: BLE001 - any surprise in untrusted content is a failure
            self.fail(name, f"could not be checked ({type(exc).__name__})")
