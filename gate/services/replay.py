"""Replay, diff and counterfactuals of stored decisions, for an authenticated caller. Read-only.

Orchestration only: the stored row is read in the caller's scope (another scope's decision, or
a row not bound to its record, is absent: 404), the snapshots come from the ledger, and the
pure work is `gate.replay.historical` and `gate.replay.whatif`. Nothing is written: no decision, no
chain link, no usage charge, no snapshot (tests compare row counts and the chain head).
"""

from __future__ import annotations

import json
from typing import Any

from gate.advisory.replay import advisory_replay
from gate.errors import GateError
from gate.ledger import StoredSnapshot
from gate.privacy.removal import REMOVED_CODE, removed, summary
from gate.protocol.advisory_record import is_advisory
from gate.replay.historical import (
    ReplaySummary,
    Runtime,
    Snapshot,
    StoredMaterial,
    parse_replay_request,
    replay,
    snapshot_from_row,
)
from gate.replay.whatif import CounterfactualsBody, parse_counterfactual_request, run_counterfactuals
from gate.rulebook import schema_hash
from gate.services.decide import Caller, DecisionService


def _rulebook_ref(record: dict[str, Any]) -> dict[str, Any]:
    """The record's `rulebook` member (id, version, hash), or {} when it has none."""
    ref = record.get("rulebook")
    return ref if isinstance(ref, dict) else {}


class ReplayService:
    """Replays for callers of one `DecisionService` (same ledger, snapshots and adapters)."""

    def __init__(self, decisions: DecisionService) -> None:
        self.decisions = decisions
        self._parsed: dict[tuple[str, str, str], tuple[StoredSnapshot, Snapshot]] = {}

    def _material(self, caller: Caller, decision_id: str) -> StoredMaterial | None:
        """The caller's stored decision, only when its record is bound to its row (as
        `DecisionService.bound_decision`: another scope's or a foreign record reads as absent)."""
        stored = self.decisions.bound_decision(caller, decision_id)
        if stored is None:
            return None
        record = json.loads(stored.record_json)  # bound_decision parsed it once already
        gone = removed(record)
        if gone is not None:  # nothing left to replay: never a changed verdict (docs/privacy.md, "Retention")
            raise GateError(REMOVED_CODE, f"the inputs of this decision were removed by {gone.get('cause')}",
                            removed=summary(gone))
        return StoredMaterial(record=record, request_text=stored.request_json or None)

    def _bound_snapshot(self, scope: str, record: dict[str, Any]) -> Snapshot | None:
        ref = _rulebook_ref(record)
        if not isinstance(ref.get("id"), str) or not isinstance(ref.get("version"), str):
            return None
        row = self.decisions.bound_snapshot(scope, ref["id"], ref["version"])  # immutable: cached
        if row is None:
            return None
        # Bindings never change (compatibility rule 2), so the parsed snapshot is kept with its row.
        key = (scope, ref["id"], ref["version"])
        cached = self._parsed.get(key)
        if cached is None or cached[0] is not row:
            if len(self._parsed) >= 4096:
                self._parsed.clear()
            cached = self._parsed[key] = (row, snapshot_from_row(row))
        return cached[1]

    def _current_snapshot(self, scope: str, record: dict[str, Any]) -> Snapshot | None:
        ref = _rulebook_ref(record)
        if not isinstance(ref.get("id"), str):
            return None
        row = self.decisions.ledger.latest_rulebook_snapshot(scope, ref["id"])
        return snapshot_from_row(row) if row else None

    def replay(self, caller: Caller, decision_id: str, body: Any, *, forced_mode: str | None = None,
               header_view: str | None = None) -> ReplaySummary | None:
        """The replay summary, or None when the decision is not in the caller's scope.
        The body is parsed first (400/422 before any read); the view falls back to `header_view`."""
        request = parse_replay_request(body, forced_mode=forced_mode)
        if request.response_view is None and header_view is not None:
            request = type(request)(mode=request.mode, input=request.input, response_view=header_view,
                                    mode_given=request.mode_given)
        material = self._material(caller, decision_id)
        if material is None:
            return None
        record = material.record
        if is_advisory(record):
            # Legacy (advisory) decisions replay in current mode against the gate's advisor panel.
            return advisory_replay(material, request, self.decisions.advisory)
        historical = request.mode == "historical"
        snapshot = self._bound_snapshot(caller.scope, record) if historical else None
        current = None if historical else self._current_snapshot(caller.scope, record)
        runtime = Runtime(snapshot=current, schema_url=self.decisions.schema_url, schema_hash=schema_hash())
        return replay(material, request, snapshot=snapshot, runtime=runtime, adapters=self.decisions.adapters)

    def counterfactuals(self, caller: Caller, decision_id: str, body: Any) -> CounterfactualsBody | None:
        scenarios, view = parse_counterfactual_request(body)
        material = self._material(caller, decision_id)
        if material is None:
            return None
        if is_advisory(material.record):
            raise GateError("COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE",
                            "counterfactuals simulate rulebook decisions; this decision is advisory (legacy mode): "
                            "send its facts to /diff as an input override instead", record_kind="advisory")
        current = self._current_snapshot(caller.scope, material.record)
        return run_counterfactuals(material, scenarios, current=current, response_view=view,
                                   schema_url=self.decisions.schema_url, schema_hash=schema_hash())
