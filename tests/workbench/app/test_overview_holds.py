"""The Overview shows the hold queues' health beside the policy's (issue 43, item 6): from the same
hold report as `gate report holds --dataset` and the API (the registry's kind `holds`), over the
workbench's signed dataset: open holds, the oldest one's age, p50 time to resolution, expiry rate."""

from __future__ import annotations

import pytest

from gate.principals import Principal
from gate.reports.params import ReportParams
from gate.reports.registry import REPORTS, Cohort
from tests.workbench.hold_support import RESOLVE, HoldWriter
from tests.workbench.ledger_support import at
from workbench.app.pages.overview import queue_health_markdown
from workbench.app.state.overview import ALL_QUEUES, OverviewState, queue_health
from workbench.dataset.load import holds_from_dataset
from workbench.reports import numbers
from workbench.reports.policy import build_report
from workbench.reports.textsafe import md_text

POLICY = "pricing_exception"
ADMIN = Principal.operator("admin")


@pytest.fixture(scope="module")
def overview(tmp_path_factory):
    """acme: a hold policy with queues default and leads; six held decisions: in default one
    approved after 1 h, one denied after 3 h, one expired, one open; in leads (reassigned) one
    approved after 2 h and one open. The store's dataset exported (signed) from that ledger."""
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from workbench.app.store import WorkbenchStore

    home = tmp_path_factory.mktemp("overview-holds")
    writer = HoldWriter(f"sqlite:///{home / 'gate.db'}", home / "signing-keys.json")
    queue = {"deadline_seconds": 86_400, "quorum": "any", "members": [], "require_justification": False,
             "escalate_after_seconds": None, "escalate_to": None}
    writer.holds.set_policy("acme", ADMIN, frozenset({"admin"}), {
        "default_queue": "default", "four_eyes": True, "queues": {"default": queue, "leads": queue}, "routes": []})
    held = [writer.held("acme", at(1, 1 + i)) for i in range(6)]
    for index in (4, 5):
        writer.clock.set(at(1, 1 + index, 12, 1))
        writer.holds.reassign("acme", Principal.api_key("key_reviewer"), RESOLVE, held[index]["decision_id"],
                              {"queue": "leads"})
    writer.approve("acme", held[0], at(1, 1, 13))
    writer.deny("acme", held[1], at(1, 2, 15))
    writer.approve("acme", held[4], at(1, 5, 14))
    assert writer.sweep(at(1, 4, 13)) == 1  # held[2] (opened 01-03) expires; held[3] and held[5] stay open
    writer.close()
    store = WorkbenchStore(Ledger(f"sqlite:///{home / 'gate.db'}"),
                           SigningSetup.load(home / "signing-keys.json", None, "hmac"), home / "dataset")
    store.refresh_dataset()
    yield store, home
    store.ledger.dispose()


def test_the_overview_holds_the_registrys_hold_report(overview):
    store, home = overview
    state = OverviewState(store, scope="acme", policy_id=POLICY)
    frames = holds_from_dataset(home / "dataset", scopes=["acme"], policy_id=POLICY, trust=store.trust())
    assert state.holds == build_report(REPORTS["holds"], frames, POLICY, ReportParams(), Cohort())
    assert state.holds["source"]["trust"] == "signed"


def test_each_queues_health_beside_the_policys(overview):
    store, _ = overview
    holds = OverviewState(store, scope="acme", policy_id=POLICY).holds
    rows = queue_health(holds)
    assert [(name, cells["open"]) for name, cells in rows] == [(ALL_QUEUES, "2"), ("default", "1"), ("leads", "1")]
    everything, default, leads = (cells for _, cells in rows)
    # Waits: default 1 h (approved) and 3 h (denied); leads 2 h. All queues: 1, 2 and 3 h.
    assert (everything["p50"], default["p50"], leads["p50"]) == ("2.0 h (n=3)", "2.0 h (n=2)", "2.0 h (n=1)")
    assert everything["expiry"] == "25.0% (95% 4.6–69.9%, n=4)"
    assert default["expiry"] == "33.3% (95% 6.2–79.2%, n=3)" and leads["expiry"] == "0.0% (95% 0.0–79.3%, n=1)"
    # The oldest open hold is held[3] (opened 01-04 12:00 in default), its age counted from the dataset's cut.
    assert holds["holds"]["backlog"]["oldest_opened_at"] == "2026-01-04T12:00:00.000Z"
    assert everything["oldest"] == numbers.duration(holds["holds"]["backlog"]["oldest_age_seconds"])
    assert everything["oldest"] == default["oldest"] != leads["oldest"]
    markdown = queue_health_markdown(holds)
    assert markdown.splitlines()[0] == f"**Hold queues** · {md_text(holds['window']['text'])}"
    assert (f"| default | 1 | {default['oldest']} | 2.0 h (n=2) | 33.3% (95% 6.2–79.2%, n=3) |"
            in markdown.splitlines())


def test_a_policy_without_holds_says_so(overview):
    store, _ = overview
    state = OverviewState(store, scope="acme", policy_id="another_policy")
    assert queue_health(state.holds) == []
    assert queue_health_markdown(state.holds) == "**Holds:** none for this policy in the dataset."
