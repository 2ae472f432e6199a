"""The Releases page's line for the last guardrail halt (issue 41 item 6 and "Keep"): the interval
within ±100%, and the outcome and key that tripped it, as text."""

from __future__ import annotations

from workbench.app.pages.releases import _state_view


def _status(trigger: dict | None) -> dict:
    halt = {"seq": 3, "action": "halt", "actor": "guardrail", "evidence": {
        "canary_version": "v3", "tripped": ["failure_rate"], "trigger": trigger,
        "failure_rate": {"difference": 1.0, "interval": [0.504678, 1.0]}}}
    return {"rulebook_id": "pricing_exception", "history": [halt],
            "state": {"seq": 3, "active": {"version": "v1"}, "shadow": None, "canary": None, "pending": []},
            "policy": {"require_approval": False, "refuse_superseded_inline": False}}


def test_the_last_halt_shows_its_bounded_interval_and_who_reported_the_outcome():
    text = _state_view(_status({"outcome_id": "out_1", "decision_id": "dec_1", "arm": "canary",
                                "reported_by": "key_<b>x</b>"})).object
    assert "failure difference canary − active +100.0%, always-valid interval +50.5% to +100.0%" in text
    assert "outcome out\\_1 reported by key key\\_\\<b\\>x\\</b\\>" in text
    assert "reported by" not in _state_view(_status(None)).object
