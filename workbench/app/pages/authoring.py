"""Authoring page: the draft editor with live validation, tests, lint and minimal flips."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any

import panel as pn
import param

from gate.rulebook import RulebookDocument
from gate.strict_json import JsonValue
from workbench.app.lintview import LintItem, lint_items
from workbench.app.pages.common import json_pane, note
from workbench.app.pages.rule_table import rule_table
from workbench.app.pages.sweep import sweep_view
from workbench.app.state.authoring import LIVE_DEBOUNCE_S, AuthoringState
from workbench.app.store import DraftCheck
from workbench.migration.baseline import compared_with
from workbench.migration.holdcost import hold_cost_text
from workbench.migration.impact import impact_rows
from workbench.reports.textsafe import md_text
from workbench.services.impact import LiveSummary

LOG = logging.getLogger("workbench.authoring")
EDITOR_LOG = logging.getLogger("workbench.editor")


def error_markdown(check: DraftCheck | None) -> str:
    if check is None:
        return "Type or load a draft rulebook."
    if check.valid:
        return f"**Valid Rulebook v1** · hash {md_text((check.rulebook_hash or '')[:16])}…"
    lines = [f"**Invalid draft: {len(check.errors)} error(s)**", ""]
    for error in check.errors:  # paths and messages quote what the author typed: text only
        lines.append(f"- line {error['line'] + 1}, column {error['column'] + 1} · {md_text(error['field'])}: "
                     f"{md_text(error['message'])} ({md_text(error['code'])})")
    return "\n".join(lines)


def editor_annotations(check: DraftCheck | None) -> list[dict[str, Any]]:
    """The draft's errors as the code editor's gutter marks (0-based line and column)."""
    if check is None or check.valid:
        return []
    return [{"row": e["line"], "column": e["column"], "text": f"{e['field']}: {e['message']}", "type": "error"}
            for e in check.errors]


def _rulebook_picker(state: AuthoringState, policies: list[str]) -> pn.Row:
    rulebook = pn.widgets.Select.from_param(state.param.rulebook_id, name="Rulebook", options=policies)
    load = pn.widgets.Button(name="Load current version", button_type="primary")
    load.on_click(lambda _: state.load_current())
    return pn.Row(rulebook, load, align="end")


class DraftEditor(pn.widgets.CodeEditor):
    """The draft's code editor, which logs each change message the server receives from the browser
    (logger `workbench.editor` at DEBUG, on with `gate workbench --log-editor`): the attribute, the
    text's length and the start of its SHA-256, never the text (a draft may hold sensitive values)."""

    def _process_events(self, events: dict[str, Any]) -> None:
        if EDITOR_LOG.isEnabledFor(logging.DEBUG):
            for attr, text in events.items():
                if attr in ("code", "code_input") and isinstance(text, str):
                    EDITOR_LOG.debug("editor %s received: %d characters, sha256 %s", attr, len(text),
                                     hashlib.sha256(text.encode()).hexdigest()[:12])
        super()._process_events(events)


def _draft_editor(state: AuthoringState) -> pn.widgets.CodeEditor:
    """The draft's editor, in step with the view-model both ways, its errors marked in the gutter.

    Text the editor itself sent is never sent back to it: while the author types, each keystroke's
    text reaches the view-model, and writing the (by then older) text back into the browser's
    editor would drop the characters typed meanwhile. Only a change from elsewhere (a loaded
    version, a link, the page's own edits) is written into the editor.

    The draft follows the editor's `value` alone (Panel's `code`), read from the editor, never an
    event's `value_input` (`code_input`). The browser sends each change twice, `code` then
    `code_input`, and Panel hands over what arrived within its 50 ms as one batch; a batch cut
    between the two carries the new `code` with the previous `code_input`. Panel's CodeEditor sets
    `value_input` from `value` first, so the batch's own older `value_input` came after and wrote
    the previous text into the draft, and the browser's `code_input` that followed equalled what
    the server had just set, so it changed nothing and nothing put it right (issue 65: the server
    kept the text before the last insertion, or the emptied draft, under an editor showing it all)."""
    editor = DraftEditor(value=state.draft_text, language="json", height=420,  # type: ignore[no-untyped-call]
                         sizing_mode="stretch_width", on_keyup=True, name="Draft")
    editor.annotations = editor_annotations(state.check)
    from_editor = {"text": state.draft_text}

    def typed(_event: param.parameterized.Event) -> None:
        text = editor.value  # the newest text the browser sent, whatever the batch's order
        from_editor["text"] = text
        if text != state.draft_text:
            state.draft_text = text

    editor.param.watch(typed, "value")

    def refreshed(event: param.parameterized.Event) -> None:
        if state.draft_text != from_editor["text"]:  # changed elsewhere: show it
            from_editor["text"] = state.draft_text
            editor.value = state.draft_text
        editor.annotations = editor_annotations(state.check)

    state.param.watch(refreshed, ["draft_text", "check"])
    return editor


