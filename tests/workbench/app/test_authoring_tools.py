"""Issue 21, items 2–4: the rule table (round trip with the JSON, each rule's history), the live
impact beside the editor and the threshold sweep, driven through the Authoring view-model over a
real ledger and its dataset. Every figure is asserted equal to the library call behind it."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import panel as pn
import polars as pl
import pytest

from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from gate.rulebook.operators import OPERATORS, Operand
from tests.own_loop import run_on_own_loop
from workbench.app import ruletable
from workbench.app.pages.authoring import authoring_page, live_markdown, live_warnings, schedule_live
from workbench.app.pages.rule_table import cell_patch, rule_frame, rule_table, show_rows
from workbench.app.pages.sweep import sweep_columns, sweep_frame
from workbench.app.state.authoring import AuthoringState, comparison_key, comparison_label
from workbench.dataset.load import from_dataset
from workbench.migration.impact import impact_rows
from workbench.migration.run import dry_run
from workbench.migration.sweep import default_range, numeric_comparisons, sweep, with_threshold
from workbench.reports.textsafe import md_text

ROOT = Path(__file__).resolve().parents[3]
RULEBOOKS = sorted((ROOT / "gate" / "data" / "rulebooks").glob("*.json"))


# ---------------------------------------------------------------------- the rule table (pure)

@pytest.mark.parametrize("path", RULEBOOKS, ids=lambda p: p.name)
def test_every_cell_written_back_as_shown_leaves_the_draft_unchanged(path):
    """Round trip: each editable cell written with the value the table shows gives the same
    draft (values, key order and text), and the same rows."""
    rulebook = json.loads(path.read_text())
    rows = ruletable.rule_rows(rulebook)
    assert len(rows) == len(rulebook["rules"])
    for row in rows:
        for column in ruletable.EDITABLE:
            if row[column] is None:
                continue
            edited = ruletable.with_cell(rulebook, row["index"], column, row[column])
            assert edited == rulebook and ruletable.draft_text(edited) == ruletable.draft_text(rulebook)
            assert ruletable.rule_rows(edited) == rows
    assert rulebook == json.loads(path.read_text())  # never edited in place


def test_a_cell_edit_changes_exactly_that_member_and_keeps_the_key_order():
    rulebook = json.loads((ROOT / "gate" / "data" / "rulebooks" / "refund-approval.json").read_text())
    edited = ruletable.with_cell(rulebook, 2, "priority", " 75 ")
    assert edited["rules"][2]["priority"] == 75 and rulebook["rules"][2]["priority"] == 70
    expected = copy.deepcopy(rulebook)
    expected["rules"][2]["priority"] = 75
    assert edited == expected and list(edited["rules"][2]) == list(rulebook["rules"][2])
    condition = ruletable.with_cell(edited, 0, "condition", '{"field": "fraud_score", "operator": "gte", "value": 0.7}')
    assert condition["rules"][0]["condition"]["value"] == 0.7
    assert ruletable.rule_rows(condition)[0]["reads"] == "fraud_score ≥ 0.7"
    outcome = ruletable.with_cell(condition, 1, "reason_code", "STALE")
    assert outcome["rules"][1]["outcome"] == {**rulebook["rules"][1]["outcome"], "reason_code": "STALE"}
    without = ruletable.with_cell(rulebook, 0, "priority", "")
    assert "priority" not in without["rules"][0] and ruletable.rule_rows(without)[0]["priority"] is None


@pytest.mark.parametrize(("column", "value", "message"), [
    ("priority", "high", "priority must be a whole number"),
    ("priority", "7.5", "priority must be a whole number"),
    ("priority", 2.5, "priority must be a whole number"),
    ("priority", True, "priority must be a whole number"),
    ("priority", "1001", "priority must be from -1000 to 1000"),
    ("condition", "{not json", "the condition is not JSON"),
    ("condition", "[1, 2]", "the condition must be a JSON object"),
    ("reads", "x", "'reads' cannot be edited"),
    ("fired", "3", "'fired' cannot be edited"),
])
def test_a_cell_the_table_cannot_read_is_refused_and_changes_nothing(column, value, message):
    rulebook = json.loads((ROOT / "gate" / "data" / "rulebooks" / "refund-approval.json").read_text())
    before = copy.deepcopy(rulebook)
    with pytest.raises(ruletable.RuleEditError, match=message):
        ruletable.with_cell(rulebook, 0, column, value)
    with pytest.raises(ruletable.RuleEditError, match="no rule at row 99"):
        ruletable.with_cell(rulebook, 98, "priority", "1")
    assert rulebook == before


def test_rules_are_added_with_a_free_id_and_removed_by_row():
    rulebook = json.loads((ROOT / "gate" / "data" / "rulebooks" / "pricing-exception.json").read_text())
    once = ruletable.with_rule_added(rulebook)
    twice = ruletable.with_rule_added(once)
    assert [r["rule_id"] for r in twice["rules"][-2:]] == ["new_rule", "new_rule_2"]
    assert ruletable.with_rule_removed(twice, len(twice["rules"]) - 1) == once
    assert ruletable.with_rule_removed(once, 0)["rules"] == rulebook["rules"][1:] + [once["rules"][-1]]
    with pytest.raises(ruletable.RuleEditError):
        ruletable.with_rule_removed(rulebook, 3)


def test_conditions_read_as_words():
    assert ruletable.reads({"field": "a", "operator": "lte", "value": 3}) == "a ≤ 3"
    assert ruletable.reads({"field": "t", "operator": "in", "value": ["x", "y"]}) == 't in ["x", "y"]'
    assert ruletable.reads({"field": "a", "operator": "exists"}) == "a exists"
    nested = {"any": [{"field": "a", "operator": "gt", "value": 1},
                      {"all": [{"field": "b", "operator": "eq", "value": True},
                               {"not": {"field": "c", "operator": "not_exists"}}]}]}
    assert ruletable.reads(nested) == "a > 1 or (b = true and not (c is absent))"


@pytest.mark.parametrize("operator", OPERATORS, ids=lambda operator: operator.name)
def test_every_declared_operator_reads_in_its_words(operator):
    """`field words value`, or `field words` for an operator without a value (the words are
    pinned with each declaration, tests/rulebook/test_rulebook_operators.py)."""
    text = ruletable.reads({"field": "f", "operator": operator.name, "value": [2]})
    assert text == (f"f {operator.words}" if operator.operand is Operand.NONE else f"f {operator.words} [2]")
    comparison = {"rule_id": "r", "field": "amount", "operator": operator.name, "value": 10}
    assert comparison_label(comparison) == f"r: amount {operator.words} 10"


def test_a_name_that_is_no_operator_reads_as_itself_in_words():
    # A draft half typed: the table still shows the rule, the name with its underscores as spaces.
    assert ruletable.reads({"field": "f", "operator": "starts_with", "value": "a"}) == 'f starts with "a"'
    assert ruletable.reads({"field": "f", "value": 1}) == "f None 1"


# ---------------------------------------------------------------------- each rule's history

def _hand_history(home: Path, policy_id: str, scope: str) -> dict[str | None, tuple[int, int, int]]:
    """rule id → (decisions, successes, resolved), counted by hand from the dataset's rows."""
    frames = from_dataset(home / "dataset", scopes=[scope], policy_id=policy_id)
    decisions = frames.decisions.select("decision_id", "matched_rule_id").collect()
    latest = (frames.outcomes.sort("reported_at").group_by("decision_id").agg(pl.col("status").last())
              .collect())
    joined = decisions.join(latest, on="decision_id", how="left")
    out: dict[str | None, tuple[int, int, int]] = {}
    for rule_id, status in joined.select("matched_rule_id", "status").iter_rows():
        effect = OUTCOME_EFFECTIVENESS_CLASS.get(status) if status else None
        n, s, r = out.get(rule_id, (0, 0, 0))
        out[rule_id] = (n + 1, s + (effect == "success"), r + (effect in ("success", "failure")))
    return out


