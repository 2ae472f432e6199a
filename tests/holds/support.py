"""What the hold tests share: a clock they move, a held request, keys with permissions, calls."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REQUEST = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())


class MovingClock:
    """Now is where the test put it (thread-safe enough: one assignment)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.at = start or datetime.now(UTC).replace(microsecond=0)

    def now(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at = self.at + timedelta(seconds=seconds)


def held_request(margin: float = 12, subject: str | None = None) -> dict[str, Any]:
    """The sample pricing request with a thin margin: rule `review_thin_margin` holds it."""
    body = copy.deepcopy(REQUEST)
    body["context"]["inputs"]["margin_percent"] = margin
    if subject is not None:
        body["context"]["source_record_id"] = subject
    return body


def approved_request() -> dict[str, Any]:
    """The sample request as it is: owner-backed 15% on an annual plan, approved."""
    return copy.deepcopy(REQUEST)


class Holds:
    """The HTTP calls of held actions, through the Flask test client, as one key."""

    def __init__(self, client: Any, key: str) -> None:
        self.client, self.key = client, key

    def h(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"x-api-key": self.key, **(extra or {})}

    def decide(self, body: dict[str, Any], key: str | None = None) -> Any:
        return self.client.post("/api/decide", json=body, headers=self.h({"x-idempotency-key": key} if key else None))

    def inbox(self, query: str = "") -> Any:
        return self.client.get(f"/api/holds{query}", headers=self.h())

    def show(self, decision_id: str) -> Any:
        return self.client.get(f"/api/holds/{decision_id}", headers=self.h())

    def resolve(self, decision_id: str, decision: str = "approve", reason_code: str = "CHECKED", **more: Any) -> Any:
        return self.client.post(f"/api/holds/{decision_id}/resolve", headers=self.h(),
                                json={"decision": decision, "reason_code": reason_code, **more})

    def act(self, decision_id: str, action: str, body: dict[str, Any] | None = None) -> Any:
        return self.client.post(f"/api/holds/{decision_id}/{action}", headers=self.h(), json=body)

    def resolution(self, decision_id: str, wait: int = 0) -> Any:
        return self.client.get(f"/api/decision/{decision_id}/resolution?wait={wait}", headers=self.h())

    def put_policy(self, policy: dict[str, Any]) -> Any:
        return self.client.put("/api/holds/policy", headers=self.h(), json=policy)


def queue(deadline: int = 3600, quorum: str = "any", members: list[str] | None = None, justification: bool = False,
          escalate_after: int | None = None, escalate_to: str | None = None) -> dict[str, Any]:
    return {"deadline_seconds": deadline, "quorum": quorum, "members": members or [],
            "require_justification": justification, "escalate_after_seconds": escalate_after,
            "escalate_to": escalate_to}


def policy(queues: dict[str, Any] | None = None, routes: list[dict[str, Any]] | None = None,
           default_queue: str = "default", four_eyes: bool = True) -> dict[str, Any]:
    return {"default_queue": default_queue, "four_eyes": four_eyes, "queues": queues or {"default": queue()},
            "routes": routes or []}
