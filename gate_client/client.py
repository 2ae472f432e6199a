"""`gate_client.client`: a Python client for a Decision Gate, with fail-closed routing.

Needs the core and `requests` (`pip install 'decision-gate[client]'`); no server packages.

    from gate_client.client import GateClient, anchors_from_registry

    gate = GateClient("https://gate.example", api_key, anchors=anchors_from_registry("receipt-keys.json"))
    route = gate.route(request)            # decide, verify offline, route
    if route.proceed:                      # only a verified `yes` proceeds
        run_the_action()
        gate.execution(route.record, "executed")
    else:
        send_to_review(route.reason)       # `no`, `review`, needs-input, advisory, any error

What it guarantees (docs/client.md):
- `decide` sends an `x-idempotency-key` (the caller's, or a fresh one) and retries transport
  errors, timeouts, 408, 429, 500, 502, 503 and 504 with exponential backoff and jitter, always
  with the same key, so a retry can never create a second record. `Retry-After` is honoured up
  to `max_backoff`; a longer wait ends the retries.
- `route` proceeds only when the record verifies offline against the operator's trust anchors
  (never a key the server or the record supplies), is bound to the request that was sent
  (`input_hash`), says `yes` in both `verdict` and `c`, is not a needs-input record, and is not
  advisory (`gate.protocol.advisory_record.is_advisory`, the one rule the gate, its routes and
  `gate_client.routing` share: any part of the advisory contract, malformed or not).
  Everything else, including every error, 401/403/429/5xx and timeout, routes to review (`no`,
  verified, routes to deny).
- Receipts and outcomes (`execution`, `outcome`) carry the record's hashes and an idempotency
  key; `packet` exports a Decision Packet and `verify_packet` checks it offline.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from gate.errors import GateError
from gate.packets import verify_packet
from gate.packets.members import DecisionPacket
from gate.packets.result import PacketVerification
from gate.protocol.advisory_record import is_advisory
from gate.protocol.canonical import CanonicalJSONError, parse_strict
from gate.verify import (
    SOURCE_KEY_REGISTRY_FILE,
    SOURCE_KEY_REGISTRY_URL,
    TrustAnchors,
    verify_record,
)
from gate.verify.result import VerificationResult
from gate_client.bodies import (
    KeyRegistryAnswer,
    ReceiptAnswer,
    ResolutionAnswer,
    RouteVerification,
    StatusAnswer,
    route_verification,
)
from gate_client.resolutions import (
    DENY,
    PROCEED,
    REVIEW,
    next_pause,
    request_limit,
    resolution_verdict,
    wait_seconds,
)

__all__ = [
    "DENY",
    "PROCEED",
    "REVIEW",
    "Decision",
    "GateClient",
    "GateClientError",
    "Route",
    "anchors_from_registry",
    "is_advisory",
    "resolution_route",
    "route_record",
]

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# A receipt write still being finished by an earlier attempt with the same key: retry it.
RETRY_CODES = frozenset({"SVC_EXECUTION_IDEMPOTENCY_IN_PROGRESS", "SVC_OUTCOME_IDEMPOTENCY_IN_PROGRESS",
                         "SVC_CRM_SYNC_IDEMPOTENCY_IN_PROGRESS"})
MAX_RESPONSE_BYTES = 32 * 1024 * 1024  # a packet is at most 16 MiB; anything larger is refused


class GateClientError(GateError):
    """A request that did not succeed. `status` is the HTTP status (None: no answer), `code` the
    gate's error code (or TRANSPORT / TIMEOUT / UNEXPECTED_RESPONSE), `body` the error body."""

    def __init__(self, status: int | None, code: str, message: str, *, body: Any = None,
                 retry_after: float | None = None, attempts: int = 1) -> None:
        super().__init__(code, message)
        self.status, self.body = status, body
        self.retry_after, self.attempts = retry_after, attempts

    def __str__(self) -> str:
        answer = f"{self.code}: {self.message}"
        return answer if self.status is None else f"HTTP {self.status} {answer}"

    @property
    def retryable(self) -> bool:
        return self.status is None or self.status in RETRY_STATUSES or self.code in RETRY_CODES