def test_each_rule_shows_how_often_it_decided_and_how_its_decisions_turned_out(workbench_home):
    store, _, home = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    state.load_current()
    hand = _hand_history(home, "pricing_exception", "acme")
    total = sum(n for n, _, _ in hand.values())
    assert state.rule_history and {row["rule_id"] for row in state.rule_history} == set(hand)
    for row in state.rule_history:
        n, s, r = hand[row["rule_id"]]
        assert (row["decisions"], row["resolved"]) == (n, r)
        assert row["share"] == round(n / total, 6)
        if r:
            assert row["success_rate"] == round(s / r, 4)
            low, high = row["success_rate_interval"]
            assert low <= s / r <= high
        assert row["judged"] == (r >= 10)
    shown = {row["rule_id"]: row for row in state.rules}
    approve = shown["approve_owner_backed"]
    assert approve["fired"] == hand["approve_owner_backed"][0] and approve["resolved"] > 0
    frame = rule_frame(state.rules)
    assert frame.loc[frame["rule_id"] == "approve_owner_backed", "success_rate"].item().endswith(
        f"n={hand['approve_owner_backed'][2]})")
    # A rule history never saw has no figures (history is keyed by rule id).
    state.add_rule()
    assert state.rules[-1]["rule_id"] == "new_rule" and state.rules[-1]["fired"] == 0
    assert rule_frame(state.rules)["success_rate"].iloc[-1] == "no history"


