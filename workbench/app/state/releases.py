"""Releases: which published version production runs, the shadow and canary on live traffic, and
the moves (approve, halt, rollback, activate, shadow, canary), all through the ReleaseService."""

from __future__ import annotations

from typing import Any

import param

from gate.errors import GateError
from workbench.app.store import WorkbenchStore, workbench_principal


class ReleasesState(param.Parameterized):
    scope = param.String(default="")
    rulebook_id = param.String(default="")
    status = param.Dict(default=None, allow_None=True, doc="the release status (ReleaseService.status)")
    message = param.String(default="")
    actor = param.String(default="workbench:local", doc="who acts in release events (the signed-in user)")

    def __init__(self, store: WorkbenchStore, **params: Any) -> None:
        super().__init__(**params)  # type: ignore[no-untyped-call]  # param's Parameterized.__init__ is unannotated
        self.store = store
        self.refresh()

    @param.depends("scope", "rulebook_id", watch=True)
    def refresh(self) -> None:
        """Read the release again (its guardrails run on the way: a tripped one halts the canary)."""
        if not self.scope or not self.rulebook_id:
            self.status = None
            return
        try:
            self.status = self.store.release_status(self.scope, self.rulebook_id)
        except GateError as exc:
            self.status = None
            self.message = (f"{self.rulebook_id} has no published version in this scope yet"
                            if exc.code == "RULEBOOK_NOT_FOUND" else f"{self.rulebook_id}: {exc}")

    def versions(self) -> list[str]:
        """Published versions named in the release's history and state (newest first)."""
        if not self.status:
            return []
        seen: list[str] = []
        for event in reversed(self.status["history"]):
            for version in (event.get("version"),):
                if version and version not in seen:
                    seen.append(version)
        return seen

    def act(self, action: str, **body: Any) -> None:
        """One transition; the message says what happened or why it was refused."""
        if not self.scope or not self.rulebook_id:
            self.message = "pick a scope and a policy first"
            return
        try:
            event = self.store.release_act(self.scope, self.rulebook_id,
                                           {"action": action, **{k: v for k, v in body.items() if v not in (None, "")}},
                                           workbench_principal(self.actor))
        except GateError as exc:
            self.message = f"{action} refused ({exc.code}): {exc}"
            self.refresh()
            return
        self.message = f"{action} recorded as release event {event['seq']} ({event['event_hash'][:12]}…)"
        self.refresh()

    def approve(self, request_seq: int) -> None:
        pending = next((p for p in (self.status or {}).get("state", {}).get("pending", [])
                        if p["request_seq"] == request_seq), None)
        if pending is None:
            self.message = f"no pending request {request_seq}"
            return
        self.act("approve", request_seq=request_seq, version=pending["version"], rulebook_hash=pending["rulebook_hash"])
