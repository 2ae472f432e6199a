"""Issue 45, item 8 (display): the Releases page shows the canary's subject as text, and keeps a
halted canary's arms and the evidence that halted it (they went with the canary)."""

from __future__ import annotations

import panel as pn

from gate.releases.figures import canary_figures, shadow_figures
from gate.releases.guardrails import ArmCounts, evaluate
from workbench.app.pages.releases import _canary_view, _shadow_view, _state_view, halted_arms

ACTIVE = ArmCounts({"yes": 300, "no": 40, "review": 60}, failed=12, succeeded=250)
CANARY = ArmCounts({"yes": 35, "no": 2, "review": 3}, failed=30, succeeded=5)


def _status(canary: dict | None, history: list[dict]) -> dict:
    state = {"seq": history[-1]["seq"] if history else 1, "active": {"version": "v1"}, "shadow": None,
             "canary": canary, "pending": []}
    running = None
    if canary is not None:
        running = {"version": canary["version"], "percent": canary["percent"],
                   **canary_figures(CANARY, ACTIVE, evaluate(CANARY, ACTIVE))}
    return {"rulebook_id": "pricing", "state": state, "comparison": {"shadow": None, "canary": running},
            "policy": {"require_approval": False, "refuse_superseded_inline": False}, "history": history}


def _shown(view) -> tuple[str, list[dict]]:
    head, table = view.objects
    return head.object, table.value.to_dict("records")


def test_a_halted_canary_keeps_its_arms_and_the_evidence_that_halted_it():
    report = evaluate(CANARY, ACTIVE)
    assert report.tripped == ("failure_rate",)
    running = _status({"version": "v3", "percent": 10.0, "subject": "context.source_record_id"},
                      [{"seq": 4, "action": "canary", "actor": "workbench:local", "created_at": "t4"}])
    head, rows = _shown(_canary_view(running))
    assert head.startswith("**Canary v3** at 10.0%") and len(rows) == 2
    # The guardrail halts it: the state has no canary, the halt event holds the evidence.
    evidence = {"canary_version": "v3", "canary_since_seq": 4, **report.to_json()}
    assert halted_arms(evidence) == canary_figures(CANARY, ACTIVE, report)["arms"]  # the figures it showed
    halted = _status(None, [*running["history"], {"seq": 5, "action": "halt", "actor": "guardrail",
                                                  "created_at": "2026-11-26T03:00:00.000Z", "evidence": evidence}])
    halted_head, halted_rows = _shown(_canary_view(halted))
    assert halted_rows == rows  # the arms as they were when it stopped
    assert halted_head.startswith("**Canary v3 halted by its guardrails** (event 5,")
    assert "**TRIPPED: failure_rate**" in halted_head
    assert f"failure difference canary − active {report.failure_rate.difference:+.1%}" in halted_head
    # A halt by hand carries no evidence: nothing to show, as before.
    by_hand = _status(None, [*running["history"], {"seq": 5, "action": "halt", "actor": "workbench:local",
                                                   "created_at": "t5", "evidence": None}])
    assert isinstance(_canary_view(by_hand), pn.layout.Spacer)


def test_the_canary_subject_reads_as_text():
    status = _status({"version": "v3", "percent": 10.0, "subject": "context.source_record_id"}, [])
    text = _state_view(status).object
    assert "by subject context\\.source\\_record\\_id" in text and "`" not in text


def test_no_legend_covers_a_version_label_and_the_semantic_diff_fits_its_column():
    """The Overview's plots label each version at their bottom left, where the score plot's
    legend hid the first label: the legends sit beside the plots. The semantic diff's table ran
    past the page's right edge beside the dry-run: it keeps to its column, every cell wrapped."""
    import polars as pl
    from bokeh.models import Label, Legend

    from workbench.app.pages.migration import SEMANTIC_WIDTH, _semantic_view
    from workbench.app.pages.overview import VERDICT_COLORS, _course

    months = ["2026-05", "2026-06", "2026-07", "2026-08"]
    series = pl.DataFrame({"month": months, **{v: [3, 4, 5, 6] for v in VERDICT_COLORS},
                           "effectiveness_score": [0.8, 0.9, 0.7, 0.6], "interval_low": [0.6, 0.7, 0.5, 0.4],
                           "interval_high": [0.9, 1.0, 0.85, 0.75]})
    versions = pl.DataFrame({"policy_version": ["2026-05-01", "2026-08-01"], "month": ["2026-05", "2026-08"]})
    plots = [pane.object for pane in _course(series, versions).objects]
    for plot in plots:
        assert [type(item) for item in plot.right] == [Legend]
        assert not [item for item in plot.center if isinstance(item, Legend)]
        assert [label.text for label in plot.center if isinstance(label, Label)] == ["v 2026-05-01", "v 2026-08-01"]
    differences = [{"text": "amount: number in (-inf, 150]; " * 6, "old": {"decision": "yes", "rule_id": "a" * 40},
                    "new": {"decision": "review", "rule_id": None}, "witness": {"amount": 149, "note": "x" * 200}}]
    table = _semantic_view({"verdict": "different", "differences": differences}).objects[1]
    assert table.width < SEMANTIC_WIDTH and table.sizing_mode == "fixed" and table.layout == "fit_columns"
    assert {name: spec["type"] for name, spec in table.formatters.items()} == dict.fromkeys(
        ("where", "current", "draft", "witness"), "textarea")


def test_a_shadow_with_no_live_decision_yet_shows_a_note_not_an_empty_row():
    # Issue 56: the transition table showed one row with empty verdicts and n=0.
    status = _status(None, [])
    status["comparison"]["shadow"] = {"version": "v2", **shadow_figures([])}
    head, empty = _shadow_view(status).objects
    assert head.object.startswith("**Shadow v2** on 0 live decisions")
    assert isinstance(empty, pn.pane.Markdown) and empty.object.startswith("*No live decisions compared yet")
    rows = [{"verdict": "yes", "shadow_verdict": "yes"}, {"verdict": "yes", "shadow_verdict": "review",
                                                          "effect": "failure"}]
    status["comparison"]["shadow"] = {"version": "v2", **shadow_figures(rows)}
    _, transitions, flips = _shadow_view(status).objects
    assert transitions.value.to_dict("records") == [{"live": "yes", "shadow": "review", "n": 1},
                                                   {"live": "yes", "shadow": "yes", "n": 1}]
    assert flips.value.to_dict("records")[0]["live → shadow"] == "yes → review"
