"""Seed a scope with a clear failure-rate shift: decisions under rule review_thin_margin all fail."""

from __future__ import annotations

import copy


def seed_failure_shift(client, key, sample, n: int = 36) -> None:
    for i in range(n):
        thin = i % 3 == 0
        body = copy.deepcopy(sample)
        body["context"]["inputs"].update(discount_percent=10 + i % 5, margin_percent=15 if thin else 30)
        record = client.post("/api/decide", json=body, headers={"x-api-key": key}).json
        outcome = {"outcome_status": "failed" if thin else "succeeded", "action_executed": True,
                   "decision_record_hash": record["record_hash"]}
        assert client.post(f"/api/decision/{record['decision_id']}/outcome", json=outcome,
                           headers={"x-api-key": key}).status_code == 201