def test_a_table_edit_is_written_into_the_json_and_a_bad_one_changes_nothing(workbench_home):
    store, _, _ = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    state.load_current()
    text = state.draft_text
    state.edit_cell(1, "priority", "60")
    assert json.loads(state.draft_text)["rules"][1]["priority"] == 60 and state.rules[1]["priority"] == 60
    assert state.check is not None and state.check.valid
    edited = state.draft_text
    state.edit_cell(1, "condition", '{"field": "margin_percent", "operator": "lt"')
    assert state.draft_text == edited and state.table_message.startswith("not changed: the condition is not JSON")
    state.edit_cell(1, "decision", "maybe")  # written like typed text: live validation marks it
    assert state.check is not None and not state.check.valid
    assert any(e["field"].endswith("outcome.decision") for e in state.check.errors)
    state.draft_text = "{ not json"
    state.edit_cell(0, "priority", "5")
    assert state.draft_text == "{ not json" and "fix it in the editor" in state.table_message
    assert text != edited


def test_a_refused_or_unchanging_table_edit_shows_the_drafts_rows_again(workbench_home):
    """Issue 45, item 1: the table's cell holds what was typed before the draft sees it; a refused
    edit left it there (equal rows were not sent again), so the table showed a condition the draft
    did not hold. The page's table holds the draft's rows after every edit, kept or refused."""
    store, _, _ = workbench_home
    state, table = _pricing_rule_table(store)
    state.load_current()
    text, shown = state.draft_text, rule_frame(state.rules)
    cases = [("condition", '{field: margin_percent, operator: lt'),  # refused: not JSON
             ("priority", "high"),  # refused: not a number
             ("condition", '{"field":"margin_percent","operator":"lt","value":20}')]  # the draft's, other spacing
    for column, typed in cases:
        table.patch({column: [(1, typed)]})  # as the browser's edit leaves the server's table
        assert table.value[column].iloc[1] == typed
        state.edit_cell(1, column, typed)
        assert state.draft_text == text
        assert table.value.equals(shown), (column, table.value[column].iloc[1])
    assert state.table_message == ""
    state.draft_text = "{ not json"
    state.edit_cell(0, "priority", "5")
    assert "not changed" in state.table_message and len(table.value) == 0


def test_a_new_draft_replaces_the_tables_rows_and_never_its_configuration(workbench_home):
    # Panel builds a Tabulator anew in the browser when its configuration changes, and rows that
    # arrive while it builds are dropped (Panel 1.9's `setData` returns then): the rule table stayed
    # empty after a draft loaded, on CI, because the empty table's columns were objects and the
    # loaded rows' integers, which gave two numeric columns a sorter. Every draft keeps the first.
    store, _, _ = workbench_home
    state, table = _pricing_rule_table(store)
    model = table.get_root()
    sent: list[str] = []
    model.on_change("configuration", lambda attr, old, new: sent.append(attr))
    model.on_change("columns", lambda attr, old, new: sent.append(attr))
    first = json.dumps(model.configuration, sort_keys=True, default=str)
    state.load_current()  # no rows, then the current version's
    assert len(table.value) == len(state.rules) > 0
    state.edit_cell(0, "priority", "7")  # another draft: a priority typed in the table
    state.draft_text = state.draft_text.replace('"priority": 7', '"priority": 7.5')  # a number of another kind
    state.add_rule()
    assert len(table.value) == len(state.rules) and list(model.source.data["rule_id"])[-1] == "new_rule"
    assert sent == [] and json.dumps(model.configuration, sort_keys=True, default=str) == first
    # ... and the numbers still sort as numbers (100 after 40), which Panel named only for integer columns
    sorters = {column["field"]: column.get("sorter") for column in model.configuration["columns"]}
    assert sorters["priority"] == sorters["fired"] == sorters["share"] == "number"


