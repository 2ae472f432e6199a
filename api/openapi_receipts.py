"""JSON Schemas of the execution, outcome and CRM sync request bodies, derived from their
validators (`gate.receipts.validation`), so the document and the server cannot drift.

Each member's schema comes from the check its validator table names. What the checks do that
the schema states: closed value sets (`enum`), 64-hex record hashes, object shapes and member
name patterns, member counts, and that `null` and blank text read as absent for an optional
member (reference facts §5; so those members are nullable) but are refused for a required one.
Text limits count UTF-16 code units after trimming; JSON Schema counts code points, so each
limit is stated in the member's description and as `maxLength` only where the two agree
(no trimming), and the generated test keeps its strings short of them.
"""

from __future__ import annotations

from gate.protocol.records import _JS_WHITESPACE
from gate.receipts import fields as F
from gate.receipts import validation as V

# Not blank after JavaScript's trim: at least one character outside its whitespace set.
_WHITESPACE = "".join(f"\\u{ord(char):04x}" for char in _JS_WHITESPACE)
NOT_BLANK = f"[^{_WHITESPACE}]"
_WS = f"[{_WHITESPACE}]"


def _text(limit: int) -> dict[str, object]:
    return {"type": "string", "description": f"trimmed; at most {limit} UTF-16 code units; blank reads as absent"}


def _object_of(names: str, values: dict[str, object], limit: int) -> dict[str, object]:
    return {"type": "object", "maxProperties": limit, "propertyNames": {"pattern": names},
            "additionalProperties": values}


_NON_EMPTY_ID = {**_text(F.MAX_ID), "pattern": NOT_BLANK}
_NON_EMPTY_LABEL = {**_text(F.MAX_LABEL), "pattern": NOT_BLANK}
_FIXED: dict[F.Check, dict[str, object]] = {
    F.identifier: _text(F.MAX_ID),
    F.label: _text(F.MAX_LABEL),
    F.reference: _text(F.MAX_URL),
    F.decision_id: _text(F.MAX_DECISION_ID),
    F.hex64: {"type": "string", "pattern": "^[0-9a-f]{64}$"},
    F.boolean: {"type": "boolean"},
    F.opaque_hash: {"type": "string", "pattern": f"^{_WS}*([A-Za-z0-9_.:+/=-]{{1,{F.MAX_OPAQUE_HASH}}}{_WS}*)?$",
                    "description": f"letters, digits and _ . : + / = - (trimmed); at most {F.MAX_OPAQUE_HASH}"},
    F.timestamp: {"type": "string", "description": "ISO 8601 UTC, e.g. 2026-05-21T00:00:00Z (a real date); "
                  "blank reads as absent", "pattern": f"^{_WS}*([0-9]{{4}}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T"
                  f"([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{{1,9}})?(Z|\\+00:00){_WS}*)?$"},
    F.executor: {"type": "object", "required": ["type", "id"], "additionalProperties": False,
                 "properties": {"type": _NON_EMPTY_LABEL, "id": _NON_EMPTY_ID}},
    F.action_binding: _object_of(F.BINDING_MEMBER_NAME.pattern, _NON_EMPTY_ID, F.MAX_BINDING_MEMBERS),
    F.observed_metrics: _object_of(F.METRIC_NAME.pattern, {"type": "number"}, F.MAX_METRICS),
    F.field_mapping: {"type": "object", "maxProperties": F.MAX_FIELD_MAPPING,
                      "propertyNames": {"pattern": NOT_BLANK}, "additionalProperties": _NON_EMPTY_LABEL},
    F.evidence_refs: {"type": "array", "maxItems": F.MAX_EVIDENCE_REFS, "items": _NON_EMPTY_ID},
    F.http_url: {"type": "string",
                 "pattern": f"^{_WS}*(https?://[a-z0-9.-]*[a-z0-9](:[0-9]{{1,4}})?(/[!-~]*)?{_WS}*)?$",
                 "description": "absolute http(s) URL with a host; blank reads as absent"},
    F.result_text_or_object: {"oneOf": [_text(F.MAX_RESULT_TEXT), _object_of(F.METRIC_NAME.pattern, {
        "oneOf": [_NON_EMPTY_ID, {"type": "number"}, {"type": "boolean"}]}, F.MAX_RESULT_MEMBERS)]},
}


def member_schema(check: F.Check, required: bool) -> dict[str, object]:
    """The schema of one member; `one_of` checks carry their set on the closure."""
    allowed = _one_of_values(check)
    schema: dict[str, object] = {"type": "string", "enum": list(allowed)} if allowed is not None else dict(_FIXED[check])
    if required:
        if schema.get("type") == "string" and "enum" not in schema and "pattern" not in schema:
            schema["pattern"] = NOT_BLANK
        return schema
    return {"anyOf": [schema, {"type": "null"}]}


def _one_of_values(check: F.Check) -> tuple[str, ...] | None:
    for cell in getattr(check, "__closure__", None) or ():
        value = cell.cell_contents
        if isinstance(value, tuple) and all(isinstance(item, str) for item in value):
            return value
    return None


def request_schema(members: dict[str, F.Check], required: tuple[str, ...]) -> dict[str, object]:
    return {"type": "object", "required": list(required), "additionalProperties": False,
            "properties": {name: member_schema(check, name in required) for name, check in members.items()}}


_LINK_ID = ("execution_receipt_id", {"type": "string", "pattern": NOT_BLANK})
_LINK_HASH = ("execution_hash", {"type": "string"})

RECEIPT_REQUEST_SCHEMAS: dict[str, dict[str, object]] = {
    "ExecutionRequest": request_schema(V.EXECUTION_REQUEST_MEMBERS, V.REQUIRED_EXECUTION_MEMBERS),
    "OutcomeRequest": {
        **request_schema(V.OUTCOME_REQUEST_MEMBERS, V.REQUIRED_OUTCOME_MEMBERS),
        # validate_outcome_request: a link to the execution receipt names it by id and hash (null
        # and a blank id read as absent, so only a stated one needs the other).
        "allOf": [{"if": {"required": [name], "properties": {name: stated}},
                   "then": {"required": [other], "properties": {other: other_stated}}}
                  for (name, stated), (other, other_stated) in ((_LINK_ID, _LINK_HASH), (_LINK_HASH, _LINK_ID))],
    },
    "CrmSyncRequest": {
        **request_schema(V.CRM_SYNC_REQUEST_MEMBERS, V.REQUIRED_CRM_SYNC_MEMBERS),
        # validate_crm_sync_request: a write names the object written.
        "if": {"required": ["sync_status"], "properties": {"sync_status": {"const": "written"}}},
        "then": {"required": ["crm_object_id"], "properties": {"crm_object_id": _NON_EMPTY_ID}},
    },
}
