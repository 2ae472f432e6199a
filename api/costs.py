"""Cost budgets of the costly keyed routes (issue 18, item 7; docs/operating.md "Rate limits and cost units").

Replay, diff, counterfactuals, stored-record verification, the four policy reports, policy
alerts, packet export and the chain view can each cost many decides' worth of CPU (a diff with
a 50,000-key `input` costs about 125 small decides). Each such request is weighed in cost units
*before* its work starts, from what the gate can see without doing that work: the route, the
declared body size, the size of the stored request it re-reads, and the `limit` query
parameters. One unit is about one small decide's CPU (benchmarks/bench_costly.py).

The units are charged, all or nothing, to the key's cost window: a fixed one-minute window of
its own (`cost:<key id>` in the same limiter, memory or Redis), separate from the decide window
so that a flood of reports cannot starve the same key's decides. When the weight does not fit
in what remains, the answer is 429 `SVC_API_RATE_LIMITED` with `Retry-After`, and nothing is
charged or computed. The window holds the plan's `cost_limit` units (starter 60, growth
360, scale 3,600; `GATE_PLANS`), scaled like the key's own `rate_limit` when it has one. A
weight is never more than the whole window: the largest request costs a full minute of the
budget; it is never refused for good. The monthly record cap still counts only decides.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Concatenate, ParamSpec, TypeVar

from flask import Response, request

from api.bodies import too_large
from api.errors import carry_headers, error_response
from api.runtime import runtime
from gate.services.decide import Caller
from gate.settings import COST_UNITS_PER_DECIDE

BUCKET_PREFIX = "cost:"
BODY_BYTES_PER_UNIT = 8_192  # request body the route parses, hashes and evaluates
STORED_BYTES_PER_UNIT = 16_384  # the stored request a replay re-reads, re-hashes and re-evaluates
REPORT_ROWS_PER_UNIT = 50  # decisions a report's `limit` lets it load and analyse
LINKS_PER_UNIT = 10  # chain links (and receipts) a page re-verifies
PACKET_INTELLIGENCE_UNITS = 20  # the policy reports a packet embeds (one report's worth at limit 1,000)

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Weight:
    """How one route kind is weighed: a fixed part, per-body units, a multiple of the stored
    request's units, and a function of the query for what its `limit` parameters allow. The
    query function parses them as strictly as the route does: a bad value is a 400 before the
    charge, so a refused request costs nothing."""

    base: int = 1
    body: bool = False
    stored: int = 0
    query: Callable[[], int] = lambda: 0


def units(amount: int, per_unit: int) -> int:
    return math.ceil(max(0, amount) / per_unit)


def body_bytes() -> int:
    """The declared body length (413 first when it is over the limit: refused uncharged); a
    chunked body declares none and is weighed as the largest body the route accepts."""
    max_bytes = runtime().settings.max_body_bytes
    if "chunked" in request.headers.get("Transfer-Encoding", "").lower():
        return max_bytes
    length = request.content_length or 0
    if length > max_bytes:
        raise too_large(max_bytes)
    return length


def stored_bytes(caller: Caller, decision_id: str | None) -> int:
    """Size of the stored request of the caller's decision (0 when it has none in its scope: the
    route answers 404 after the one-unit charge)."""
    if decision_id is None:
        return 0
    stored = runtime().ledger.decision(caller.scope, decision_id)
    return len(stored.request_json or "") if stored is not None else 0


def weigh(weight: Weight, caller: Caller, decision_id: str | None) -> int:
    total = weight.base + weight.query()
    if weight.body:
        total += units(body_bytes(), BODY_BYTES_PER_UNIT)
    if weight.stored:  # per full 16 KiB: a small stored request adds nothing
        total += weight.stored * (stored_bytes(caller, decision_id) // STORED_BYTES_PER_UNIT)
    return total


def cost_limit(caller: Caller) -> int:
    """Cost units per minute of this key: its plan's `cost_limit`, scaled by the key's own
    `rate_limit` against the plan's when the key was given one."""
    plans = runtime().settings.plans
    plan = plans.get(caller.plan) or plans["starter"]
    plan_rate = plan["rate_limit"]
    limit = plan.get("cost_limit", COST_UNITS_PER_DECIDE * plan_rate)
    if plan_rate <= 0 or caller.rate_limit == plan_rate:
        return limit
    return math.ceil(limit * caller.rate_limit / plan_rate)


def charged(
    weight: Weight,
) -> Callable[[Callable[Concatenate[Caller, P], R]], Callable[Concatenate[Caller, P], R | Response]]:
    """Charge the request's weight to the caller's cost window before the view runs (place it
    under `@keyed`); the cost window's rate headers go on the view's answer."""

    def decorate(view: Callable[Concatenate[Caller, P], R]) -> Callable[Concatenate[Caller, P], R | Response]:
        @wraps(view)
        def wrapper(caller: Caller, /, *args: P.args, **kwargs: P.kwargs) -> R | Response:
            decision_id = kwargs.get("decision_id")  # the route's URL part, when it has one
            # A bad query (400) or declared size (413) is refused uncharged; a limiter down (503) fails closed.
            refusal, headers = charge(caller, weigh(weight, caller,
                                                    decision_id if isinstance(decision_id, str) else None))
            if refusal is not None:
                return refusal
            carry_headers(headers)  # on a refusal the view raises too
            response = view(caller, *args, **kwargs)
            if isinstance(response, Response):
                response.headers.update(headers)
            return response

        return wrapper

    return decorate


def charge(caller: Caller, weight: int) -> tuple[Response | None, dict[str, str]]:
    """Charge `weight` units (at most the whole window): (None, rate headers) when they fit,
    else (the 429 answer, its headers). GateError (503) when the limiter is unavailable."""
    rt = runtime()
    limit = cost_limit(caller)
    weight = max(1, min(weight, limit))
    rate = rt.limiter.hit(BUCKET_PREFIX + caller.key_id, limit, rt.now_ms(), weight)
    headers = {**rate.headers(), "X-RateLimit-Cost": str(weight)}
    if rate.allowed:
        return None, headers
    # SECURITY: refused before the work; nothing is charged or computed.
    return error_response(
        "SVC_API_RATE_LIMITED",
        f"this request costs {weight} units; {rate.remaining} of this key's {limit} cost units per minute remain",
        headers=headers, retry_after=rate.retry_after, cost=weight,
    ), headers


__all__ = ["BODY_BYTES_PER_UNIT", "LINKS_PER_UNIT", "PACKET_INTELLIGENCE_UNITS", "REPORT_ROWS_PER_UNIT",
           "STORED_BYTES_PER_UNIT", "Weight", "charge", "charged", "cost_limit", "units", "weigh"]