def test_a_draft_with_equal_rows_sends_nothing_and_an_edit_only_its_changed_cells(workbench_home):
    # Issue 54, item 6: every change of the draft replaced the table's whole value, even with equal
    # rows, and the browser drew every row again, closing a cell editor a person had just opened.
    # Equal rows now send nothing; changed cells go as a patch; only another count of rows (a rule
    # added or removed) replaces the value.
    store, _, _ = workbench_home
    state, table = _pricing_rule_table(store)
    model = table.get_root()
    state.load_current()
    sent: list[str] = []  # every change of the rows the browser holds, a patch or a new value
    model.source.on_change("data", lambda attr, old, new: sent.append(attr))
    rows = model.source.data
    state.param.trigger("rules")  # the same rows again
    state.draft_text = state.draft_text + "\n"  # the same draft, other text
    assert sent == [] and table.value.equals(rule_frame(state.rules))
    before = rule_frame(state.rules)
    state.edit_cell(1, "priority", "42")
    after = rule_frame(state.rules)
    assert sent == ["data"] and model.source.data is rows  # patched in place, not replaced
    assert table.value.equals(after) and list(model.source.data["priority"]) == list(after["priority"])
    changed = [(column, row) for column in after.columns for row in range(len(after))
               if before[column].iloc[row] != after[column].iloc[row]]
    assert ("priority", 1) in changed and all(row == 1 for _, row in changed)
    state.add_rule()  # one more row: the whole value
    assert model.source.data is not rows and len(table.value) == len(state.rules)


def test_cell_patch_names_each_changed_cell_and_none_where_the_rows_differ():
    frame = pd.DataFrame([{"a": 1, "b": "x"}, {"a": 2, "b": None}], dtype=object)
    assert cell_patch(frame, frame.copy()) == {}
    other = pd.DataFrame([{"a": 1, "b": "y"}, {"a": 2.0, "b": None}], dtype=object)
    assert cell_patch(frame, other) == {"a": [(1, 2.0)], "b": [(0, "y")]}  # 2 and 2.0 differ in kind
    assert cell_patch(None, frame) is None
    assert cell_patch(frame, frame.iloc[:1]) is None
    assert cell_patch(frame, frame.rename(columns={"b": "c"})) is None


def test_a_cell_just_edited_goes_back_in_the_same_patch_even_when_equal(workbench_home):
    # The browser shows a typed cell at once; a patch from an earlier draft still on its way can
    # write the older cell over it there, while the server's value holds the edit. The edited cell
    # is sent with the draft's rows even when equal, in the one patch those rows go in.
    store, _, _ = workbench_home
    state, table = _pricing_rule_table(store)
    model = table.get_root()
    state.load_current()
    patches: list[str] = []
    model.source.on_change("data", lambda attr, old, new: patches.append(attr))
    frame = rule_frame(state.rules)
    show_rows(table, frame, [(1, "rule_id")])
    assert len(patches) == 1 and table.value.equals(frame)
    show_rows(table, frame, [(len(frame), "rule_id"), (0, "no_such_column")])  # nothing to send back
    show_rows(table, frame)
    assert len(patches) == 1


def _pricing_rule_table(store):
    """The Authoring state of acme's pricing_exception and the page's rule table beside it."""
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    return state, rule_table(state).objects[2]


def _browser_edit(table, row: int, column: str, typed) -> None:
    """What a cell edit in the browser does on the server: Panel writes the typed value into the
    table's value (the browser's own patch), then runs the table's edit callbacks."""
    table.patch({column: [(row, typed)]}, as_index=False)
    _browser_edit_event(table, row, column)


def _browser_edit_event(table, row: int, column: str) -> None:
    from panel.models.tabulator import TableEditEvent

    table._process_event(TableEditEvent(model=table.get_root(), column=column, row=row))


