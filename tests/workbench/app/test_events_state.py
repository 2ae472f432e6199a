"""The Events page's view-model over a real ledger: a subscription's deliveries as the API gives
them, replay and enable/disable through the same service, and only for a scope's admins."""

from __future__ import annotations

from workbench.app.access import Identity, Rights
from workbench.app.state.events import EventsState
from workbench.reports.deliveries import delivery_lines
from workbench.reports.textsafe import md_text


def person(name: str, *roles: str) -> Rights:
    return Rights(Identity.password_user(name), lambda _scope: frozenset(roles))


def test_admins_see_deliveries_replay_and_disable_and_others_are_refused(workbench_home):
    from gate.services.governance import SafeguardSettings
    from gate.services.root import compose_events

    store, _, _ = workbench_home
    store.events.delivery.allow_hosts = frozenset({"127.0.0.1"})  # as GATE_WEBHOOK_ALLOW_HOSTS=127.0.0.1
    maker = compose_events(store.ledger, allow_hosts={"127.0.0.1"}, safeguards=SafeguardSettings(store.ledger))
    view, _secret = maker.subscribe("acme", "key_test", {"url": "http://127.0.0.1:9/hook", "from": "beginning"})
    sid = view["subscription_id"]
    maker.outbox.record_attempt({"subscription_id": sid, "scope": "acme", "seq": 1, "event_id": "evt_x",
                                 "attempted_at": "2026-11-26T00:00:00.000Z", "ok": 0, "status_code": 500,
                                 "latency_ms": 9, "excerpt": "<b>down</b>", "replay": 0})
    admin = EventsState(store, person("ada", "admin"), scope="acme")
    admin.refresh()
    assert [r["subscription"]["subscription_id"] for r in admin.subscriptions] == [sid]
    report = admin.subscriptions[0]
    assert report == store.events.deliveries("acme", sid)  # the API's figures, unchanged
    shown = "\n".join(delivery_lines(report, md_text))
    assert "0.0% of 1 attempts succeeded" in shown and "status 500" in shown and "<b>" not in shown
    admin.subscribe("http://10.1.2.3/hook", ["release.halted"])  # inside, and not allowed by name
    assert "subscription refused (EVENT_TARGET_REFUSED)" in admin.message and admin.secret == ""
    admin.subscribe("http://127.0.0.1:8/hook", ["release.halted"])
    assert admin.secret.startswith("whsec_") and "not shown again" in admin.message
    made = [r["subscription"] for r in admin.subscriptions if r["subscription"]["subscription_id"] != sid]
    assert made[0]["event_types"] == ["release.halted"] and made[0]["created_by"] == "person:password-file#ada"
    admin.set_status(sid, "disabled")
    assert admin.subscriptions[0]["subscription"]["status"] == "disabled"
    admin.replay(sid, 999)
    assert "replay refused (EVENT_NOT_FOUND)" in admin.message
    viewer = EventsState(store, person("carol", "viewer", "releaser"), scope="acme")
    viewer.refresh()
    assert viewer.subscriptions == [] and "WORKBENCH_PERMISSION_DENIED" in viewer.message
    viewer.set_status(sid, "active")
    assert "WORKBENCH_PERMISSION_DENIED" in viewer.message
    viewer.subscribe("http://127.0.0.1:8/other", [])
    assert "WORKBENCH_PERMISSION_DENIED" in viewer.message and viewer.secret == ""
    assert len(store.events.listed("acme")) == 2
    assert store.events.show("acme", sid)["status"] == "disabled"  # nothing changed
    other = EventsState(store, person("ada", "admin"), scope="globex")
    other.refresh()
    assert other.subscriptions == []  # another scope's subscription is not listed
