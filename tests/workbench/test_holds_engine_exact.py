"""The hold report's engine (`workbench.engines.holds`) on small frames, every figure a literal
worked out by hand: percentiles by linear interpolation between closest ranks, rates with their
95% Wilson intervals (docs/intelligence.md, "Holds"), the backlog's ages from `as_of`, the
too-young approvals and those without a terminal outcome counted apart, the limit, and empty frames."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest
from workbench_support import CLASSES, outcome

from workbench.dataset.load import conform, empty
from workbench.engines.holds import hold_report

AS_OF = datetime(2026, 3, 1, tzinfo=UTC)


def t(month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def hold(decision_id: str, opened: datetime, *, state: str = "open", resolved: datetime | None = None,
         by: str | None = None, queue: str = "default") -> dict:
    return {"decision_id": decision_id, "opened_at": opened, "policy_id": "pricing", "policy_version": "v1",
            "rule_id": "review_thin_margin", "reason_code": "THIN", "queue": queue, "priority": "normal",
            "deadline_at": t(12, 31), "state": state, "resolved_at": resolved, "resolved_by": by,
            "approvals": 1 if state == "approved" else 0, "approvals_needed": 1, "record_hash": "1" * 64,
            "last_event_seq": 0 if state == "open" else 1, "scope": "tenant_a", "month": opened.strftime("%Y-%m")}


HOLDS = [
    hold("h1", t(1, 1), state="approved", resolved=t(1, 1, 1), by="alice"),        # 3,600 s, later failed
    hold("h2", t(1, 2), state="approved", resolved=t(1, 2, 2), by="alice"),        # 7,200 s, later succeeded
    hold("h3", t(2, 20), state="approved", resolved=t(2, 20, 3), by="bob"),        # 10,800 s, too young
    hold("h4", t(1, 5), state="denied", resolved=t(1, 5, 4), by="bob"),            # 14,400 s
    hold("h5", t(1, 6), state="expired", resolved=t(1, 7), by="clock"),            # silence: not a wait
    hold("h6", t(1, 8), state="approved", resolved=t(1, 8, 0, 30), by="alice"),    # 1,800 s, no outcome
    hold("o1", t(2, 27)),                                                          # open 2 days
    hold("o2", t(2, 28, 12), queue="leads"),                                       # open 12 hours
    hold("o3", t(3, 2), queue="leads"),                                            # opened after as_of: age 0
    hold("h7", t(2, 1), state="denied", resolved=t(2, 1, 0, 10), by="carol", queue="leads"),  # 600 s
]
OUTCOMES = [
    outcome("r1a", "h1", "succeeded", at=t(1, 10)), outcome("r1b", "h1", "failed", at=t(1, 20)),  # latest: failed
    outcome("r2", "h2", "succeeded", at=t(1, 15)),
    outcome("r3", "h3", "failed", at=t(2, 25)),  # too young to count, whatever it says
    outcome("r6", "h6", "pending", at=t(1, 9)),  # an open outcome is no terminal outcome
]


def report(holds=HOLDS, outcomes=OUTCOMES, *, limit=1000, window=30, as_of=AS_OF):
    h = conform(pl.DataFrame(holds, infer_schema_length=None), "holds") if holds else empty("holds")
    o = conform(pl.DataFrame(outcomes, infer_schema_length=None), "outcomes") if outcomes else empty("outcomes")
    return hold_report(h, o, CLASSES, as_of=as_of, limit=limit, outcome_window_days=window)


def test_the_policys_figures_are_exact():
    body = report()["holds"]
    assert body["backlog"] == {"open": 3, "oldest_age_seconds": 172800.0, "age_p50_seconds": 43200.0,
                               "oldest_opened_at": "2026-02-27T00:00:00.000Z"}
    # Reviewed waits 600, 1800, 3600, 7200, 10800, 14400: p50 at rank 2.5, p90 at rank 4.5.
    assert body["time_to_resolution"] == {"n": 6, "p50_seconds": 5400.0, "p90_seconds": 12600.0}
    assert body["approval_rate"] == {"approved": 4, "denied": 2, "n": 6, "rate": 0.6667, "interval_95": [0.3, 0.9032]}
    assert body["expiry_rate"] == {"expired": 1, "n": 7, "rate": 0.1429, "interval_95": [0.0257, 0.5131]}
    assert body["later_failed"] == {"failed": 1, "succeeded": 1, "n": 2, "rate": 0.5, "interval_95": [0.0945, 0.9055],
                                    "too_young": 1, "no_terminal_outcome": 1}


def test_the_sample_is_the_held_decisions_considered():
    # Three open holds and seven closed ones; outcome records of h1 (two), h2, h3 and h6.
    assert report()["sample"] == {
        "decisions_considered": 10, "decisions_with_outcome": 4, "outcome_records": 5,
        "latest_outcome_counts": {"failed": 2, "pending": 1, "succeeded": 1},
        "outcome_classes": {"success": 1, "failure": 2, "excluded": 0, "open": 1, "unclassified": 0},
        "first_decision_at": "2026-01-01T00:00:00.000Z", "last_decision_at": "2026-03-02T00:00:00.000Z"}
    assert report(limit=2)["sample"]["decisions_considered"] == 5


def test_the_window_is_named():
    window = report()["window"]
    assert window == {
        "as_of": "2026-03-01T00:00:00.000Z", "limit": 1000, "open_holds": 3, "closed_holds": 7,
        "closed_from": "2026-01-01T01:00:00.000Z", "closed_to": "2026-02-20T03:00:00.000Z",
        "outcome_window_days": 30, "judged_before": "2026-01-30T00:00:00.000Z",
        "text": ("3 open holds as of 2026-03-01T00:00:00.000Z; latest 7 closed holds (limit 1000), resolved "
                 "2026-01-01 to 2026-02-20; approvals judged by their outcome once 30 days old (resolved before "
                 "2026-01-30T00:00:00.000Z)")}


def test_per_queue_most_open_first():
    leads, default = report()["queues"]
    assert leads == {
        "queue": "leads",
        "backlog": {"open": 2, "oldest_age_seconds": 43200.0, "age_p50_seconds": 21600.0,
                    "oldest_opened_at": "2026-02-28T12:00:00.000Z"},
        "time_to_resolution": {"n": 1, "p50_seconds": 600.0, "p90_seconds": 600.0},
        "approval_rate": {"approved": 0, "denied": 1, "n": 1, "rate": 0.0, "interval_95": [0.0, 0.7935]},
        "later_failed": {"failed": 0, "succeeded": 0, "n": 0, "rate": None, "interval_95": None, "too_young": 0,
                         "no_terminal_outcome": 0},
        "expiry_rate": {"expired": 0, "n": 1, "rate": 0.0, "interval_95": [0.0, 0.7935]}}
    assert default["queue"] == "default" and default["backlog"]["open"] == 1
    # Waits 1800, 3600, 7200, 10800, 14400: p90 at rank 3.6 = 10800 + 0.6 × 3600.
    assert default["time_to_resolution"] == {"n": 5, "p50_seconds": 7200.0, "p90_seconds": 12960.0}
    assert default["approval_rate"]["interval_95"] == [0.3755, 0.9638]
    assert default["expiry_rate"] == {"expired": 1, "n": 6, "rate": 0.1667, "interval_95": [0.0301, 0.5635]}


def test_per_reviewer_the_holds_their_vote_closed():
    reviewers = report()["reviewers"]
    assert [(r["reviewer"], r["resolved"]) for r in reviewers] == [("alice", 3), ("bob", 2), ("carol", 1)]
    alice, bob, _ = reviewers
    assert alice["time_to_resolution"] == {"n": 3, "p50_seconds": 3600.0, "p90_seconds": 6480.0}
    assert alice["approval_rate"] == {"approved": 3, "denied": 0, "n": 3, "rate": 1.0, "interval_95": [0.4385, 1.0]}
    assert alice["later_failed"] == {"failed": 1, "succeeded": 1, "n": 2, "rate": 0.5, "interval_95": [0.0945, 0.9055],
                                     "too_young": 0, "no_terminal_outcome": 1}
    assert "expiry_rate" not in alice and "backlog" not in alice  # the clock's expiries are nobody's
    assert bob["time_to_resolution"] == {"n": 2, "p50_seconds": 12600.0, "p90_seconds": 14040.0}
    assert bob["later_failed"]["too_young"] == 1 and bob["later_failed"]["n"] == 0


def test_an_approval_becomes_judgeable_once_the_window_has_passed():
    # Window 9 days: h3 (approved 02-20 03:00) is judged from 02-20 03:00 + 9 days = 03-01 03:00.
    assert report(window=9)["holds"]["later_failed"]["too_young"] == 1
    older = report(window=9, as_of=t(3, 1, 3))["holds"]["later_failed"]
    assert (older["failed"], older["too_young"]) == (2, 0)
    # Window 0: every approval is judged at once.
    assert report(window=0)["holds"]["later_failed"]["failed"] == 2


def test_the_limit_takes_the_most_recently_closed_and_leaves_the_backlog_whole():
    body = report(limit=2)
    assert (body["window"]["closed_holds"], body["window"]["closed_from"], body["window"]["closed_to"]) == \
        (2, "2026-02-01T00:10:00.000Z", "2026-02-20T03:00:00.000Z")
    assert body["holds"]["approval_rate"]["n"] == 2 and body["holds"]["backlog"]["open"] == 3
    assert body["window"]["limit"] == 2 and report(limit=None)["window"]["closed_holds"] == 7


def test_without_holds_every_figure_is_empty_not_zero_rates():
    body = report([], [])
    assert body["holds"]["backlog"] == {"open": 0, "oldest_age_seconds": None, "age_p50_seconds": None,
                                        "oldest_opened_at": None}
    assert body["holds"]["time_to_resolution"] == {"n": 0, "p50_seconds": None, "p90_seconds": None}
    assert body["holds"]["approval_rate"]["rate"] is None and body["holds"]["expiry_rate"]["interval_95"] is None
    assert body["queues"] == [] and body["reviewers"] == []
    assert body["sample"]["decisions_considered"] == 0 and body["sample"]["first_decision_at"] is None


def test_only_open_holds_give_a_backlog_and_no_rates():
    body = report([hold("o1", t(2, 27))], [])
    assert body["holds"]["backlog"]["open"] == 1 and body["holds"]["expiry_rate"]["n"] == 0
    assert body["queues"][0]["time_to_resolution"]["n"] == 0


def test_a_negative_window_is_refused():
    with pytest.raises(ValueError, match="outcome_window_days"):
        report(window=-1)
