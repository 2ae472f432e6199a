"""Replay of stored advisory (legacy-mode) decisions. Pure over its inputs; never writes.

The spec: "Legacy decisions default to current replay." An advisory decision has no immutable
rulebook snapshot or pinned adapter to replay historically: its advisors (an HTTP model, or the
offline policy-pattern advisor over the pattern's current rulebook) are the gate's present
configuration. So:

* no `replay_mode`, or `replay_mode: "current"` (and `/diff`): the stored canonical request
  (checked against `input_hash`), or the caller's `input` override as its `context.inputs`, is
  asked of the current advisor panel (`AdvisoryService.evaluate`) and the record it gives, with
  the stored identity (ids, idempotency key, time), is compared with the stored one;
* an explicit `replay_mode: "historical"`: 409 `REPLAY_LINEAGE_UNAVAILABLE`
  (`lineage_component: "advisory"`): there is no historical lineage to replay against;
* advisory modes switched off (`GATE_ADVISORY_MODES=false`): 409 `REPLAY_LINEAGE_UNAVAILABLE`;
* an advisor that fails: 502 `ADVISOR_UPSTREAM_FAILED`, as at decide time (nothing written).

The summary has the shape of a rulebook replay's (`replay_against.kind` is
`current_advisory_panel`); the replayed record is never signed, stored or chained, and, like
every advisory record, never a production approval.
"""

from __future__ import annotations

import json
from typing import Any

from gate.advisory.record import build_advisory_record
from gate.errors import GateError
from gate.protocol.canonical import clone, sha256_bytes_hex, sha256_hex
from gate.replay.historical import (
    REPLAY_HISTORICAL,
    ReplayRequest,
    ReplaySummary,
    StoredMaterial,
    input_unavailable,
    lineage_unavailable,
    replay_summary,
)

AGAINST_ADVISORY_PANEL = "current_advisory_panel"
_PANEL_ERRORS = ("ADVISOR_UPSTREAM_FAILED", "ADVISOR_UNAVAILABLE")


def advisory_replay(material: StoredMaterial, request: ReplayRequest, advisory: Any) -> ReplaySummary:
    """The replay summary of one stored advisory decision (see the module docstring)."""
    record = material.record
    if request.mode == REPLAY_HISTORICAL and request.mode_given:
        raise lineage_unavailable("advisory", "advisory (legacy-mode) decisions replay in current mode only: "
                                  "their advisors are not pinned lineage; send replay_mode 'current' or use /diff",
                                  replay_mode=request.mode)
    if advisory is None:
        raise lineage_unavailable("advisory", "the advisory modes are switched off on this gate "
                                  "(GATE_ADVISORY_MODES=false): there is no advisor panel to replay against")
    text = material.request_text
    if not text:
        raise input_unavailable("the stored canonical input of this decision is not available")
    if sha256_bytes_hex(text.encode("utf-8")) != record.get("input_hash"):
        raise input_unavailable("the stored canonical input does not hash to the record's input_hash")
    try:
        body = json.loads(text)
    except ValueError as exc:  # pragma: no cover - the text hashed to input_hash, so it was canonical JSON
        raise input_unavailable("the stored canonical input cannot be read") from exc
    input_hash = record["input_hash"]
    if request.input is not None:
        context = dict(body.get("context") or {})
        context["inputs"] = clone(request.input)
        body = dict(body, context=context)
        input_hash = sha256_hex(body)
    try:
        outcome = advisory.evaluate(body)
    except GateError as exc:
        if exc.code in _PANEL_ERRORS or request.input is not None:
            raise  # the panel failed (502/503), or the override itself is refused (its own 4xx)
        raise input_unavailable("the stored canonical input no longer passes the advisory checks") from exc
    prepared = outcome.prepared
    replayed = build_advisory_record(
        decision_id=record["decision_id"], request_id=record["request_id"],
        idempotency_key=record.get("idempotency_key"), created_at=record["created_at"], input_hash=input_hash,
        mode=prepared.mode, question=prepared.question, context=prepared.context, facts=prepared.facts,
        pattern_id=prepared.pattern.pattern_id if prepared.pattern is not None else None,
        policy_id=outcome.policy_id, policy_version=outcome.policy_version, identities=outcome.identities,
        votes=outcome.votes, combined=outcome.combined, receipt_signer=None,
    )
    return replay_summary(record, replayed, request, "current", {
        "kind": AGAINST_ADVISORY_PANEL,
        "advisors": [clone(identity) for identity in outcome.identities],
        "policy_id": replayed["policy_id"],
        "policy_version": replayed["policy_version"],
        "policy_hash": replayed["policy_hash"],
        "rulebook": None,
        "trusted_adapter": None,
    })


__all__ = ["AGAINST_ADVISORY_PANEL", "advisory_replay"]