def test_an_edit_the_draft_keeps_as_typed_sends_nothing_back_unless_a_patch_crossed_it(workbench_home):
    # Issue 54, item 6: every edit sent its cell back, and Panel 1.9 draws every row anew on any
    # patch, so the editor a person opened next closed. The browser shows what was typed: an edit
    # the draft keeps as typed sends nothing; a cell whose draft reads otherwise, and the cells
    # derived from it, go as one patch; the typed cell goes back only where a patch sent since
    # the last edit touched it (it may have crossed the edit in the browser).
    store, _, _ = workbench_home
    state, table = _pricing_rule_table(store)
    model = table.get_root()
    state.load_current()
    sent: list[int] = []
    model.source.on_change("data", lambda attr, old, new: sent.append(len(sent)))
    rows = model.source.data

    # The loaded rows were sent whole, so the first edit may have crossed them: its cell goes back.
    _browser_edit(table, 1, "decision", "review")
    assert json.loads(state.draft_text)["rules"][1]["outcome"]["decision"] == "review"
    assert len(sent) == 2 and model.source.data is rows  # the browser's own edit, the cell sent back
    _browser_edit(table, 1, "verdict", "HOLD")  # nothing sent since that edit: nothing goes back
    assert json.loads(state.draft_text)["rules"][1]["outcome"]["verdict"] == "HOLD"
    assert len(sent) == 3 and table.value.equals(rule_frame(state.rules))

    condition = {"field": "margin_percent", "operator": "lt", "value": 9}
    _browser_edit(table, 1, "condition", json.dumps(condition, indent=1))  # the draft writes it compact
    assert len(sent) == 5 and model.source.data is rows  # the edit, then one patch: the cell and its reading
    assert table.value["condition"].iloc[1] == ruletable.compact(condition)
    assert table.value["reads"].iloc[1] == ruletable.reads(condition)

    # A draft from the JSON editor patches row 1's decision; the person had typed into that cell
    # before the patch reached the browser: the edit's answer carries the cell.
    state.draft_text = state.draft_text.replace('"decision": "review"', '"decision": "escalate"')
    assert len(sent) == 6
    _browser_edit(table, 1, "decision", "manual")
    assert len(sent) == 8 and table.value["decision"].iloc[1] == "manual"
    _browser_edit(table, 1, "verdict", "DENY")  # the last answer patched another cell: nothing goes back
    assert len(sent) == 9 and table.value.equals(rule_frame(state.rules))


def test_a_priority_typed_as_the_number_the_draft_holds_sends_nothing_back(workbench_home):
    # Issue 54, item 6: the browser's cell editor gives text ("45") and the draft holds the number
    # 45; the table sent 45 back for a cell that reads the same, and the browser drew every row
    # again, closing the editor the person had opened next. Text the draft writes otherwise still
    # goes back.
    store, _, _ = workbench_home
    state, table = _pricing_rule_table(store)
    model = table.get_root()
    state.load_current()
    _browser_edit(table, 0, "verdict", "HOLD")  # the edit that may have crossed the loaded rows
    sent: list[int] = []
    model.source.on_change("data", lambda attr, old, new: sent.append(len(sent)))
    _browser_edit(table, 1, "priority", "45")
    assert json.loads(state.draft_text)["rules"][1]["priority"] == 45
    assert len(sent) == 1  # the browser's own edit, nothing back
    _browser_edit(table, 1, "priority", "046")  # the draft writes 46
    assert len(sent) == 3 and table.value["priority"].iloc[1] == 46


def test_an_edits_answer_leaves_before_the_json_editor_shows_the_edit(workbench_home):
    # Issue 54, item 6: the table's answer to an edit (a condition's reading, a renamed rule's
    # history) went after everything that follows the draft's check: the editor's text and marks,
    # the lint, the sweep's picks. A busy server spent most of a second drawing those; the browser
    # showed the JSON with the edit, the author opened the next cell, and the answer drew every
    # row again under its editor. The table's answer is now the edit's first message.
    store, _, _ = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    page = authoring_page(state, ["pricing_exception"])
    page.get_root()
    table = next(t for t in page.select(pn.widgets.Tabulator) if "rule-table" in t.css_classes)
    editor = page.select(pn.widgets.CodeEditor)[0]
    state.load_current()
    order: list[str] = []
    for widget, attr, name in ((table, "data", "table"), (editor, "code", "editor")):
        for root_model, _ in widget._models.values():
            target = root_model.source if name == "table" else root_model
            target.on_change(attr, lambda attr, old, new, name=name: order.append(name))
    condition = {"field": "margin_percent", "operator": "lt", "value": 9}
    table.patch({"condition": [(1, json.dumps(condition))]}, as_index=False)  # the browser's own edit
    order.clear()
    _browser_edit_event(table, 1, "condition")
    assert table.value["reads"].iloc[1] == ruletable.reads(condition)
    assert order and order[0] == "table" and "editor" in order, order


