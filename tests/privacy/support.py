"""What the privacy tests share: a data map that marks `customer_email` personal and names
`customer_id` the data subject's key, and requests that carry both where a record copies them."""

from __future__ import annotations

from typing import Any

from tests.holds.support import approved_request, held_request

EMAIL = "alice.doe@example.com"
CUSTOMER = "cus_7f3a91c2"
OTHER_CUSTOMER = "cus_0b44e8d1"
DATA_MAP = {"members": {"context.inputs.customer_email": "personal", "context.actor": "personal"},
            "subject_key": "context.customer_id"}


def rules(**changed: dict[str, Any]) -> dict[str, Any]:
    """The default rules (nothing personal leaves in events, notices, logs or MCP; the dataset
    hashes), with `changed` destinations replaced."""
    base = {name: {"personal": "drop", "sensitive": "drop"} for name in ("events", "notices", "logs", "mcp")}
    base["dataset"] = {"personal": "hash", "sensitive": "hash"}
    return {**base, **changed}


def privacy(**changed: dict[str, Any]) -> dict[str, Any]:
    return {"data_map": DATA_MAP, "rules": rules(**changed)}


def customer_request(customer: str = CUSTOMER, email: str = EMAIL, held: bool = False) -> dict[str, Any]:
    """The sample pricing request made for a customer: their id in `context.customer_id` and
    `context.subject` (the record's `action_binding.subject` copies it), their e-mail in the
    facts and as the acting agent's `context.actor` (copied to `action_binding.actor`)."""
    body = held_request() if held else approved_request()
    body["context"].update(customer_id=customer, subject=customer, actor=email)
    body["context"]["inputs"]["customer_email"] = email
    return body
