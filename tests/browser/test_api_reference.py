"""`/docs` in headless chromium: Swagger UI renders the gate's OpenAPI document from local files
only (every request the page makes goes to the gate itself), with no script error."""

from __future__ import annotations

import subprocess

import pytest

from tests.browser.conftest import GATE, screenshot, wait_for
from tests.server.support import free_port

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def gate_server(tmp_path_factory):
    import os

    home = tmp_path_factory.mktemp("docs-home")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATE_")} | {"GATE_HOME": str(home)}
    port = free_port()
    log = home / "serve.log"
    with open(log, "w") as out:  # the server writes to its own copy of the file
        process = subprocess.Popen([GATE, "serve", "--port", str(port)], env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    wait_for(f"http://127.0.0.1:{port}/healthz", process, log)
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(timeout=20)


def test_the_reference_renders_from_local_assets(page, gate_server):
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    console_errors: list[str] = []
    page.on("console", lambda message: console_errors.append(message.text) if message.type == "error" else None)
    page.goto(gate_server + "/docs")
    page.wait_for_selector(".opblock-summary-path")
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert any(text.replace("\u200b", "") == "/api/decide" for text in paths), paths[:5]
    assert page.locator(".opblock").count() >= 30  # every operation of the OpenAPI document
    assert page.locator("text=Decision Gate").first.is_visible()
    screenshot(page, "api-reference")
    assert requested and all(url.startswith(gate_server + "/") for url in requested), requested
    assert not page.errors and not console_errors, (page.errors, console_errors)
