"""The pages' Markdown and HTML builders hold caller text as text (issue 18), without a browser.

The browser tests (`tests/browser/test_workbench_xss.py`) show the whole app; these pin each
builder that puts report or message text into Markdown or HTML.
"""

from __future__ import annotations

from tests.workbench.markup_support import HOSTILE_VERSION, markdown_html, parse
from workbench.app.pages.authoring import error_markdown
from workbench.app.pages.decisions import _verification_markdown
from workbench.app.pages.overview import _anomalies, _cards, more_reports_markdown
from workbench.app.store import DraftCheck
from workbench.reports.policy import PolicyReports, Sample

REASON = f"share of verdict 'yes' moved under version '{HOSTILE_VERSION}'"


def elements(markdown: str) -> set[str]:
    return {tag for tag, _ in parse(markdown_html(markdown)).tags}


def text(markdown: str) -> str:
    return "".join(parse(markdown_html(markdown)).text)


def reports(recommendation: str = "monitor") -> PolicyReports:
    """Every member the pages read (`workbench.reports.policy.PolicyReports`), report text hostile."""
    sample: Sample = {"decisions_considered": 60, "decisions_with_outcome": 0, "outcome_records": 0,
                      "latest_outcome_counts": {}, "outcome_classes": {}, "first_decision_at": None,
                      "last_decision_at": None}
    envelope = {"policy_id": "pricing", "policy_version": None, "parameters": {}, "sample": sample}
    return {
        "effectiveness": {**envelope, "decision_effectiveness_report_version": "v1", "effectiveness_hash": "h",
                          "effectiveness_score": 0.5, "recommendation": recommendation, "confidence": 0.4,
                          "metrics": {"success_rate": None, "failure_rate": None, "review_rate": None,
                                      "excluded_rate": None, "terminal_coverage": None, "outcome_coverage": None,
                                      "success_rate_interval": None, "resolved_decisions": 0}},
        "confidence": {**envelope, "decision_confidence_version": "v1", "confidence_hash": "h", "score": 0.2,
                       "level": recommendation, "similar_decisions": 60, "policy_stability": 1.0,
                       "recommendation": recommendation, "based_on": {}, "buckets": []},
        "anomalies": {**envelope, "decision_anomaly_report_version": "v1", "anomaly_hash": "h", "checks": {},
                      "anomaly_count": 1, "recommendation": recommendation, "anomalies": [
            {"anomaly_id": "a", "kind": "verdict_shift", "dimension": "policy_version", "value": "v2",
             "severity": "high", "anomaly_score": 0.99, "reasons": [REASON, "[x](javascript:alert(1))"],
             "decision_ids": ["dec_1", "dec_`<b>2</b>`"], "baseline": {}, "observed": {}}]},
        "benchmarks": {**envelope, "decision_benchmark_version": "v1", "benchmark_hash": "h",
                       "your_metrics": {"success_rate": 0.7, "failure_rate": 0.3, "review_rate": 0.0,
                                        "terminal_coverage": 1.0, "decisions": 60, "resolved_decisions": 60},
                       "cross_customer": {"status": "not_opted_in", "reason": recommendation, "cohort": {},
                                          "percentiles": {}},
                       "comparison": {"success_rate_delta_vs_p50": None}, "recommendation": recommendation},
    }


def test_anomaly_reasons_and_ids_are_text():
    markdown = _anomalies(reports(), None, "acme", "pricing").object
    assert not elements(markdown) & {"img", "b", "code", "script"}
    assert REASON in text(markdown) and "dec_`<b>2</b>`" in text(markdown)
    # The only links are the decision ids' own, to the Decisions page, the id URL-encoded.
    links = [dict(attrs) for tag, attrs in parse(markdown_html(markdown)).tags if tag == "a"]
    assert [link["href"] for link in links] == [
        "?scope=acme&policy=pricing&page=decisions&decision=dec_1",
        "?scope=acme&policy=pricing&page=decisions&decision=dec_%60%3Cb%3E2%3C%2Fb%3E%60"]


