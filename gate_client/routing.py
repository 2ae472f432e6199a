"""The caller's routing helper: what to do with an answer of `POST /api/decide` (spec, "Caller
obligations"). Pure; it needs only the record protocol's advisory rule
(`gate.protocol.advisory_record.is_advisory`, the one the gate and `gate_client.client` use).

`route(status, body)` is `proceed`, `block` or `review`:

* `proceed` only for HTTP 200 with a record whose `verdict` and `c` are both `yes` and that
  is not advisory: a record carrying any part of the advisory contract (an `advisory` member, a
  `production_binding_required` other than false, a `decision_contract` that is not an object
  with `production_verdict: true` and an `authority` other than `advisory_only`) never proceeds,
  whatever its other members say;
* `block` for a record whose `verdict` and `c` are `no` (advisory or binding: blocking is
  always safe);
* `review` for everything else: `review`/`unclear`, 401, 403, 409, 422, 429, 5xx, a body that
  is not a JSON object, or members that disagree.

It does not check hashes or signatures; `gate.verify` does (a failed check never approves).
"""

from __future__ import annotations

from typing import Any

from gate.protocol.advisory_record import is_advisory

PROCEED, BLOCK, REVIEW = "proceed", "block", "review"


def route(status: int, body: Any) -> str:
    if status != 200 or not isinstance(body, dict) or "error" in body:
        return REVIEW
    verdict, compact = body.get("verdict"), body.get("c")
    if verdict == "no" and compact == "no":
        return BLOCK
    if verdict == "yes" and compact == "yes" and not is_advisory(body):
        return PROCEED
    return REVIEW


__all__ = ["BLOCK", "PROCEED", "REVIEW", "is_advisory", "route"]
