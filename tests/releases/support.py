"""What the release tests share: keys with permissions, the sample rulebook's versions, calls."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RULEBOOK = json.loads((ROOT / "gate" / "data" / "rulebooks" / "pricing-exception.json").read_text())
REQUEST = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())
ALL = "decide,publish,release,approve,admin"


def version(name: str, *, approve_limit: int = 20, action: str = "apply_discount") -> dict[str, Any]:
    """The sample rulebook under another version: `approve_limit` moves the approval threshold
    (the sample request asks for 15%), `action` renames the approval's action."""
    rulebook = copy.deepcopy(RULEBOOK)
    rulebook["version"] = name
    approve = next(r for r in rulebook["rules"] if r["rule_id"] == "approve_owner_backed")
    approve["condition"]["all"][1]["value"] = approve_limit
    approve["outcome"]["action"] = action
    return rulebook


def by_reference(rulebook_id: str = "pricing_exception", version_name: str | None = None,
                 subject: str | None = None) -> dict[str, Any]:
    body = {k: v for k, v in REQUEST.items() if k != "rulebook"}
    body["rulebook_ref"] = {"rulebook_id": rulebook_id, **({"version": version_name} if version_name else {})}
    if subject is not None:
        body["context"] = dict(body.get("context") or {}, source_record_id=subject)
    return body


def inline(rulebook: dict[str, Any], subject: str | None = None) -> dict[str, Any]:
    body = by_reference(subject=subject)
    body.pop("rulebook_ref")
    body["rulebook"] = rulebook
    return body


class Api:
    """The HTTP calls of a release, through the Flask test client, as one key."""

    def __init__(self, client: Any, key: str) -> None:
        self.client, self.key = client, key

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"x-api-key": self.key, **(extra or {})}

    def publish(self, rulebook: dict[str, Any]) -> Any:
        return self.client.post("/api/decision/rulebooks", json=rulebook, headers=self.headers())

    def act(self, action: str, rulebook_id: str = "pricing_exception", key: str | None = None, **body: Any) -> Any:
        extra = {"x-idempotency-key": key} if key else None
        return self.client.post(f"/api/decision/rulebooks/{rulebook_id}/release", json={"action": action, **body},
                                headers=self.headers(extra))

    def status(self, rulebook_id: str = "pricing_exception") -> Any:
        return self.client.get(f"/api/decision/rulebooks/{rulebook_id}/release", headers=self.headers())

    def history(self, rulebook_id: str = "pricing_exception") -> Any:
        return self.client.get(f"/api/decision/rulebooks/{rulebook_id}/release/history", headers=self.headers())

    def decide(self, body: dict[str, Any], key: str | None = None) -> Any:
        extra = {"x-idempotency-key": key} if key else None
        return self.client.post("/api/decide", json=body, headers=self.headers(extra))

    def outcome(self, record: dict[str, Any], status: str) -> Any:
        return self.client.post(f"/api/decision/{record['decision_id']}/outcome",
                                json={"outcome_status": status, "decision_record_hash": record["record_hash"]},
                                headers=self.headers())