def test_report_card_titles_are_escaped_html():
    row = _cards(reports(recommendation=HOSTILE_VERSION))
    titles = [card.name for card in row.objects[0].objects]
    assert any("&lt;img" in title for title in titles)
    assert not any("<img" in title for title in titles)


def test_draft_errors_quote_what_was_typed_as_text():
    check = DraftCheck(None, ({"field": "draft.version", "code": "too_long", "line": 0, "column": 2,
                               "message": f"'{HOSTILE_VERSION}' is too long"},))
    markdown = error_markdown(check)
    assert "li" in elements(markdown) and not elements(markdown) & {"img", "code"}
    assert f"'{HOSTILE_VERSION}' is too long" in text(markdown)


def test_failed_checks_are_text():
    markdown = _verification_markdown({"verification": {"verified": False, "failed_checks": ["x`<img src=x>`"]}})
    assert "img" not in elements(markdown) and "x`<img src=x>`" in text(markdown)


def test_another_registry_kinds_figures_are_text():
    """A report kind the page has no card for (a new registry entry) is shown as a table of its
    figures: a member or value that is caller text stays text, a float is a score, a list a count."""
    report = {"decision_volume_report_version": "decision_volume_report_v1", "policy_id": HOSTILE_VERSION,
              "by_reason": {"[x](javascript:alert(1))": 3, "<b>bold</b>|pipe": 1}, "rate": 0.123456,
              "items": [1, 2], "volume_hash": "h"}
    markdown = more_reports_markdown({"volume": report})
    assert not elements(markdown) & {"img", "b", "a", "script"}
    shown = text(markdown)
    assert HOSTILE_VERSION in shown and "by_reason.[x](javascript:alert(1))" in shown
    assert "by_reason.<b>bold</b>|pipe" in shown and "0.123" in shown and "2 items" in shown
    assert markdown.splitlines()[0] == "#### Report: volume" and more_reports_markdown(None) == ""


def test_a_hold_s_request_is_text_first_and_unsigned_says_so():
    """Issue 65: the Inbox detail's Request block is the caller's values as text cells, above the
    facts; a request not read as signed shows no member and the verification line says why."""
    from workbench.app.pages.inbox import request_markdown, summary_markdown, verification_markdown

    hostile = "[x](javascript:alert(1))<img src=x>|pipe"
    request = {"question": hostile, "requested_action": "issue_refund", "target_system": None,
               "target_object_id": "ord_7731", "amount": 129, "currency": None, "source_record_id": None,
               "workflow": None, "requester": "service:agent", "signed": True}
    hold = {"decision_id": "dec_1", "state": "open", "queue": "default", "priority": "normal",
            "deadline_at": "t", "opened_at": "t", "requested_by": "key_1", "requested_holder": "service:agent",
            "approvals": [], "approvals_needed": 1, "facts": {"days": 40}, "request": request}
    rule = {"rule_id": "r", "policy_id": "p", "policy_version": "1", "reason_code": "R"}
    markdown = summary_markdown({"hold": hold, "rule": rule})
    assert not elements(markdown) & {"img", "a", "script"} and hostile in text(markdown)
    shown = text(markdown)
    assert shown.index("ord_7731") < shown.index("days") and "asked for by service:agent (key key_1)" in shown
    unsigned = {**request, "question": None, "target_object_id": None, "requested_action": None, "amount": None,
                "signed": False}
    assert "not shown" in text("\n".join(request_markdown(unsigned)))
    lines = text(verification_markdown({"hold": {**hold, "request": unsigned}, "verification": {"verified": True}}))
    assert "no stored request is bound to this record's input_hash" in lines
    assert "the request shown is the stored request bound" in text(verification_markdown(
        {"hold": hold, "verification": {"verified": True}}))
