"""The Overview's anomaly count agrees with its list (issue 45, item 7): when the report lists fewer
findings than it counts (`max_items`, 5 by default), the page says "N of M" and shows the rest on
request, strongest first."""

from __future__ import annotations

import pytest

from gate.keys.config import SigningSetup
from gate.ledger import Ledger
from tests.demo_support import build_demo_home
from workbench.app.pages.overview import _anomalies
from workbench.app.state.overview import OverviewState
from workbench.app.store import WorkbenchStore
from workbench.reports.policy import ReportParams, anomaly_report


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory):
    home = build_demo_home(tmp_path_factory.mktemp("overview") / "home")["home"]
    store = WorkbenchStore(Ledger(f"sqlite:///{home / 'gate.db'}"),
                           SigningSetup.load(home / "signing-keys.json", None, "hmac"), home / "dataset")
    yield store
    store.ledger.dispose()


def _text(state: OverviewState) -> str:
    return _anomalies(state.reports, state.every_anomaly, state.scope, state.policy_id).object


def test_the_list_says_how_many_of_the_count_it_shows_and_shows_the_rest_on_request(demo_store):
    state = OverviewState(demo_store, scope="demo", policy_id="refund_approval")
    every = state.reports["anomalies"]["anomaly_count"]
    assert every >= 3, "the demo's refund_approval has several anomalies"
    assert f"### {every} anomalies (the strongest first)" in _text(state)  # all listed: no "of"
    # The same report listing two (as the report lists five of the seven).
    frames = demo_store._frames(("demo",), "refund_approval", state.limit, demo_store._manifest_key())
    two = anomaly_report(frames, "refund_approval", ReportParams(limit=state.limit, max_items=2))
    assert two["anomaly_count"] == every and len(two["anomalies"]) == 2
    state.reports = {**state.reports, "anomalies": two}
    text = _text(state)
    assert f"### 2 of {every} anomalies (the strongest first)" in text and text.count("\n- **") == 2
    state.show_every_anomaly()
    text = _text(state)
    assert f"### {every} anomalies (the strongest first)" in text and text.count("\n- **") == every
    assert [a["anomaly_id"] for a in state.every_anomaly[:2]] == [a["anomaly_id"] for a in two["anomalies"]]
    scores = [a["anomaly_score"] for a in state.every_anomaly]
    assert scores == sorted(scores, reverse=True)
    state.limit = 999  # another question: the list is the report's listed findings again
    assert state.every_anomaly is None