def test_a_batch_cut_between_the_editors_two_messages_keeps_the_newer_text(workbench_home, caplog):
    # Issue 65, item 4: the browser sends each change of the editor as `code` then `code_input`,
    # and Panel hands over what arrived within 50 ms as one batch. A batch cut between the two
    # carries the new text as `code` and the previous one as `code_input`; the draft took that
    # older text last, and the browser's `code_input` that followed changed nothing on the
    # server (it equalled what Panel had set), so the draft stayed behind the editor for good.
    store, _, _ = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    page = authoring_page(state, ["pricing_exception"])
    page.get_root()
    editor = page.select(pn.widgets.CodeEditor)[0]
    state.load_current()
    full = state.draft_text
    caplog.set_level(logging.DEBUG, logger="workbench.editor")
    editor._process_events({"code": "", "code_input": ""})  # emptied
    assert state.draft_text == "" and state.rules == []
    editor._process_events({"code": full, "code_input": full[:40]})  # the cut batch
    editor._process_events({"code_input": full})  # what the browser sent next
    assert state.draft_text == full and len(state.rules) == 3
    # Each message the server received is logged by attribute, length and hash, never its text.
    assert f"editor code received: {len(full)} characters" in caplog.text
    assert "editor code_input received: 40 characters" in caplog.text
    assert full[:40] not in caplog.text


# ---------------------------------------------------------------------- live impact

def test_live_impact_is_the_dry_runs_summary_of_the_draft(workbench_home):
    store, _, home = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    state.load_current()
    state.edit_cell(0, "condition", '{"field": "discount_percent", "operator": "gt", "value": 15}')
    draft, draft_hash = state.draft, state.check.rulebook_hash
    assert state.live is None and state.live_note == "updating…"
    computed = state.compute_live(draft)
    state.apply_live(computed, draft_hash)
    expected = dry_run(draft, "pricing_exception", scope="acme", dataset=home / "dataset",
                       created_at="2026-11-24T00:00:00.000Z").result
    assert state.live is not None and state.live_hash == draft_hash and state.live_note == ""
    assert state.live["impact"] == expected["impact"]
    assert state.live["decisions_changed"] == expected["decisions_changed"] > 0
    assert state.lint_report is not None and state.lint_report["kind"] == "rulebook_lint"
    text = live_markdown(state.live, "")
    for label, line in impact_rows(expected["impact"]):
        assert f"- {label}: **{md_text(line)}**" in text
    # A result for an older draft is never shown over a newer one.
    state.edit_cell(0, "priority", "99")
    state.apply_live(computed, draft_hash)
    assert state.live_hash == draft_hash and state.live_note == "updating…"
    # A draft with errors waits; a refused dry-run says why.
    state.draft_text = "{"
    assert "waits for a valid draft" in state.live_note
    other = copy.deepcopy(draft)
    other["rulebook_id"] = "unknown_rulebook"
    state.rulebook_id = ""
    refused = state.compute_live(other)
    assert "unknown_rulebook" in refused["refused"]


def test_the_scheduled_live_impact_shows_the_last_edit_and_logs_a_failed_run(workbench_home, caplog):
    """`schedule_live` as the served page runs it, on an event loop: edits faster than the
    debounce end on the last draft's figures; a run that raises says so on the page and leaves
    its traceback in the server's log; the next edit's run shows its figures again."""
    store, _, _ = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    state.load_current()
    failures: list[str] = []
    compute = state.compute_live

    def flaky(draft):
        if failures:
            raise RuntimeError(failures.pop())
        return compute(draft)

    state.compute_live = flaky

    async def settle() -> None:
        while state.live_note == "updating…":
            await asyncio.sleep(0.05)

    async def journey() -> None:
        schedule_live(state)
        for value in (15, 20, 25):  # three edits within one debounce: only the last one runs
            state.edit_cell(0, "condition", json.dumps({"field": "discount_percent", "operator": "gt", "value": value}))
        await asyncio.wait_for(settle(), 60)
        assert state.live_hash == state.check.rulebook_hash and state.live_note == ""
        assert state.live == compute(state.draft)["summary"]
        failures.append("the dataset went away")
        state.edit_cell(0, "priority", "99")
        await asyncio.wait_for(settle(), 60)
        assert state.live_note == "live impact failed: see the server log"
        state.edit_cell(0, "priority", "98")
        await asyncio.wait_for(settle(), 60)
        assert state.live_hash == state.check.rulebook_hash and state.live_note == ""

    with caplog.at_level(logging.ERROR, logger="workbench.authoring"):
        run_on_own_loop(journey(), timeout=300)
    failed = [r for r in caplog.records if r.name == "workbench.authoring"]
    assert len(failed) == 1 and "live impact of draft" in failed[0].getMessage()
    assert "the dataset went away" in str(failed[0].exc_info[1])


# ---------------------------------------------------------------------- threshold sweeps