def _lint_line(item: LintItem) -> str:
    """One distinct finding: severity, where (rule and line), message, how many, fix."""
    many = f" · **{item['count']} regions**" if item["count"] > 1 else ""
    return (f"**{md_text(item['severity'])}** · {md_text(item['where'])}"
            + (f" (line {item['line']})" if item["line"] else "")
            + f" · {md_text(item['code'])}: {md_text(item['message'])}{many}"
            + (f"  \n*Fix:* {md_text(item['fix'])}" if item["fix"] else ""))


def _regions_markdown(item: LintItem) -> str:
    """A finding's regions, each in words with a fact set inside it (the region's witness)."""
    return "\n".join(f"{number}. {md_text(region['text'])}  \n   *e.g.* "
                      f"{md_text(json.dumps(region['witness'], ensure_ascii=False))}"
                      for number, region in enumerate(item["regions"], start=1))


def lint_view(report: Mapping[str, JsonValue] | None, text: str) -> pn.Column:
    """The lint findings as a readable list, one line per distinct finding (`lint_items`: the
    same finding in seven regions is one line that says 7), most severe first; a finding with
    regions opens to list them, each with a fact set that lands there."""
    items = lint_items(report, text)
    if report is None:
        head = "*Lint the draft to see its findings.*"
    elif not items:
        head = "**No findings.** The rules are reachable, declared and disjoint where it matters."
    else:
        total = sum(item["count"] for item in items)
        head = (f"**{total} finding(s), {len(items)} distinct** ({md_text(report.get('method'))} analysis), "
                "most severe first")
    shown: list[Any] = [pn.pane.Markdown(head, sizing_mode="stretch_width")]
    for item in items:
        line = pn.pane.Markdown(_lint_line(item), sizing_mode="stretch_width", css_classes=["lint-finding"],
                                styles={"text-align": "left"})
        if not item["regions"]:
            shown.append(line)
            continue
        shown.append(pn.Card(pn.pane.Markdown(_regions_markdown(item), sizing_mode="stretch_width"), header=line,
                             collapsed=True, sizing_mode="stretch_width", css_classes=["lint-regions"]))
    return pn.Column(*shown, sizing_mode="stretch_width", css_classes=["lint-findings"])


def _draft_tests(state: AuthoringState) -> pn.Row:
    """The draft tried on hand-entered facts, on a stored decision, and linted."""
    facts = pn.widgets.TextAreaInput.from_param(state.param.facts_text, name="Facts (JSON)", height=120)
    run_facts = pn.widgets.Button(name="Evaluate facts")
    run_facts.on_click(lambda _: state.run_facts())
    decision = pn.widgets.TextInput.from_param(state.param.decision_id, name="Stored decision id")
    run_decision = pn.widgets.Button(name="Evaluate on decision")
    run_decision.on_click(lambda _: state.run_decision())
    run_lint = pn.widgets.Button(name="Lint draft")
    run_lint.on_click(lambda _: state.run_lint())
    return pn.Row(
        pn.Column("### Test on facts", facts, run_facts,
                  json_pane(state.param.test_result, "Draft result"),
                  json_pane(state.param.flips, "Minimal flips (one fact each)"), width=460),
        pn.Column("### Test on a stored decision", decision, run_decision,
                  json_pane(state.param.decision_test, "Stored vs draft"), width=460),
        pn.Column("### Lint", run_lint, pn.bind(lint_view, state.param.lint_report, state.param.draft_text),
                  width=460),
    )