@dataclass(frozen=True)
class Answer:
    """One HTTP answer, its body read (bounded)."""

    status: int
    headers: Mapping[str, str]
    content: bytes


@dataclass(frozen=True)
class Decision:
    """A decide answer: the record as received, and what the response said about it."""

    record: dict[str, Any]
    idempotency_key: str
    replayed: bool
    attempts: int
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Route:
    """Where the caller goes: `proceed` (a verified `yes`), `deny` (a verified `no`) or `review`."""

    route: str
    reason: str
    record: dict[str, Any] | None = None
    verification: RouteVerification | None = None
    error: GateClientError | None = None
    idempotency_key: str | None = None
    resolution: dict[str, Any] | None = None  # the hold's resolution this route was made on, as received

    @property
    def proceed(self) -> bool:
        return self.route == PROCEED

    @property
    def held(self) -> bool:
        """Whether the gate held the action: a binding `review` record that verified, whose hold's
        resolution (`route_by_resolution`), not a new decide, says whether it proceeds. An error, a
        record that failed verification and an advisory record are no hold to wait on."""
        return (self.route == REVIEW and self.record is not None and self.record.get("verdict") == "review"
                and (self.verification or {}).get("verified") is True and not is_advisory(self.record))


def anchors_from_registry(location: str | Path | Mapping[str, Any], *, timeout: float = 10.0) -> TrustAnchors:
    """Trust anchors from a receipt-key registry: a saved JSON file, a URL the operator trusts, or the
    parsed body. Pin these: a client that takes its keys from the server it checks proves nothing."""
    if isinstance(location, Mapping):
        return TrustAnchors.from_registry_body(dict(location), SOURCE_KEY_REGISTRY_FILE)
    text = str(location)
    if text.startswith(("http://", "https://")):
        try:
            response = requests.get(text, timeout=timeout)
        except requests.RequestException as exc:
            raise GateClientError(None, "TRANSPORT", f"cannot fetch key registry {text}: {type(exc).__name__}") from exc
        if response.status_code != 200:
            raise GateClientError(response.status_code, "KEY_REGISTRY_UNAVAILABLE", f"cannot fetch key registry {text}")
        return TrustAnchors.from_registry_body(response.content, SOURCE_KEY_REGISTRY_URL)
    return TrustAnchors.from_registry_body(Path(text).read_bytes(), SOURCE_KEY_REGISTRY_FILE)


def route_record(record: Any, verification: Mapping[str, Any] | None) -> Route:
    """The routing rule on a received record and its offline verification result (pure)."""
    if not isinstance(record, Mapping):
        return Route(REVIEW, "the gate did not return a Decision Record")
    record = dict(record)
    if is_advisory(record):
        return Route(REVIEW, "advisory record (decision_contract): never an approval", record, route_verification(verification))
    if not verification or verification.get("verified") is not True:
        failed = ", ".join((verification or {}).get("failed_checks") or []) or "not verified"
        return Route(REVIEW, f"record failed offline verification: {failed}", record, route_verification(verification))
    verdict, compact, status = record.get("verdict"), record.get("c"), record.get("status")
    if status == "needs_input":
        return Route(REVIEW, "the gate needs more input (needs_input)", record, route_verification(verification))
    if verdict == "yes" and compact == "yes":
        return Route(PROCEED, "verified yes", record, route_verification(verification))
    if verdict == "no" and compact == "no":
        return Route(DENY, f"verified no ({record.get('reason_code')})", record, route_verification(verification))
    return Route(REVIEW, f"verdict {verdict!r} ({record.get('reason_code')})", record, route_verification(verification))


