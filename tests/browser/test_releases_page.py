"""Issue 20 in a real browser: the Releases page over a live ledger. v1 active and decided by
reference; a fix shadowed on live traffic (agreement and flips on the page); a 10% canary whose
failing outcomes trip the guardrail, which halts it on its own; activate and roll back from the
page; the whole release history verifies offline. A screenshot per step."""

from __future__ import annotations

import subprocess

import pytest

from gate.releases.events import verify_history
from gate.verify import TrustAnchors, verify_record
from tests.browser.conftest import Workbench, screenshot
from tests.demo_support import GATE, gate_env
from tests.releases.support import ALL, Api, by_reference, version

pytestmark = pytest.mark.slow


@pytest.fixture
def gate_home(tmp_path, monkeypatch):
    """A home with a keyring and an API app over its embedded ledger (in this process)."""
    from gate.settings import Settings
    from gate_cli.keys_cmd import create_key
    from gate_cli.served_app import create_app

    home = tmp_path / "home"
    home.mkdir()
    env = gate_env(home)
    subprocess.run([GATE, "keys", "signing-init"], env=env, check=True, capture_output=True, timeout=120)
    settings = Settings.from_env(env)
    app = create_app(settings)
    app.extensions["gate"].releases.reader.cache_seconds = 0
    key = create_key(settings, "shop", "growth", 10_000, None, None, ALL, "service:shop-releaser")["api_key"]
    yield home, env, Api(app.test_client(), key)
    app.extensions["gate"].ledger.dispose()


def tab(page, name: str) -> None:
    page.locator(".bk-tab", has_text=name).click()


def act(page, button: str, version_name: str | None = None, percent: str | None = None) -> None:
    """Pick the version (a picker of published versions), press the move; Activate and Start canary
    ask first, naming the version and the arm shares: confirm them."""
    if version_name is not None:
        page.get_by_label("Version").select_option(version_name)
    if percent is not None:
        page.get_by_label("Canary %").fill(percent)
    page.get_by_label("Reason").fill(f"{button} from the browser test")
    page.get_by_role("button", name=button).click()
    if button in ("Activate", "Start canary"):
        confirmation = page.locator(".release-confirmation")
        confirmation.get_by_text(f"version {version_name} in scope").wait_for()
        confirmation.get_by_text("Arm shares:").wait_for()
        page.get_by_role("button", name="Confirm").click()


def refresh(page) -> None:
    page.get_by_role("button", name="Refresh", exact=True).click()


