"""The caller's routing helper: what to do with an answer of `POST /api/decide` (spec, "Caller
obligations"). Pure and dependency-free, so a client can vendor it.

`route(status, body)` is `proceed`, `block` or `review`:

* `proceed` only for HTTP 200 with a record whose `verdict` and `c` are both `yes` and that does
  not carry the advisory contract: an advisory record (`decision_contract.authority` is
  `advisory_only`, or `production_verdict` is not true, or `production_binding_required` is
  true) never proceeds, whatever its members say;
* `block` for a record whose `verdict` and `c` are `no` (advisory or binding: blocking is
  always safe);
* `review` for everything else: `review`/`unclear`, 401, 403, 409, 422, 429, 5xx, a body that
  is not a JSON object, or members that disagree.

It does not check hashes or signatures; `gate.verify` does (a failed check never approves).
"""

from __future__ import annotations

from typing import Any

PROCEED, BLOCK, REVIEW = "proceed", "block", "review"


def is_advisory(body: Any) -> bool:
    """Whether a record carries (any part of) the advisory contract."""
    if not isinstance(body, dict):
        return False
    contract = body.get("decision_contract")
    if contract is not None and (not isinstance(contract, dict) or contract.get("authority") != "binding"
                                 or contract.get("production_verdict") is not True):
        return True
    return body.get("production_binding_required") is not None and body.get("production_binding_required") is not False


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
