"""What a held action asks, as a reviewer reads it (issue 65, docs/holds.md "The request on a hold").

A hold shows its request first: the question, the requested action, the target system and
object, the amount and its currency, the source record and the workflow, read from the decide's
`context` (the members a caller states there, e.g. `gate/data/requests/refund-window.json`), and
the requester's holder (the deciding key's holder label, never its id). What is shown must be what
was signed: the summary is read from the stored canonical request only when its hash is the
record's `input_hash` (`bound`); then `signed` is true. Otherwise (a stored request changed, or
none) every member is null and `signed` false: nothing unsigned is shown as the request.

Pure: nothing here reads a clock or a database (gate.services.holds reads the stored request).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypedDict

from gate.protocol.canonical import sha256_hex

# The request's members a hold shows, in the order a reviewer reads them.
MEMBERS: tuple[str, ...] = ("question", "requested_action", "target_system", "target_object_id", "amount",
                            "currency", "source_record_id", "workflow")
_CONTEXT = MEMBERS[1:]  # every member but the question is read from the request's `context`
MAX_ID = 200  # an object id longer than this is shown but not kept in the searchable columns


class HoldRequest(TypedDict):
    """The request a hold carries (the shape the API, the CLI, the MCP tools and the Inbox share)."""

    question: str | None
    requested_action: str | None
    target_system: str | None
    target_object_id: str | None
    amount: int | float | str | None
    currency: str | None
    source_record_id: str | None
    workflow: str | None
    requester: str
    signed: bool


def _text(value: Any) -> str | None:
    """A member stated as text (an integer id reads as its digits); anything else is not shown."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _amount(value: Any) -> int | float | str | None:
    if isinstance(value, bool):
        return None
    return value if isinstance(value, (int, float, str)) else None


def unsigned(requester: str) -> HoldRequest:
    """No request to show: every member null, not signed."""
    return {"question": None, "requested_action": None, "target_system": None, "target_object_id": None,
            "amount": None, "currency": None, "source_record_id": None, "workflow": None,
            "requester": requester, "signed": False}


def summarize(request: Any, requester: str) -> HoldRequest:
    """The summary of a canonical request the caller signed (`signed` true: call it only on a
    request `bound` to its record)."""
    if not isinstance(request, Mapping):
        return unsigned(requester)
    context = request.get("context")
    context = context if isinstance(context, Mapping) else {}
    out = unsigned(requester)
    question = request.get("question")
    out["question"] = question if isinstance(question, str) else None
    for name in ("requested_action", "target_system", "target_object_id", "currency", "source_record_id",
                 "workflow"):
        out[name] = _text(context.get(name))
    out["amount"] = _amount(context.get("amount"))
    out["signed"] = True
    return out


def bound(request_text: str | None, *input_hashes: str | None) -> Any | None:
    """The stored request, parsed, when its canonical hash is every one of `input_hashes` (the
    decision row's column and its record's `input_hash`); None otherwise."""
    if request_text is None or not input_hashes:
        return None
    try:
        request = json.loads(request_text)
    except ValueError:
        return None
    digest = sha256_hex(request)
    return request if all(digest == value for value in input_hashes) else None


def read(request_text: str | None, requester: str, *input_hashes: str | None) -> HoldRequest:
    """The hold's request from the stored canonical request (`bound` to the record), else unsigned."""
    request = bound(request_text, *input_hashes)
    return summarize(request, requester) if request is not None else unsigned(requester)


def searchable(request: HoldRequest, name: str) -> str | None:
    """A searchable column's value (`target_object_id`, `source_record_id`): None when too long."""
    value = request.get(name)
    return value if isinstance(value, str) and len(value) <= MAX_ID else None


def text(request: HoldRequest) -> str:
    """The summary as the hold row keeps it (`holds.request_json`)."""
    return json.dumps(request, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
