"""Issue 65, item 4: no replace-all edit of the draft is lost between the browser's editor and
the server. Twice in CI the editor showed a whole new draft while the server kept the emptied one
(once typed after emptying the editor with a key, once pasted over the selected old text), and
the author saw an empty rule table under a full editor."""

from __future__ import annotations

import copy
import json
import time

import pytest

from tests.browser.test_workbench_pages import RULEBOOK, _editor_draft, _url_draft, load_current, open_scope
from tests.browser.test_workbench_pages import workbench as workbench
from workbench.app.pages.links import draft_for_url

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPLACEMENTS = 50
PASTE = """(input, text) => {
  const data = new DataTransfer();
  data.setData('text/plain', text);
  input.dispatchEvent(new ClipboardEvent('paste', {clipboardData: data, bubbles: true, cancelable: true}));
}"""
_FOCUSED = "input => input.getRootNode().activeElement === input"  # the editor has the keys (shadow root)


def _draft(number: int) -> tuple[str, str]:
    """The number'th replacement: the rulebook with one to three of its rules and a version label
    of its own, pretty-printed, split where its version label's text goes (typed there key by key)."""
    draft = copy.deepcopy(RULEBOOK)
    draft["rules"] = draft["rules"][: 1 + number % len(RULEBOOK["rules"])]
    draft["version"] = "@"
    head, tail = json.dumps(draft, indent=2).split("@")
    return head, tail


def _server_holds(page, text: str, rules: int, seconds: float = 10) -> tuple[str, int]:
    """Wait until the server's draft (the page's URL carries it) is `text`, then until its rule
    table has `rules` rows; return what the server held last and the table's row count."""
    served, rows = draft_for_url(text), page.locator(".rule-table .tabulator-row")
    deadline = time.monotonic() + seconds
    while (held := _url_draft(page)) != served and time.monotonic() < deadline:
        time.sleep(0.03)
    while (shown := rows.count()) != rules and time.monotonic() < deadline:
        time.sleep(0.03)
    return held, shown


def test_fifty_replace_all_edits_typed_and_pasted_each_reach_the_server(page, workbench):
    """50 replacements of the whole draft in a row, alternating: emptied with a key and then
    typed (the version label key by key), and pasted over the selected text (Ace's own paste,
    from a clipboard event). After each, the server's draft (the URL's) equals the editor's text
    and the rule table shows its rules; the next replacement starts right after, with the
    previous one's answers possibly still on their way, as an author's quick retries do."""
    open_scope(page, workbench)
    load_current(page, "pricing_exception")
    editor = page.locator(".ace_text-input")
    lost: list[str] = []
    editor.focus()
    for number in range(REPLACEMENTS):
        head, tail = _draft(number)
        label = f"v{number:02d}"
        text = head + label + tail
        assert number % 10 or editor.evaluate(_FOCUSED)  # the keys still go to the editor
        page.keyboard.press("Control+A")
        if number % 2 == 0:  # emptied with a key, then typed
            page.keyboard.press("Backspace")
            page.keyboard.insert_text(head)
            page.keyboard.type(label)
            page.keyboard.insert_text(tail)
        else:  # pasted over the selection
            editor.evaluate(PASTE, text)
        shown = _editor_draft(page)
        assert shown == text, f"replacement {number}: the editor holds {shown[:80]!r}"
        held, rows = _server_holds(page, text, len(json.loads(text)["rules"]))
        if held != draft_for_url(text) or rows != len(json.loads(text)["rules"]):
            lost.append(f"replacement {number} ({'typed' if number % 2 == 0 else 'pasted'}): the server held "
                        f"{held[:60]!r}, the rule table showed {rows} row(s)")
    frames = "\n".join(page.editor_frames[-20:])
    assert not lost, "\n".join(lost) + f"\nlast editor frames:\n{frames}\nserver log tail:\n" \
        + workbench.log.read_text(errors="replace")[-3000:]
    assert page.errors == []
