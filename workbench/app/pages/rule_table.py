"""The Authoring page's rule table: the draft's rules as editable rows beside the JSON editor,
each with its history (how often it decided, its share, the success rate with its interval)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import panel as pn

from gate.strict_json import JsonValue
from workbench.app.ruletable import COLUMNS, EDITABLE, RuleRowHistory
from workbench.app.state.authoring import AuthoringState
from workbench.reports.textsafe import md_text

HISTORY_COLUMNS = ("fired", "share", "success_rate")
# The rule's short cells and its history first (they fit the page), the condition last.
SHOWN = ("index", "priority", "rule_id", "decision", "verdict", "action", "reason_code", *HISTORY_COLUMNS,
         "reads", "condition")
WIDTHS = {"reads": 320, "condition": 420}
# The columns sorted as numbers ("42.6%" as 42.6), named here because the frame's columns are all
# objects (`rule_frame`), for which Panel names no sorter.
NUMERIC = ("index", "priority", "fired", "share")
TITLES = {"index": "#", "priority": "priority", "rule_id": "rule", "condition": "condition (JSON)",
          "reads": "reads as", "decision": "decision", "verdict": "verdict", "action": "action",
          "reason_code": "reason code", "fired": "decided in history", "share": "share",
          "success_rate": "success rate (95%)"}


def _success(row: RuleRowHistory) -> str:
    rate, interval = row.get("success_rate"), row.get("success_interval")
    low, high = interval if interval is not None else (None, None)
    if rate is None or low is None or high is None:
        return "no resolved outcome" if row.get("fired") else "no history"
    text = f"{100 * rate:.1f}% ({100 * low:.1f}–{100 * high:.1f}%, n={row['resolved']:,})"
    return text if row["resolved"] >= 10 else f"{text} too few to judge"


def rule_frame(rows: list[RuleRowHistory]) -> pd.DataFrame:
    """The rows as the table shows them: the rule's cells, then its history as text.

    Every column is of dtype object, whatever the rows hold: Panel derives the table's column
    configuration (a numeric column's sorter) from the dtypes, and a changed configuration makes
    the browser build the table anew; rows that arrive while it builds are dropped (Panel 1.9's
    `setData` returns while the table is building), and the table stayed empty after a draft
    loaded (an empty frame's object columns became integers). With one configuration for every
    draft, a new draft only replaces the rows."""
    shown = [{**{name: row.get(name) for name in COLUMNS},
              "fired": int(row.get("fired") or 0),
              "share": "" if (share := row.get("share")) is None else f"{100 * share:.1f}%",
              "success_rate": _success(row)} for row in rows]
    return pd.DataFrame(shown, columns=list(SHOWN), dtype=object)


def _same(old: Any, new: Any) -> bool:
    """Whether the browser shows `new` as it shows `old`: equal values of one kind, or the text an
    author typed for the whole number the draft holds (a priority typed as "45" is the draft's 45;
    sending 45 back drew every row again for a cell that reads the same)."""
    if isinstance(old, str) and isinstance(new, int) and not isinstance(new, bool):
        return old == str(new)
    return type(old) is type(new) and bool(old == new)


def cell_patch(shown: pd.DataFrame | None, frame: pd.DataFrame) -> dict[str, list[tuple[int, Any]]] | None:
    """The cells of `frame` that differ from the table's `shown` rows, per column as Tabulator's
    patch takes them ({} where every cell is equal), or None where the rows themselves differ
    (another count or other columns) and the table must take the new frame whole.

    Replacing the table's value draws every row anew in the browser, which closes a cell editor a
    person has just opened; a draft arriving from the server with equal rows (the JSON's own echo
    of an edit, a refused edit that puts the draft's cell back) must not."""
    if shown is None or list(shown.columns) != list(frame.columns) or len(shown) != len(frame):
        return None
    patch: dict[str, list[tuple[int, Any]]] = {}
    for column in frame.columns:
        old, new = shown[column].tolist(), frame[column].tolist()
        changed = [(row, value) for row, value in enumerate(new) if not _same(old[row], value)]
        if changed:
            patch[column] = changed
    return patch


def show_rows(table: pn.widgets.Tabulator, frame: pd.DataFrame,
              resend: Sequence[tuple[int, str]] = ()) -> set[tuple[int, str]]:
    """Bring the table to `frame`: its changed cells patched, or the whole value where the rows
    differ in number or columns; nothing sent where every cell is equal. Returns the cells sent.

    `resend` names cells sent in the patch even when equal to the table's value (`TableRows`:
    the cell just edited, where a patch crossed the edit). It goes in the same patch as the rest:
    Panel 1.9's browser side draws every row anew on each patch, so each one closes an open editor."""
    patch = cell_patch(table.value, frame)
    if patch is None:
        table.value = frame
        return {(row, str(column)) for column in frame.columns for row in range(len(frame))}
    for row, column in resend:
        if 0 <= row < len(frame) and column in frame.columns and row not in {r for r, _ in patch.get(column, [])}:
            patch.setdefault(column, []).append((row, frame[column].iloc[row]))
    if patch:
        table.patch(patch, as_index=False)
    return {(row, column) for column, cells in patch.items() for row, _ in cells}


class TableRows:
    """What the browser's rule table was sent since a person's last cell edit, so an edit is
    answered with only what the browser does not show yet.

    The browser shows a typed cell at once, and Panel 1.9 draws every row anew on any patch, which
    closes a cell editor the person may have opened since: an edit the draft keeps as typed sends
    nothing back. The typed cell goes back only where a patch sent since the last edit touched
    it: that patch may have crossed the edit and written the older cell over it in the browser,
    while the server's value holds the edit, so a diff alone would never send the cell again."""

    def __init__(self, table: pn.widgets.Tabulator) -> None:
        self.table = table
        self.sent: set[tuple[int, str]] = set()  # cells sent since the last edit
        self.editing: list[tuple[int, str]] = []  # the cell being written, where a patch crossed it

    def show(self, frame: pd.DataFrame) -> None:
        self.sent |= show_rows(self.table, frame, self.editing)

    def edit(self, row: int, column: str, write: Callable[[], None]) -> None:
        """Write the browser's edit of (row, column) into the draft (`write`), which shows the rows."""
        crossed = (row, column) in self.sent
        self.sent = set()
        self.editing[:] = [(row, column)] if crossed else []
        try:
            write()
        finally:
            self.editing.clear()


def rule_table(state: AuthoringState) -> pn.Column:
    """The editable table, kept in step with the draft both ways: a cell edit is written into
    the draft's JSON (`AuthoringState.edit_cell`), and every change of the draft patches the
    cells that changed (`show_rows`, through `TableRows`)."""
    editors: dict[str, JsonValue] = {name: None for name in (*COLUMNS, *HISTORY_COLUMNS) if name not in EDITABLE}
    editors.update({name: {"type": "input"} for name in EDITABLE})
    # Every row drawn, not only those Tabulator's virtual renderer finds room for when it draws
    # (a draft's rules are few: the rulebook's budget bounds them). No key bindings: Tabulator 6.4
    # reads a key by its character's code, so a `"` typed into a cell was Page Down (34) and
    # dropped, and `!#$%&'(` scrolled or moved the editor away (33-40); Enter, Escape and leaving
    # the cell are the editor's own and still commit or cancel.
    table = pn.widgets.Tabulator(rule_frame(state.rules), editors=editors, show_index=False, selectable=1,
                                 titles=TITLES, widths=WIDTHS, layout="fit_data_table", sizing_mode="stretch_width",
                                 height=260, css_classes=["rule-table"], name="Rules",
                                 configuration={"renderVertical": "basic", "keybindings": False,
                                                "columns": [{"field": name, "sorter": "number"} for name in NUMERIC]})

    rows = TableRows(table)

    def edited(event: Any) -> None:
        index = int(table.value.iloc[event.row]["index"])
        rows.edit(event.row, event.column, lambda: state.edit_cell(index, event.column, event.value))

    table.on_edit(edited)
    state.param.watch(lambda e: rows.show(rule_frame(e.new)), "rules")
    add = pn.widgets.Button(name="Add rule")
    add.on_click(lambda _: state.add_rule())
    remove = pn.widgets.Button(name="Remove selected rule")

    def removed(_: object) -> None:
        if not table.selection:
            state.table_message = "select a rule's row first"
            return
        state.remove_rule(int(table.value.iloc[table.selection[0]]["index"]))

    remove.on_click(removed)
    status = pn.pane.Markdown(pn.bind(md_text, state.param.table_message), css_classes=["table-message"])
    return pn.Column("### Rules", pn.pane.Markdown(
        "Each row is one rule of the draft: edit a cell and the JSON follows (and the JSON's edits show here). "
        "History is the stored decisions each rule decided, under every version of the rulebook in this scope."),
        table, pn.Row(add, remove), status, sizing_mode="stretch_width")

