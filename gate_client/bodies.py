"""The answers `gate_client` returns, as TypedDicts: the members docs/api.md and the OpenAPI
document promise, as received.

They describe JSON the gate sent, not JSON the client checked: a received member may be missing or
of another type, and nothing here is taken on trust. The client's routing reads records,
verifications and resolutions as untrusted `Mapping`s (`route_record`, `resolution_route`); a
packet (`gate.packets.members.DecisionPacket`) is trusted only after `verify_packet`.

No `from __future__ import annotations` here: `Required` must be a real object when the TypedDict
is created, or Python 3.11 cannot tell the required members apart.
"""

from collections.abc import Mapping
from typing import Any, Required, TypedDict

from gate.protocol.types import RulebookContract
from gate.services.periodic import WorkerHealth
from gate.strict_json import JsonValue
from gate.verify.result import CheckValue, Compared

__all__ = ["KeyRegistryAnswer", "ReceiptAnswer", "ResolutionAnswer", "RouteVerification",
           "StatusAnswer", "route_verification"]


class RouteVerification(TypedDict, total=False):
    """`Route.verification`: the record's offline verification (`VerificationResult.to_dict()`,
    `gate.verify.result.VerificationReport`, member for member: a test holds the two equal), only
    `verified` and `failed_checks` when the record was too malformed to verify (so every member is
    optional here); with a decide by reference, `input_hash` replaced (`notes` say so); routed on
    a hold's resolution, with the resolution's own check (`resolution`:
    `gate.holds.events.ResolutionCheck.to_json()`), the one member it adds."""

    verification_version: str
    verified: bool
    integrity_valid: bool
    authenticity_valid: bool
    key_source: str | None
    decision_id: Any  # as the record states it (untrusted)
    record_kind: str
    signature_algorithm: Any  # as the record states it (untrusted)
    key_id: Any  # as the record states it (untrusted)
    checks: dict[str, CheckValue]
    failed_checks: list[str]
    expected: dict[Compared, object]
    actual: dict[Compared, object]
    notes: list[str]
    resolution: dict[str, bool | str | list[str] | None]


def route_verification(verification: Mapping[str, Any] | None) -> RouteVerification:
    """A copy of a verification for a route to carry ({} for none). The routing rules take a
    verification as an untrusted `Mapping` and read each member they use as such."""
    copied: Any = dict(verification or {})  # a JSON object, read member by member as untrusted
    return copied  # type: ignore[no-any-return]


class ResolutionAnswer(TypedDict):
    """`GET /api/decision/{id}/resolution`: the held decision's state and, once closed, its signed
    resolution (the closing `hold_event_v1`), and the hold as the API shows it."""

    ok: bool
    decision_id: str
    state: str
    approved: bool
    resolution: dict[str, JsonValue] | None
    hold: dict[str, JsonValue]


class ReceiptAnswer(TypedDict, total=False):
    """`POST /api/decision/{id}/execution` (`{ok, execution}`) or `/outcome` (`{ok, outcome}`): the
    stored receipt, under its kind's name."""

    ok: Required[bool]
    execution: dict[str, JsonValue]
    outcome: dict[str, JsonValue]


class HmacKey(TypedDict):
    key_id: str
    algorithm: str
    status: str


class KeyRegistryAnswer(TypedDict, total=False):
    """`GET /api/decision/receipt-keys`: the public receipt key registry (`anchors_from_registry`
    reads a saved copy); `hmac_keys` names the HMAC key without its secret, when one signs."""

    ok: Required[bool]
    receipt_key_registry_version: Required[str]
    active_receipt_key_id: Required[str | None]
    active_receipt_signature_algorithm: Required[str | None]
    keys: Required[list[dict[str, JsonValue]]]
    hmac_keys: list[HmacKey]


class Fix(TypedDict):
    problem: str
    fix: str


class AdvisoryModes(TypedDict):
    enabled: bool
    production_verdict: bool
    modes: list[str]


class SigningStatus(TypedDict):
    ready: bool
    required: bool
    receipt_signature_algorithm: str | None
    receipt_key_id: str | None
    registry_signing: bool
    problem: str | None
    fix: str | None


class PartStatus(TypedDict, total=False):
    """The ledger's, the idempotency's, the rate limits' or the keys' check's readiness."""

    ready: Required[bool]
    dialect: str  # the ledger's
    backend: str  # the idempotency's and the rate limits'
    window_seconds: int  # the rate limits'
    scheme: str  # the keys' check's
    headers: list[str]


class Workers(TypedDict):
    healthy: bool
    workers: list[WorkerHealth]


class StatusAnswer(TypedDict):
    """`GET /api/decision/status`: readiness (`ok`, `status` ready | degraded; a degraded gate's
    503 has the same body), the versions it speaks, and each part's readiness."""

    ok: bool
    status: str
    service_version: str
    interface_version: str
    decision_protocol_version: str
    decision_record_version: str
    rulebook_contract: RulebookContract
    supported_modes: list[str]
    advisory_modes: AdvisoryModes
    supported_binding_modes: list[str]
    signing: SigningStatus
    ledger: PartStatus
    idempotency: PartStatus
    rate_limits: PartStatus
    auth: PartStatus
    registries: dict[str, str]
    problems: list[str]
    fixes: list[Fix]
    workers: Workers