def test_releases_page_shadow_canary_guardrail_halt_activate_rollback(page, gate_home):
    home, env, api = gate_home
    api.publish(version("v1"))
    api.act("activate", version="v1", reason="first release")
    records = [api.decide(by_reference(subject=f"warm-{i}")).json for i in range(5)]
    api.publish(version("v2", approve_limit=10))
    subprocess.run([GATE, "export", "--out", str(home / "dataset")], env=env, check=True, capture_output=True,
                   timeout=300)
    server = Workbench(home)
    try:
        page.goto(server.url)
        page.locator("select").first.select_option("shop")
        tab(page, "Releases")
        page.get_by_text("active: v1").wait_for()
        screenshot(page, "releases-1-active")

        # Shadow the fix from the page; live traffic arrives; the comparison shows it.
        act(page, "Start shadow", "v2")
        page.get_by_text("shadow recorded as release event 2").wait_for()
        records += [api.decide(by_reference(subject=f"live-{i}")).json for i in range(12)]
        refresh(page)
        page.get_by_text("Shadow v2 on 12 live decisions").wait_for()
        page.get_by_text("agreement 0.0%").first.wait_for()
        screenshot(page, "releases-2-shadow")

        # A 10% canary of a new action; failing outcomes in the canary arm only.
        act(page, "Halt")
        page.get_by_text("halt recorded as release event 3").wait_for()
        api.publish(version("v3", action="apply_discount_v3"))
        refresh(page)  # the version picker offers what is published as of the last read
        act(page, "Start canary", "v3", "10")
        page.get_by_text("canary recorded as release event 4").wait_for()
        refresh(page)
        page.get_by_text("too young to judge").wait_for()
        page.get_by_text("by subject context.source_record_id").wait_for()  # as text, no escapes (issue 45)
        arms: dict[str, list[dict]] = {"active": [], "canary": []}
        index = 0
        while len(arms["canary"]) < 40:
            record = api.decide(by_reference(subject=f"order-{index}")).json
            arms[record["release_arm"]["arm"]].append(record)
            records.append(record)
            index += 1
        for record in arms["active"][:40]:
            api.outcome(record, "succeeded")
        for record in arms["canary"]:
            api.outcome(record, "failed")
        refresh(page)
        history = page.locator(".tabulator-cell[tabulator-field='by']")
        history.filter(has_text="guardrail").first.wait_for()
        page.get_by_text("canary:").wait_for(state="detached")
        page.get_by_text("failure_rate tripped").wait_for()
        # Issue 45, item 8: the halted canary keeps its arms and the evidence that halted it.
        page.get_by_text("Canary v3 halted by its guardrails").wait_for()
        arms = page.locator(".canary-arms .tabulator-cell[tabulator-field='arm']")
        assert sorted(arms.all_inner_texts()) == ["active", "canary"]
        decisions = page.locator(".canary-arms .tabulator-cell[tabulator-field='decisions']").all_inner_texts()
        assert int(decisions[1]) >= 40
        screenshot(page, "releases-3-guardrail-halted")

        # Activate the fix, then roll back in one click.
        act(page, "Activate", "v2")
        page.get_by_text("active: v2").wait_for()
        act(page, "Roll back")
        page.get_by_text("active: v1").wait_for()
        screenshot(page, "releases-4-rolled-back")
        assert page.errors == []
    finally:
        server.stop()

    # Offline: the release history and every record verify with the published keys.
    keys = api.client.get("/api/decision/receipt-keys").get_data()
    anchors = TrustAnchors.from_registry_body(keys, "key_registry_file")
    events = api.history().json["events"]
    assert verify_history(events, anchors).valid
    assert [e["actor"] for e in events if e["action"] == "halt"][-1] == "guardrail"
    # Without sign-in on loopback the workbench acts as the local operator (issue 42).
    assert all(e["actor"].startswith("operator:") for e in events if e["seq"] > 1 and e["actor"] != "guardrail")
    assert all(verify_record(r, anchors=anchors).verified for r in records)


def test_the_page_cannot_make_a_version_its_guardrail_halted_serve_again(page, gate_home):
    """Issue 52, defect 1, in the browser: v1 then v2 active, a canary of v1 halted by its
    guardrail; Roll back (to v1) and Activate v1 are refused on the page, and nothing moves."""
    home, env, api = gate_home
    api.publish(version("v1"))
    api.publish(version("v2", approve_limit=10))
    api.act("activate", version="v1")
    api.act("activate", version="v2")
    api.act("canary", version="v1", percent=50)
    arms: dict[str, list[dict]] = {"active": [], "canary": []}
    index = 0
    while min(len(arms["active"]), len(arms["canary"])) < 30:
        record = api.decide(by_reference(subject=f"order-{index}")).json
        arms[record["release_arm"]["arm"]].append(record)
        index += 1
    for record in arms["canary"][:30]:
        api.outcome(record, "failed")
    for record in arms["active"][:30]:
        api.outcome(record, "succeeded")
    halted = api.status().json
    assert (halted["history"][-1]["actor"], halted["state"]["active"]["version"]) == ("guardrail", "v2")
    subprocess.run([GATE, "export", "--out", str(home / "dataset")], env=env, check=True, capture_output=True,
                   timeout=300)
    server = Workbench(home)
    try:
        page.goto(server.url)
        page.locator("select").first.select_option("shop")
        tab(page, "Releases")
        page.get_by_text("active: v2").wait_for()
        page.get_by_text("Canary v1 halted by its guardrails").wait_for()
        act(page, "Roll back")
        page.get_by_text("rollback refused (RELEASE_VERSION_HALTED): rollback makes version 'v1' serve").wait_for()
        act(page, "Activate", "v1")
        page.get_by_text("activate refused (RELEASE_VERSION_HALTED): activate makes version 'v1' serve").wait_for()
        page.get_by_text("active: v2").wait_for()
        screenshot(page, "releases-5-halted-version-refused")
        assert page.errors == []
    finally:
        server.stop()
    assert api.history().json["events"] == halted["history"]  # nothing was recorded