def live_warnings(report: Mapping[str, JsonValue] | None, text: str) -> str:
    """The lint's warnings of the draft under the editor, as each edit's live check finds them:
    an undeclared fact read, a comparison no valid input satisfies (a number compared with a
    string), a rule never reached. Empty when there are none (info findings stay in the list)."""
    warnings = [item for item in lint_items(report, text) if item["severity"] == "warning"]
    if not warnings:
        return ""
    lines = [f"**{len(warnings)} warning(s) as you type** (lint):"]
    lines += [f"- {md_text(i['where'])}" + (f" (line {i['line']})" if i["line"] else "")
              + f" · {md_text(i['code'])}: {md_text(i['message'])}" for i in warnings]
    return "\n".join(lines)


def live_markdown(live: LiveSummary | None, note_text: str) -> str:
    """The live impact beside the editor: the dry-run summary's own rows (`impact_rows`, as the
    Migration page, the CLI and the reports print them)."""
    head = "### Live impact over full history"
    if live is None:
        return f"{head}\n\n*{md_text(note_text or 'Type or load a valid draft to see its impact.')}*"
    review = live["review_load"]
    counts = (f"**{live['decisions_evaluated']:,}** decisions replayed · **{live['decisions_changed']:,}** change "
              f"verdict · review queue {review['before']:,} → {review['after']:,}")
    baseline = f"*{md_text(compared_with(live.get('baseline')).capitalize())}.*"
    lines = [head, "", baseline, "", counts, ""]
    lines += [f"- {label}: **{md_text(text)}**" for label, text in impact_rows(live["impact"])]
    lines.append(f"- Cost of a hold: {md_text(hold_cost_text(review.get('hold_cost')))}")
    if note_text:
        lines += ["", f"*{md_text(note_text)}*"]
    return "\n".join(lines)


def schedule_live(state: AuthoringState) -> None:
    """Re-run the live impact `LIVE_DEBOUNCE_S` after each valid edit, in a worker thread; an
    edit meanwhile cancels the wait, and a result for an older draft is dropped (`apply_live`)."""
    pending: dict[str, asyncio.Task[None] | None] = {"task": None}

    async def run(draft: RulebookDocument, draft_hash: str) -> None:
        await asyncio.sleep(LIVE_DEBOUNCE_S)
        computed = None
        try:
            computed = await asyncio.to_thread(state.compute_live, draft)
        except Exception:  # the page says "see the server log": this is that log's line
            LOG.exception("live impact of draft %s failed", draft_hash[:16])
        finally:
            state.apply_live(computed, draft_hash)

    def start(check: DraftCheck | None) -> None:
        task = pending["task"]
        if task is not None and not task.done():
            task.cancel()
        if check is None or check.document is None or check.rulebook_hash is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not served (no event loop): nothing runs in the background
            return
        pending["task"] = loop.create_task(run(check.document, check.rulebook_hash))

    state.param.watch(lambda event: start(event.new), "check")
    # A draft the state already holds when the page is built (a shared link's: the link is applied
    # before the pages exist) has had no edit to start its run: it starts now, not at the next edit.
    if state.check is not None and state.live_hash != state.check.rulebook_hash:
        start(state.check)


def authoring_page(state: AuthoringState, policies: list[str]) -> pn.viewable.Viewable:
    schedule_live(state)
    live = pn.pane.Markdown(pn.bind(live_markdown, state.param.live, state.param.live_note),
                            css_classes=["live-impact"], width=520)
    return pn.Column(
        _rulebook_picker(state, policies),
        note(state.param.message),
        pn.Row(pn.Column(_draft_editor(state),
                         pn.pane.Markdown(pn.bind(error_markdown, state.param.check), css_classes=["draft-errors"],
                                          sizing_mode="stretch_width"),
                         pn.pane.Markdown(pn.bind(live_warnings, state.param.lint_report, state.param.draft_text),
                                          css_classes=["live-warnings"], sizing_mode="stretch_width"),
                         sizing_mode="stretch_width"),
               live, sizing_mode="stretch_width"),
        rule_table(state),
        sweep_view(state),
        _draft_tests(state),
        name="Authoring",
    )