def test_the_sweep_is_the_librarys_and_a_picked_point_sets_the_threshold(workbench_home):
    store, _, home = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    state.load_current()
    assert [comparison_key(c) for c in state.comparisons] == [
        "block_deep_discount|discount_percent|0", "review_thin_margin|margin_percent|0",
        "approve_owner_backed|discount_percent|0"]
    assert (state.sweep_key, state.sweep_from, state.sweep_to) == ("block_deep_discount|discount_percent|0", 10.0, 30.0)
    state.sweep_key = "review_thin_margin|margin_percent|0"  # the pick sets its range, the author's follows
    state.param.update(sweep_from=10.0, sweep_to=40.0, sweep_steps=7)
    request = state.sweep_request()
    assert request is not None
    state.apply_sweep(state.compute_sweep(request))
    expected = sweep(state.draft, "pricing_exception", ("review_thin_margin", "margin_percent", 0),
                     [10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0], scope="acme", dataset=home / "dataset",
                     baseline=store.current_rulebook("acme", "pricing_exception"),
                     baseline_source="newest inline version (no release)")  # what the page compares with
    assert state.sweep_result == expected and "swept 7 thresholds" in state.message
    columns = sweep_columns(expected)
    assert columns["threshold"] == [10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0]
    assert columns["approvals"][3] == 100 * expected["points"][3]["approvals"]["rate"]
    assert sweep_frame(expected).shape[0] == 7
    state.use_threshold(25.0)
    assert json.loads(state.draft_text)["rules"][1]["condition"] == {"field": "margin_percent", "operator": "lt",
                                                                     "value": 25}
    assert "margin_percent lt 25 set in the draft" in state.message
    # Refusals change nothing.
    text = state.draft_text
    state.param.update(sweep_from=30.0, sweep_to=10.0)
    assert state.sweep_request() is None and "from <= to" in state.message
    state.sweep_key = "no_such|x|0"
    assert state.sweep_request() is None and "pick a numeric comparison" in state.message
    assert state.draft_text == text


def test_each_comparison_gets_its_own_sweep_range_from_its_fields_history(workbench_home):
    """Issue 45, item 3: the first comparison's range (0 to twice its value) stayed for every
    comparison picked after it. Each pick now sets From and To to its own field's observed spread
    (percentiles 1 to 99), widened to hold the draft's value; the author's own range stands until
    the next pick. The ledger's facts (`build_small_ledger`): scope acme holds the decisions whose
    index is not a multiple of 3, discount 10 + 5 (i mod 5), margin 15 + 8 (i mod 4)."""
    store, _, _ = workbench_home
    acme = [i for i in range(48) if i % 3]
    observed = {"discount_percent": [10 + (i % 5) * 5 for i in acme], "margin_percent": [15 + (i % 4) * 8 for i in acme]}
    for field, values in observed.items():
        spread = store.migration.field_spread("acme", "pricing_exception", field)
        assert spread["observed"] == len(values) == 32
        assert (spread["low"], spread["high"]) == pytest.approx(tuple(np.percentile(values, [1, 99])))
        assert (spread["min"], spread["max"]) == (min(values), max(values))
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    state.load_current()
    picks = {"block_deep_discount|discount_percent|0": (10.0, 30.0),  # discount 10..30 holds its 25
             "review_thin_margin|margin_percent|0": (15.0, 39.0),  # margin 15..39 holds its 20
             "approve_owner_backed|discount_percent|0": (10.0, 30.0)}
    assert state.sweep_key == "block_deep_discount|discount_percent|0"
    assert "percentiles 1 to 99 of its 32 observed values" in state.sweep_basis
    for key, expected in picks.items():
        state.sweep_key = key
        assert (state.sweep_from, state.sweep_to) == expected, key
        assert state.sweep_basis.startswith(f"{key.split('|')[1]}'s range")
        state.param.update(sweep_from=1.0, sweep_to=2.0)  # the author's own range stands ...
        state.draft_text = state.draft_text.replace('"version": "', '"version": "x', 1)
        assert (state.sweep_key, state.sweep_from, state.sweep_to) == (key, 1.0, 2.0)  # ... until the next pick
    # A draft value outside the observed spread widens the range to it.
    state.draft_text = state.draft_text.replace('"value": 25', '"value": 80', 1)
    state.sweep_key = "review_thin_margin|margin_percent|0"
    state.sweep_key = "block_deep_discount|discount_percent|0"
    assert (state.sweep_from, state.sweep_to) == (10.0, 80.0)
    # Without a history to read, the range is around the draft's value, and the page says why.
    lost = AuthoringState(store, scope="acme", rulebook_id="no_such_rulebook")
    lost.draft_text = state.draft_text
    assert (lost.sweep_from, lost.sweep_to) == (0.0, 160.0) and "no decision of rulebook" in lost.sweep_basis


