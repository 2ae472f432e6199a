"""Request validation for the execution, outcome and CRM sync write endpoints.

Each body is checked by its schema alone (`gate/bodies/execution.schema.json`, `outcome`,
`crm-sync`: issue 66, item 1): every problem of a body is reported together in one
``GateError("REQUEST_INVALID", message, errors=[{field, code, message}, …])``, in the body's order
(`gate.bodies.problems`: unknown members first, by name, then the listed members in the schema's
order, which is the spec's). The validators return the members as the schema reads them
(`gate.bodies.read`: trimmed text; absent, null and blank members omitted; defaults given), which
is what the builders store.

CRM sync bodies are first scanned for credential material (`gate.receipts.credentials`);
SECURITY: that refusal (SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN) comes before every other check so
that no path stores, hashes or echoes a credential.
"""

from __future__ import annotations

from typing import Any

from gate import bodies
from gate.errors import GateError
from gate.protocol.canonical import sha256_hex
from gate.receipts.credentials import credential_paths
from gate.strict_json import JsonValue

__all__ = [
    "CRM_SYNC_BODY",
    "EXECUTION_BODY",
    "OUTCOME_BODY",
    "request_input_hash",
    "validate_crm_sync_request",
    "validate_execution_request",
    "validate_outcome_request",
]

CREDENTIALS_FORBIDDEN = "SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN"
# The schema of each body, in gate/bodies/.
EXECUTION_BODY, OUTCOME_BODY, CRM_SYNC_BODY = "execution", "outcome", "crm-sync"


def _read(name: str, body: Any, what: str) -> dict[str, JsonValue]:
    """`body` as `<name>`'s schema reads it, or REQUEST_INVALID naming every problem."""
    items = bodies.problems(name, body)
    if items:
        first = items[0]
        raise GateError(
            "REQUEST_INVALID",
            f"{what} request is invalid ({len(items)} problem{'s' if len(items) != 1 else ''}); "
            f"first: {first['field']}: {first['message']}",
            errors=list(items),
        )
    return bodies.read(name, body)


def validate_execution_request(body: Any) -> dict[str, JsonValue]:
    """Normalized execution receipt request; REQUEST_INVALID listing every problem."""
    return _read(EXECUTION_BODY, body, "execution receipt")


def validate_outcome_request(body: Any) -> dict[str, JsonValue]:
    """Normalized outcome request; REQUEST_INVALID listing every problem. The link to an
    execution receipt names it by id and hash, so one of the two alone is `missing_field` for
    the other (the schema's `allOf`)."""
    return _read(OUTCOME_BODY, body, "outcome")


def validate_crm_sync_request(body: Any) -> dict[str, JsonValue]:
    """Normalized CRM sync request.

    Raises SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN (`forbidden_fields`) first when the body carries
    credential material, else REQUEST_INVALID listing every problem. `sync_direction` defaults
    to `writeback`; `crm_object_id` is required when `sync_status` is `written` (a write names
    the object written): both stated by the schema.
    """
    if isinstance(body, dict):
        forbidden = credential_paths(body)
        if forbidden:
            raise GateError(
                CREDENTIALS_FORBIDDEN,
                "the CRM sync request carries credential material; credentials are never "
                "accepted or stored: remove them and send only mapped field names and the CRM "
                "object reference",
                forbidden_fields=forbidden,
            )
    return _read(CRM_SYNC_BODY, body, "CRM sync")


def request_input_hash(body: Any) -> str:
    """sha256 of the canonical request body exactly as received: the idempotency comparison key
    (`execution_input_hash`, `outcome_input_hash`, `sync_input_hash`)."""
    return sha256_hex(body)