def resolution_route(record: Any, resolution: Any, anchors: TrustAnchors,
                     verification: Mapping[str, Any] | None = None) -> Route:
    """The routing rule on a held record and its resolution (docs/holds.md): the rule is
    `gate_client.resolutions.resolution_verdict`. `verification` is the record's own offline
    verification (`verify_record(...).to_dict()`); without it the record is verified here with
    `anchors`. SECURITY: only a verified approval bound to this very record proceeds; an expiry is
    a refusal (silence is not consent)."""
    if not isinstance(record, Mapping):
        return Route(REVIEW, "no Decision Record to bind the resolution to")
    record = dict(record)
    if verification is None:
        verification = verify_record(record, anchors=anchors).to_dict()
    verdict = resolution_verdict(record, resolution, anchors, verification)
    return Route(verdict.route, verdict.reason, record, verdict.details,
                 resolution=dict(resolution) if isinstance(resolution, Mapping) else None)


class GateClient:
    """One gate, one API key, the operator's trust anchors."""

    def __init__(self, base_url: str, api_key: str | None = None, *, anchors: TrustAnchors | None = None,
                 timeout: float = 10.0, retries: int = 3, backoff: float = 0.25, max_backoff: float = 8.0,
                 session: requests.Session | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if retries < 0 or backoff < 0 or max_backoff < 0 or timeout <= 0:
            raise ValueError("retries, backoff and max_backoff must be >= 0 and timeout > 0")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.anchors = anchors or TrustAnchors()
        self.timeout, self.retries, self.backoff, self.max_backoff = timeout, retries, backoff, max_backoff
        self._session = session or requests.Session()
        self._sleep, self._clock = sleep, clock

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> GateClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ decide and route

    def decide(self, request: Mapping[str, Any], *, idempotency_key: str | None = None) -> Decision:
        """POST /api/decide with an idempotency key (retries reuse it). Raises GateClientError."""
        key = idempotency_key or f"client-{uuid.uuid4().hex}"
        answer, attempts = self._send("POST", "/api/decide", body=request, idempotency_key=key, retry=True)
        record = self._json(answer)
        if not isinstance(record, dict):
            raise GateClientError(answer.status, "UNEXPECTED_RESPONSE", "decide did not answer a JSON object")
        replayed = {k.lower(): v for k, v in answer.headers.items()}.get("x-idempotency-status") == "replayed"
        return Decision(record, key, replayed, attempts,
                        answer.headers)

    def verify(self, record: Mapping[str, Any], request: Any = None) -> VerificationResult:
        """Verify a record offline with this client's trust anchors (and its request, when given)."""
        return verify_record(record, anchors=self.anchors, original_input=request)

    def route(self, request: Mapping[str, Any], *, idempotency_key: str | None = None) -> Route:
        """Decide, verify offline, route. Never raises for a gate or network failure: those route to review."""
        idempotency_key = idempotency_key or f"client-{uuid.uuid4().hex}"
        try:
            decision = self.decide(request, idempotency_key=idempotency_key)
        except GateClientError as error:
            return Route(REVIEW, f"no usable answer from the gate: {error}", error=error,
                         idempotency_key=idempotency_key)
        route = self.check(decision.record, request)
        return Route(route.route, route.reason, route.record, route.verification, None, decision.idempotency_key)

    def check(self, record: Any, request: Mapping[str, Any]) -> Route:
        """`route`'s rule on a record already received for `request`, offline: verified with this
        client's anchors, bound to `request` (by reference: to its signed release arm), routed by
        `route_record`. An agent adapter checks a stored record again with it before a tool runs."""
        if not isinstance(record, Mapping):
            return route_record(record, None)
        try:
            verification = route_verification(self.verify(record, request).to_dict())
        except GateError as error:  # a record too malformed to verify at all
            verification = {"verified": False, "failed_checks": [error.code]}
        if isinstance(request.get("rulebook_ref"), Mapping):
            verification = by_reference_verification(record, request, verification)
        return route_record(record, verification)

    def decide_by_reference(self, request: Mapping[str, Any], rulebook_id: str, version: str | None = None, *,
                            idempotency_key: str | None = None) -> Decision:
        """Decide with the scope's published rulebook (docs/releases.md): `request` without its
        `rulebook`; without `version` the scope's release picks it (active or canary arm)."""
        return self.decide(_by_reference(request, rulebook_id, version), idempotency_key=idempotency_key)

    def route_by_reference(self, request: Mapping[str, Any], rulebook_id: str, version: str | None = None, *,
                           idempotency_key: str | None = None) -> Route:
        """`route` for a decide by reference: proceeds only on a verified `yes` whose signed
        `release_arm` names this rulebook (and version, when pinned) and whose attested facts hash
        is this request's facts."""
        return self.route(_by_reference(request, rulebook_id, version), idempotency_key=idempotency_key)

    # ------------------------------------------------------------------ held actions (docs/holds.md)

    def resolution(self, decision_id: str, *, wait: float = 0) -> ResolutionAnswer:
        """GET the held decision's state and signed resolution, waiting up to `wait` seconds (its
        whole seconds, 0-30) for it on the server; one request, retried as reads are. Raises
        GateClientError (a 404 when nothing is held), ValueError for a wait that is not a number."""
        return self._resolution(decision_id, wait_seconds(wait), retry=True)

    def _resolution(self, decision_id: str, seconds: int, *, retry: bool) -> ResolutionAnswer:
        answer, _ = self._send("GET", f"/api/decision/{_segment(decision_id)}/resolution",
                               params={"wait": seconds}, retry=retry, timeout=self.timeout + seconds)
        body: ResolutionAnswer = self._json(answer)
        return body

    def wait_for_resolution(self, record: Mapping[str, Any], *, timeout: float = 300.0) -> ResolutionAnswer:
        """Long-poll until the hold on `record` closes or `timeout` seconds pass; the last answer.
        At most ceil(timeout / 30) + 1 requests, the gate's `Retry-After` honoured, never past the
        deadline (gate_client.resolutions). Raises GateClientError for an error that ends the wait."""
        decision_id = str(record["decision_id"])
        wait_seconds(timeout)  # a number, or ValueError
        deadline, limit, sent = self._clock() + timeout, request_limit(timeout), 0
        while True:
            sent += 1
            try:
                answer = self._resolution(decision_id, wait_seconds(deadline - self._clock()), retry=False)
            except GateClientError as error:
                pause = self._pause_after(error, deadline - self._clock(), sent, limit)
                if pause is None:
                    raise
                self._sleep(pause)
                continue
            pause = next_pause(deadline - self._clock(), sent, limit)
            if answer.get("state") != "open" or pause is None:
                return answer
            self._sleep(pause)

    def _pause_after(self, error: GateClientError, left: float, sent: int, limit: int) -> float | None:
        """The pause before a wait's next request after `error`: the gate's Retry-After, else a
        backoff; None (the wait ends) for an error not worth retrying or a pause past the wait."""
        if not error.retryable:
            return None
        wanted = error.retry_after if error.retry_after is not None else self._backoff(sent)
        return next_pause(left, sent, limit, wanted)

    def route_by_resolution(self, record: Mapping[str, Any], resolution: Any = None, *,
                            wait: float = 0) -> Route:
        """Where a held action goes: `proceed` only on a resolution that verifies with this
        client's anchors, is bound to `record` (decision id and record hash), closes the hold as
        `approved`, and whose record verifies too; `deny` on a verified denial or expiry;
        `review` while the hold is open or when anything fails to verify or answer. Without
        `resolution`, asks the gate, waiting up to `wait` seconds (`wait_for_resolution`: at most
        ceil(wait / 30) + 1 requests; `wait=0` asks once)."""
        if resolution is None:
            try:
                answer = self.wait_for_resolution(record, timeout=wait)
            except GateClientError as error:
                return Route(REVIEW, f"no usable answer from the gate: {error}", dict(record), error=error)
            resolution = answer.get("resolution")
            if resolution is None:
                return Route(REVIEW, f"the hold is {answer.get('state', 'unknown')}: not approved", dict(record))
        return resolution_route(record, resolution, self.anchors, self.verify(record).to_dict())

    # ------------------------------------------------------------------ lifecycle, packets

    def execution(self, record: Mapping[str, Any], execution_status: str, *, idempotency_key: str | None = None,
                  **fields: Any) -> ReceiptAnswer:
        """POST an execution receipt bound to the record's hashes; returns `{ok, execution}`."""
        body = {"execution_status": execution_status, "decision_record_hash": record["record_hash"],
                "decision_receipt_hash": record["receipt_hash"], **fields}
        return self._receipt(record["decision_id"], "execution", body, idempotency_key)

    def outcome(self, record: Mapping[str, Any], outcome_status: str, *, idempotency_key: str | None = None,
                **fields: Any) -> ReceiptAnswer:
        """POST an outcome bound to the record's hashes; returns `{ok, outcome}`."""
        body = {"outcome_status": outcome_status, "decision_record_hash": record["record_hash"],
                "decision_receipt_hash": record["receipt_hash"], **fields}
        return self._receipt(record["decision_id"], "outcome", body, idempotency_key)

    def packet(self, decision_id: str, **params: Any) -> DecisionPacket:
        """GET the decision's packet (query parameters as keywords, e.g. include_input=True), as
        received: trusted only after `verify_packet`."""
        query = {name: (str(value).lower() if isinstance(value, bool) else value) for name, value in params.items()}
        answer, _ = self._send("GET", f"/api/decision/{_segment(decision_id)}/packet", params=query, retry=True)
        packet: DecisionPacket = self._json(answer)
        return packet

    def verify_packet(self, packet: Mapping[str, Any], request: Any = None) -> PacketVerification:
        return verify_packet(packet, anchors=self.anchors, original_input=request)

    def status(self) -> StatusAnswer:
        """GET /api/decision/status; a degraded gate (503) is returned, not raised."""
        try:
            answer, _ = self._send("GET", "/api/decision/status")
        except GateClientError as error:
            degraded: StatusAnswer = error.body  # a degraded gate answers the same body with 503
            if error.status == 503 and isinstance(degraded, dict):
                return degraded
            raise
        status: StatusAnswer = self._json(answer)
        return status

    def receipt_keys(self) -> KeyRegistryAnswer:
        answer, _ = self._send("GET", "/api/decision/receipt-keys")
        keys: KeyRegistryAnswer = self._json(answer)
        return keys

    def _receipt(self, decision_id: str, kind: str, body: dict[str, Any],
                 idempotency_key: str | None) -> ReceiptAnswer:
        key = idempotency_key or f"client-{uuid.uuid4().hex}"
        answer, _ = self._send("POST", f"/api/decision/{_segment(decision_id)}/{kind}", body=body,
                               idempotency_key=key, retry=True)
        receipt: ReceiptAnswer = self._json(answer)
        return receipt

    # ------------------------------------------------------------------ transport

    def _send(self, method: str, path: str, *, body: Any = None, params: Mapping[str, Any] | None = None,
              idempotency_key: str | None = None, retry: bool = False,
              timeout: float | None = None) -> tuple[Answer, int]:
        headers = {"accept": "application/json"}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        if idempotency_key:
            headers["x-idempotency-key"] = idempotency_key
        data = None
        if body is not None:
            headers["content-type"] = "application/json"
            data = json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
        attempts = self.retries + 1 if retry else 1
        for attempt in range(1, attempts + 1):
            try:
                answer = self._exchange(method, path, data, params, headers, timeout)
            except requests.Timeout as exc:
                error = GateClientError(None, "TIMEOUT", f"no answer within {self.timeout} s ({type(exc).__name__})")
            except requests.RequestException as exc:
                error = GateClientError(None, "TRANSPORT", f"{method} {path} failed: {type(exc).__name__}")
            except GateClientError as exc:  # an answer too large to accept
                error = exc
            else:
                if answer.status < 400:
                    return answer, attempt
                error = _error_from(answer)
            error.attempts = attempt
            delay = self._delay(attempt, error.retry_after)
            if attempt == attempts or not error.retryable or delay is None:
                raise error
            self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _exchange(self, method: str, path: str, data: bytes | None, params: Mapping[str, Any] | None,
                  headers: dict[str, str], timeout: float | None = None) -> Answer:
        with self._session.request(method, self.base_url + path, data=data, params=params, headers=headers,
                                   timeout=timeout or self.timeout, stream=True) as response:
            chunks, size = [], 0
            for chunk in response.iter_content(65536):
                size += len(chunk)
                if size > MAX_RESPONSE_BYTES:
                    raise GateClientError(response.status_code, "UNEXPECTED_RESPONSE",
                                          "the answer is larger than the client accepts (32 MiB)")
                chunks.append(chunk)
            return Answer(response.status_code, dict(response.headers), b"".join(chunks))

    def _delay(self, attempt: int, retry_after: float | None) -> float | None:
        """Exponential backoff with jitter; the server's Retry-After when it says one (None: too long)."""
        if retry_after is not None:
            return retry_after if retry_after <= self.max_backoff else None
        return self._backoff(attempt)

    def _backoff(self, attempt: int) -> float:
        ceiling: float = min(self.max_backoff, self.backoff * (2 ** (attempt - 1)))
        return ceiling * (0.5 + random.random() / 2)  # noqa: S311 - jitter, not a secret

    @staticmethod
    def _json(answer: Answer) -> Any:
        try:
            return parse_strict(answer.content)
        except CanonicalJSONError as exc:
            raise GateClientError(answer.status, "UNEXPECTED_RESPONSE",
                                  f"the answer is not valid JSON: {exc.message}") from exc


def _by_reference(request: Mapping[str, Any], rulebook_id: str, version: str | None) -> dict[str, Any]:
    body = {k: v for k, v in request.items() if k != "rulebook"}
    body["rulebook_ref"] = {"rulebook_id": rulebook_id, **({"version": version} if version is not None else {})}
    return body


def by_reference_verification(record: Mapping[str, Any], request: Mapping[str, Any],
                              verification: Mapping[str, Any]) -> RouteVerification:
    """The verification of a decide by reference. Its record's `input_hash` is that of the inline
    request the gate made from the published rulebook, which the caller does not hold, so that one
    check is replaced by three: the attested facts hash is this request's `context.inputs`, the
    signed `release_arm` verifies, and it names the referenced rulebook (and pinned version).
    Anything else failing still fails."""
    ref = request.get("rulebook_ref")
    arm = record.get("release_arm")
    checks = verification.get("checks") or {}
    failed = [name for name in verification.get("failed_checks") or () if name != "input_hash"]
    bound = bool(
        isinstance(ref, Mapping) and isinstance(arm, Mapping)
        and arm.get("rulebook_id") == ref.get("rulebook_id")
        and ("version" not in ref or arm.get("version") == ref.get("version"))
        and checks.get("rulebook_attestation_input_hash") is True
        and checks.get("release_arm_signature") is True
        and checks.get("receipt_signature") is True
    )
    if not bound:
        failed.append("release_reference")
    checked = route_verification(verification)
    checked["verified"], checked["failed_checks"] = not failed, sorted(set(failed))
    checked["notes"] = [*(verification.get("notes") or ()),
                        "decide by reference: input_hash replaced by the attested facts hash and the signed release arm"]
    return checked


def _segment(value: str) -> str:
    """A path segment from an id: refuses anything that could change the path."""
    if not isinstance(value, str) or not value or any(ch in value for ch in "/?#%") or not value.isprintable():
        raise ValueError(f"not a usable id: {value!r}")
    return value


def _error_from(answer: Answer) -> GateClientError:
    try:
        body = parse_strict(answer.content)
    except CanonicalJSONError:
        body = None
    code, message = "UNEXPECTED_RESPONSE", f"HTTP {answer.status} without the gate's error body"
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        code, message = body["error"], str(body.get("message", ""))
    retry_after = None
    header = {name.lower(): value for name, value in answer.headers.items()}.get("retry-after")
    if header is not None:
        try:
            retry_after = max(0.0, float(header))
        except ValueError:
            retry_after = None
    return GateClientError(answer.status, code, message, body=body, retry_after=retry_after)