def test_a_sweep_range_is_the_observed_spread_widened_to_the_value_and_rounded_outward():
    assert default_range(0.8, {"low": 0.0286, "high": 0.508}) == (0.02, 0.8)
    assert default_range(150, {"low": 23.85, "high": 534.12}) == (20.0, 540.0)
    assert default_range(150, {"low": 23.85, "high": 1873.4}) == (0.0, 1900.0)
    assert default_range(-3, {"low": -7.25, "high": 12.5}) == (-8.0, 13.0)
    assert default_range(5, {"low": 5.0, "high": 5.0}) == (0.0, 10.0)  # one observed value, the draft's
    assert default_range(0.8, None) == (0.0, 1.6) and default_range(-2, None) == (-4.0, 0.0)
    assert default_range(0, {"low": None, "high": None}) == (-1.0, 1.0)


def test_numeric_comparisons_are_the_leaves_a_sweep_accepts():
    rulebook = json.loads((ROOT / "gate" / "data" / "rulebooks" / "refund-approval.json").read_text())
    rulebook["rules"][3]["condition"]["all"].append({"not": {"field": "amount", "operator": "gt", "value": 9}})
    rulebook["rules"][3]["condition"]["all"].append({"field": "amount", "operator": "gte", "value": 5})
    found = numeric_comparisons(rulebook)
    approve = [c for c in found if c["rule_id"] == "approve_small_recent" and c["field"] == "amount"]
    # occurrence 1 is under `not`: not offered, but the next one is occurrence 2, as find_leaf counts
    assert [(c["occurrence"], c["operator"], c["value"]) for c in approve] == [(0, "lte", 150), (2, "gte", 5)]
    edited = with_threshold(rulebook, "approve_small_recent", "amount", 2, 0.1 + 0.2)
    assert edited["rules"][3]["condition"]["all"][-1]["value"] == 0.3
    assert with_threshold(rulebook, "block_stale_order", "order_age_days", 0, 60.0)["rules"][1]["condition"][
        "value"] == 60
    assert rulebook["rules"][1]["condition"]["value"] == 90


def test_each_edit_flags_an_undeclared_fact_and_a_number_compared_with_a_string(workbench_home):
    """Issue 21, item 4: the live check (lint, run with each edit's live impact) flags under the
    editor what lint flags: reading an undeclared fact, comparing a number with a string."""
    store, _, _ = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    state.load_current()
    state.apply_live(state.compute_live(state.draft), state.check.rulebook_hash)
    assert live_warnings(state.lint_report, state.draft_text) == ""  # the sample draft is clean
    state.edit_cell(0, "condition", '{"field": "discount_percent", "operator": "gt", "value": "25"}')
    state.edit_cell(1, "condition", '{"field": "coupon_code", "operator": "eq", "value": "X"}')
    assert state.check.valid and state.lint_report is None  # an edit clears the old findings
    state.apply_live(state.compute_live(state.draft), state.check.rulebook_hash)
    text = live_warnings(state.lint_report, state.draft_text)
    assert text.startswith("**2 warning(s) as you type** (lint):")
    assert "rule block\\_deep\\_discount (line" in text and "unsatisfiable" in text
    assert "fact coupon\\_code" in text and "undeclared\\_field" in text


def test_a_draft_held_before_the_page_is_built_gets_its_live_impact_without_an_edit(workbench_home):
    """Issue 45, item 5: a shared link's draft is applied before the pages exist, so its check
    changed before the live impact watched it, and the page said "updating…" until the next
    edit. The page built over a state that holds a valid draft runs that draft's impact."""
    store, _, _ = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    state.load_current()  # as a link's draft: held before the page is built
    assert state.live_note == "updating…" and state.live is None

    async def journey() -> None:
        schedule_live(state)
        async def settle() -> None:
            while state.live_note == "updating…":
                await asyncio.sleep(0.05)
        await asyncio.wait_for(settle(), 30)
        assert state.live_hash == state.check.rulebook_hash and state.live_note == ""
        assert state.live == state.compute_live(state.draft)["summary"]

    run_on_own_loop(journey(), timeout=300)


