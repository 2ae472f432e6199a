"""A held action on the caller's side (docs/client.md, "Held actions"): how a wait for a hold's
resolution asks the gate, and where a resolution routes. Pure; `gate_client.client` does the HTTP.

A wait of `timeout` seconds long-polls `GET /api/decision/{id}/resolution?wait=N`, whose `N` is
whole seconds from 0 to 30. Each request asks for the whole seconds left (at most 30); less than a
second left is slept on the client and asked once with `wait=0`, so the wait ends at its deadline,
not before. A wait makes at most ceil(timeout / 30) + 1 requests whatever the gate answers
(`request_limit`): an answer that comes back early, or an error retried after the gate's
`Retry-After` or a backoff, spends one of them, and a pause that would outlast the wait ends it.
Polling never spends a key's budget (before this, the last second of every wait asked `wait=0`
again and again: 180 requests in half a second, then 429 for the key's other routes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

from gate.holds.events import verify_resolution
from gate.keys.anchors import TrustAnchors
from gate_client.bodies import RouteVerification, route_verification

PROCEED, DENY, REVIEW = "proceed", "deny", "review"
MAX_WAIT_SECONDS = 30  # the gate's longest long-poll (GET /api/decision/{id}/resolution?wait=)


def wait_seconds(wait: float) -> int:
    """The `wait` a request asks for: the whole seconds of `wait`, rounded down, 0 to 30. Refuses a
    wait that is not a finite number (ValueError)."""
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not math.isfinite(wait):
        raise ValueError(f"wait must be a finite number of seconds, not {wait!r}")
    return max(0, min(MAX_WAIT_SECONDS, math.floor(wait)))


def request_limit(timeout: float) -> int:
    """The most requests a wait of `timeout` seconds makes: one long-poll per 30 seconds, and one more
    (the first answer, or the check at the deadline)."""
    return math.ceil(max(0.0, timeout) / MAX_WAIT_SECONDS) + 1


def next_pause(left: float, sent: int, limit: int, wanted: float = 0.0) -> float | None:
    """Seconds to sleep before the next request of a wait, or None: the wait is over. `left` is the
    wait's time left, `sent` the requests made, `limit` its `request_limit`, `wanted` the least pause
    the gate asked for (its Retry-After, or a backoff after a failure; 0 after an open answer).
    Less than a second left is slept, then asked once with `wait=0`."""
    if sent >= limit or left <= 0 or wanted > left:
        return None
    return max(wanted, left if left < 1 else 0.0)


class Verdict(NamedTuple):
    """Where a held action goes, why, and the checks that said so."""

    route: str
    reason: str
    details: RouteVerification | None = None


def resolution_verdict(record: Mapping[str, Any], resolution: Any, anchors: TrustAnchors,
                       verification: Mapping[str, Any] | None) -> Verdict:
    """The routing rule on a held record and its resolution (docs/holds.md). SECURITY: the
    resolution, not a new decide, is the authority, and only a verified approval bound to this very
    record proceeds; an expiry is a refusal (silence is not consent)."""
    if not verification or verification.get("verified") is not True:
        return Verdict(REVIEW, "the held record failed offline verification", route_verification(verification))
    if record.get("verdict") != "review":
        return Verdict(REVIEW, "this record did not hold the action; a resolution does not apply")
    check = verify_resolution(record, resolution, anchors)
    details = route_verification(verification)
    details["resolution"] = check.to_json()
    if not check.verified:
        return Verdict(REVIEW, "the resolution failed verification: " + "; ".join(check.problems), details)
    if check.approved:
        return Verdict(PROCEED, "verified approving resolution", details)
    return Verdict(DENY, f"verified resolution: {check.outcome}", details)


__all__ = ["DENY", "MAX_WAIT_SECONDS", "PROCEED", "REVIEW", "Verdict", "next_pause", "request_limit",
           "resolution_verdict", "wait_seconds"]
