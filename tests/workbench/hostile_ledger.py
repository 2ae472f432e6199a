"""A ledger whose callers chose markup for every free-text field they control (issue 18).

Decided through the real decide service (`LedgerWriter`, signed and chained, as the API would):
30 pricing-exception decisions under version `v1` (approved), then 30 under a version whose
text is an `<img onerror>` payload (blocked, with a hostile `action`), so the anomaly engine
names that version (and the drift of `discount_percent`); every request carries a fact whose
*name* is markup and a fact whose *value* is markup (facts reach the record views; the fact
engines only name keys a field path can name, `[A-Za-z0-9_-]`). The workbench, the dry-run reports and the notebooks must show all of it as text.
"""

from __future__ import annotations

import copy
from datetime import timedelta
from pathlib import Path

from gate.services.decide import Caller
from tests.workbench.ledger_support import REQUEST, LedgerWriter, at
from tests.workbench.markup_support import HOSTILE_VERSION

SCOPE = "acme"
RULEBOOK_ID = "pricing_exception"
HOSTILE_ACTION = "block<img src=x onerror=alert('action')>"
HOSTILE_FACT = "<img src=x onerror=alert('fact')>"
HOSTILE_VALUE = "<img src=x onerror=alert('value')>[link](javascript:alert(1))"
PAYLOADS = (HOSTILE_VERSION, HOSTILE_ACTION, HOSTILE_FACT, HOSTILE_VALUE)


def _body(version: str, index: int) -> dict:
    body = copy.deepcopy(REQUEST)
    rulebook = body["rulebook"]
    rulebook["version"] = version
    inputs = body["context"]["inputs"]
    if version == HOSTILE_VERSION:
        rulebook["rules"][0]["outcome"]["action"] = HOSTILE_ACTION
        inputs.update(discount_percent=30 + index % 5)  # blocked: the verdict mix shifts
    else:
        inputs.update(discount_percent=10 + index % 5)
    inputs[HOSTILE_FACT] = 1 + index % 7
    inputs["customer_note"] = HOSTILE_VALUE
    return body


HOSTILE_HOOK = "http://127.0.0.1:9/<script>alert(1)</script>"  # a URL its tenant chose (no spaces: allowed)
HOSTILE_ANSWER = "<img src=x onerror=alert(1)> is down"  # what a receiver answered


def add_hostile_subscription(home: Path) -> str:
    """A webhook subscription of scope `acme` whose URL and last failed answer are markup (the
    Events page must show both as text); its id."""
    from gate.ledger import Ledger
    from gate.services.governance import SafeguardSettings
    from gate.services.root import compose_events

    ledger = Ledger(f"sqlite:///{home / 'gate.db'}")
    try:
        events = compose_events(ledger, allow_hosts={"127.0.0.1"}, safeguards=SafeguardSettings(ledger))
        view, _secret = events.subscribe(SCOPE, "key_test", {"url": HOSTILE_HOOK})
        events.outbox.record_attempt({
            "subscription_id": view["subscription_id"], "scope": SCOPE, "seq": 1, "event_id": "evt_hostile",
            "attempted_at": "2026-04-02T09:00:00.000Z", "ok": 0, "status_code": 503, "latency_ms": 12,
            "excerpt": HOSTILE_ANSWER, "replay": 0})
        return str(view["subscription_id"])
    finally:
        ledger.dispose()


def build_hostile_ledger(home: Path) -> list[str]:
    """The decisions above in scope `acme`, months 1–4 (the hostile version in months 3–4),
    executions and outcomes for the approvals; their decision ids, oldest first."""
    writer = LedgerWriter(f"sqlite:///{home / 'gate.db'}", home / "signing-keys.json")
    caller = Caller("key_test", SCOPE, "starter", 1000, 10_000_000)
    ids = []
    for index in range(60):
        hostile = index >= 30
        moment = at(1 + index // 15, 1 + index % 15, 9 + index % 8)
        writer.clock.set(moment)
        record = writer.service.decide(caller, _body(HOSTILE_VERSION if hostile else "v1", index)).record
        ids.append(record["decision_id"])
        if record["verdict"] == "yes":
            writer.receipt("execution", SCOPE, record, moment + timedelta(minutes=5), "executed")
            writer.receipt("outcome", SCOPE, record, moment + timedelta(days=2),
                           "failed" if index % 4 == 0 else "succeeded")
    writer.close()
    return ids
