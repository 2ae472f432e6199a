"""The dry-run's review forecast uses the scope's measured cost of a hold (issue 43, item 6): from
the closed holds of the rulebook in the history (a signed export or the live ledger), with the
hold report's formulas, its source and n; a history without closed holds says it is not measured."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import pytest

from tests.workbench.hold_support import HoldWriter
from tests.workbench.ledger_support import REQUEST, at
from workbench.dataset.export import export_ledger
from workbench.migration import dry_run
from workbench.migration.holdcost import SOURCE, hold_cost_text

NOW = "2026-11-22T00:00:00.000Z"
RULEBOOK = "pricing_exception"


@pytest.fixture
def writer(database_url, tmp_path):
    writer = HoldWriter(database_url, tmp_path / "keys.json")
    yield writer
    writer.close()


def draft():
    rulebook = copy.deepcopy(REQUEST["rulebook"])
    rulebook["version"] = "2026-12-01"
    return rulebook


def seed(writer):
    """acme: five held decisions over two months (two approved, one denied, one expired, one open)
    and three that are not held; globex: one approved hold, which acme's dry-run never reads."""
    held = [writer.held("acme", at(1 + i // 3, 1 + i)) for i in range(5)]
    for i in range(3):
        writer.decide("acme", at(1, 20 + i))
    writer.approve("acme", held[0], at(1, 1, 13))  # 1 h
    writer.approve("acme", held[1], at(1, 2, 15))  # 3 h
    writer.deny("acme", held[2], at(1, 3, 14))  # 2 h
    assert writer.sweep(at(2, 5, 13)) == 1  # held[3] (opened 02-04) expires; held[4] (02-05) stays open
    other = writer.held("globex", at(1, 7))
    writer.approve("globex", other, at(1, 7, 12, 1))


def expected(load):
    after, before = load["per_month_after"], load["per_month_before"]
    return {
        "measured": True, "source": SOURCE, "closed_holds": 4,
        "resolved_from": "2026-01-01T13:00:00.000Z", "resolved_to": "2026-02-05T13:00:00.000Z",
        # Waits 3600, 7200, 10800: p90 at rank 1.8 = 7200 + 0.8 × 3600.
        "time_to_resolution": {"n": 3, "p50_seconds": 7200.0, "p90_seconds": 10080.0},
        "approval_rate": {"approved": 2, "denied": 1, "n": 3, "rate": 0.6667, "interval_95": [0.2077, 0.9385]},
        "expiry_rate": {"expired": 1, "n": 4, "rate": 0.25, "interval_95": [0.0456, 0.6994]},
        "per_month": {
            "before": {"holds": before, "approved": round(before / 2, 3), "denied": round(before / 4, 3),
                       "expired": round(before / 4, 3)},
            "after": {"holds": after, "approved": round(after / 2, 3), "denied": round(after / 4, 3),
                      "expired": round(after / 4, 3)}},
        "assumed_review_cost": 0.05,
    }


def test_the_forecast_measures_the_cost_of_a_hold_from_a_signed_export_and_the_ledger(writer, tmp_path):
    seed(writer)
    root = tmp_path / "ds"
    export_ledger(writer.ledger, str(root), now=datetime(2026, 3, 1, tzinfo=UTC), settle_seconds=0,
                  signer=writer.signing.receipt_signer())
    load = dry_run(draft(), RULEBOOK, scope="acme", dataset=root, created_at=NOW,
                   anchors=writer.signing.trust_anchors()).result["review_load"]
    assert (load["before"], load["months"]) == (5, 2)
    assert load["hold_cost"] == expected(load)
    assert hold_cost_text(load["hold_cost"]) == (
        "measured over 4 closed holds (2026-01-01 to 2026-02-05): a hold waits 2.0 h for a reviewer (p50; p90 2.8 h, "
        "n=3), approved 66.7% (95% 20.8–93.8%, n=3), expired 25.0% (95% 4.6–69.9%, n=4); under the draft "
        f"{load['per_month_after']:,} holds a month: {round(load['per_month_after'] / 2, 3):,} approved, "
        f"{round(load['per_month_after'] / 4, 3):,} denied, {round(load['per_month_after'] / 4, 3):,} expired")
    live = dry_run(draft(), RULEBOOK, scope="acme", ledger=writer.ledger, created_at=NOW).result["review_load"]
    assert live["hold_cost"] == load["hold_cost"]
    # Every scope: globex's approval (a one-minute wait) joins the measure.
    every = dry_run(draft(), RULEBOOK, ledger=writer.ledger, created_at=NOW).result["review_load"]["hold_cost"]
    assert every["closed_holds"] == 5 and every["approval_rate"]["approved"] == 3


def test_without_a_closed_hold_the_cost_is_not_measured(writer):
    writer.held("acme", at(1, 1))
    writer.decide("acme", at(1, 2))
    load = dry_run(draft(), RULEBOOK, ledger=writer.ledger, created_at=NOW).result["review_load"]
    assert load["hold_cost"]["measured"] is False and load["hold_cost"]["assumed_review_cost"] == 0.05
    assert hold_cost_text(load["hold_cost"]).startswith("not measured: no closed hold of this rulebook")
