"""A real `gate workbench` on loopback and headless Debian chromium driving it.

Chromium comes from Debian's package (`.ci/run` installs it; no tool downloads a browser build).
Screenshots go to `$GATE_TEST_OUTPUT/screenshots` (default `test-output/screenshots`), one per
page, so a person can look at what the tests saw.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from tests.server.support import free_port

ROOT = Path(__file__).resolve().parents[2]
GATE = str(Path(sys.executable).parent / "gate")
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update"]
SCREENSHOTS = Path(os.environ.get("GATE_TEST_OUTPUT", ROOT / "test-output")) / "screenshots"


def wait_for(url: str, process: subprocess.Popen, log: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"workbench exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"workbench did not answer at {url}:\n{log.read_text()}")


class Workbench:
    """One `gate workbench` process on a free loopback port, over a home folder."""

    def __init__(self, home: Path, extra: list[str] | None = None, port: int | None = None,
                 ready: str = "/workbench") -> None:
        """`ready`: the path answered once it serves (a sign-in provider's pages need a browser's
        cookies, so a workbench signing in through one is asked for its logout page)."""
        self.home, self.port = home, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/workbench"
        self.log = home / f"workbench-{self.port}.log"
        env = {**os.environ, "GATE_HOME": str(home)}
        env.pop("GATE_DATABASE_URL", None)
        env.pop("GATE_SIGNING_KEY_FILE", None)
        with open(self.log, "w") as log:  # the server writes to its own copy of the file
            self.process = subprocess.Popen(
                [GATE, "workbench", "--port", str(self.port), *(extra or [])], env=env,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(f"http://127.0.0.1:{self.port}{ready}", self.process, self.log)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the test item, so the `page` fixture knows its test failed."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture
def page(browser, request):
    context = browser.new_context(viewport={"width": 1500, "height": 1100}, accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    console: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
    page.errors = errors
    page.editor_frames = editor_frames(page)
    page.set_default_timeout(60_000)
    yield page
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        print(failure_evidence(page, request.node.name, console))
    context.close()


# What the page's tables hold: a table drawn with no rows (CI saw the Authoring page's rule table
# stay empty for 60 s after its draft loaded, once, on one xdist worker) shows here with its size.
# Panel draws each widget inside a shadow root, which `querySelectorAll` does not enter: the
# tables are looked for in every open shadow root too.
_TABLES = """() => {
  const found = [];
  const visit = root => {
    root.querySelectorAll('.tabulator').forEach(table => found.push(table));
    root.querySelectorAll('*').forEach(node => { if (node.shadowRoot) visit(node.shadowRoot); });
  };
  visit(document);
  return found.map(table => {
    const holder = table.querySelector('.tabulator-tableholder');
    const host = table.getRootNode().host;
    return {classes: (host ? host.className + ' ' : '') + table.className,
            rows: table.querySelectorAll('.tabulator-row').length,
            height: table.clientHeight, holder: holder ? holder.clientHeight : null,
            visible: table.offsetParent !== null};
  });
}"""


# The pages' status lines (a Markdown pane draws its text inside its host's shadow root, beside
# its style sheets).
_STATUS_LINES = """hosts => hosts.map(host => Array.from((host.shadowRoot || host).children)
  .filter(node => node.tagName !== 'STYLE' && node.tagName !== 'LINK')
  .map(node => node.innerText || '').join(' ').trim()).filter(Boolean)"""


# What each code editor in the page holds (a draft the server never received shows here).
_EDITORS = "editors => editors.map(node => node.env ? node.env.editor.getValue() : '')"


def failure_evidence(page, name: str, console: list[str]) -> str:
    """A failed test's browser state, printed into the test's report (CI keeps only its output):
    the address, the page's tables and status lines, its script errors and the last console lines; and a
    screenshot beside the others. Whatever cannot be read is said, never raised."""
    lines = [f"browser evidence for {name}:"]
    try:
        lines.append(f"  url: {page.url}")
        lines.append(f"  screenshot: {screenshot(page, f'failed-{name}')}")
        for table in page.evaluate(_TABLES):
            lines.append(f"  table: {table}")
        for message in page.locator(".wb-message").evaluate_all(_STATUS_LINES):
            lines.append(f"  status: {message!r}")
        for text in page.locator(".ace_editor").evaluate_all(_EDITORS):
            lines.append(f"  editor ({len(text)} characters): {text[:160]!r}")
    except Exception as exc:  # noqa: BLE001 - the page may be gone; the test's own failure stands
        lines.append(f"  (page unreadable: {type(exc).__name__}: {exc})")
    lines.extend(f"  editor frame: {frame}" for frame in getattr(page, "editor_frames", [])[-40:])
    lines.extend(f"  page error: {error}" for error in getattr(page, "errors", []))
    lines.extend(f"  console {line}" for line in console[-40:])
    return "\n".join(lines)


def editor_frames(page) -> list[str]:
    """The code editor's text changes (Panel's `code` and `code_input`) as they crossed the page's websocket, each way, in order:
    a replace-all edit that the server never held (issue 65, seen twice in CI) shows here whether
    the browser sent the insertion after the removal, and what the server sent back meanwhile."""
    frames: list[str] = []
    start = time.monotonic()

    def seen(way: str, payload: object) -> None:
        if not isinstance(payload, str) or '"code' not in payload:
            return
        try:
            events = json.loads(payload).get("events", [])
        except (ValueError, AttributeError):
            return
        for event in events if isinstance(events, list) else []:
            if isinstance(event, dict) and event.get("attr") in ("code", "code_input") \
                    and isinstance(event.get("new"), str):
                frames.append(f"{time.monotonic() - start:7.3f}s {way} {event['attr']} "
                              f"({len(event['new'])} characters): {event['new'][:40]!r}")

    def opened(socket) -> None:
        socket.on("framesent", lambda payload: seen("sent", payload))
        socket.on("framereceived", lambda payload: seen("received", payload))

    page.on("websocket", opened)
    return frames


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def table_cell(page, table: str, row: int, field: str):
    return page.locator(f"{table} .tabulator-row").nth(row).locator(f".tabulator-cell[tabulator-field='{field}']")


def wait_for_rows(page, table: str, attempts: int = 4, seconds: float = 15) -> None:
    """Wait until `table` shows its first row, laying the page out again between tries: a table
    drawn before its pane had its height could stay empty until the window was resized (the rule
    table now draws every row; other tables still draw what fits)."""
    for attempt in range(attempts):
        try:
            page.locator(f"{table} .tabulator-row").first.wait_for(timeout=seconds * 1000)
            return
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise
            _lay_out_again(page)


def click_until(target, shown, attempts: int = 4, seconds: float = 15) -> None:
    """Click `target()` until `shown` is visible. The page redraws its panes after the draft
    changed; on a busy host a click can land on a table being replaced, and is then lost (the
    click never reached the server), so the cell is found and clicked again."""
    for attempt in range(attempts):
        target().click()
        try:
            shown.wait_for(timeout=seconds * 1000)
            return
        except PlaywrightTimeout:
            if attempt == attempts - 1:
                raise


def edit_cell(page, table: str, row: int, field: str, text: str) -> None:
    """Type `text` into a cell's editor key by key, as an author types, and commit it with Enter
    (`fill()` sets the text at once and missed the keys the table took for its own: Tabulator's
    key bindings read `"` as Page Down and dropped every quote). One try: the cell is clicked,
    its editor waited for, typed into, checked and committed. The rule table draws every row
    (none is left out of the page), answers an edit with only the cells the browser does not show
    yet, and sends nothing for a draft with equal rows, so nothing the author did not cause draws
    it again while they type; an editor that closes is a failure, and the message says whether
    a key left it or the table was drawn again under it (its row is then a new element)."""
    cell = table_cell(page, table, row, field)
    cell.click()
    editor = cell.locator("input")
    editor.wait_for()
    # Mark the row: a row the table draws again is a new element without the mark.
    page.locator(f"{table} .tabulator-row").nth(row).evaluate("node => { node.dataset.typing = '1'; }")
    editor.press("Control+A")
    editor.press_sequentially(text)
    if editor.count() == 0:
        drawn = page.locator(f"{table} .tabulator-row[data-typing='1']").count() == 0
        raise AssertionError(f"the cell's editor closed while {text!r} was typed: "
                             + ("the table was drawn again under it" if drawn else "a key left it"))
    typed = editor.input_value()
    assert typed == text, f"the cell's editor holds {typed!r}, typed {text!r}"
    editor.press("Enter")


def _lay_out_again(page) -> None:
    """A resize of the window, and back: Tabulator draws its rows again for the pane's height."""
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": size["height"] + 40})
    page.set_viewport_size(size)
