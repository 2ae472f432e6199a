"""The view-models, driven without a browser over a real ledger and its exported dataset.

Every figure they show is asserted equal to what the shared functions (the API's report
functions, the dry-run library, the exact analysis, the ledger verification) return."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import panel as pn

from gate.principals import Principal
from gate.releases.policy import DRY_RUN_AGE_RANGE
from workbench.app.access import Identity, Rights
from workbench.app.pages.releases import releases_page
from workbench.app.state.authoring import AuthoringState
from workbench.app.state.decisions import DecisionsState
from workbench.app.state.migration import MigrationState
from workbench.app.state.overview import OverviewState
from workbench.app.state.releases import ReleasesState
from workbench.dataset.load import from_dataset
from workbench.reports.policy import (
    ReportParams,
    confidence_report,
    effectiveness_report,
)

RULEBOOK = json.loads(Path("gate/data/rulebooks/pricing-exception.json").read_text())
MAX_AGE = DRY_RUN_AGE_RANGE[1]
OPERATOR = Rights.operator("tester")


def person(name: str, *roles: str) -> Rights:
    """A password-file person holding `roles` in every scope."""
    return Rights(Identity.password_user(name), lambda _scope: frozenset(roles))


def test_overview_reports_are_the_api_reports(workbench_home):
    store, _, home = workbench_home
    state = OverviewState(store, scope="acme", policy_id="pricing_exception")
    assert state.reports is not None
    expected = effectiveness_report(from_dataset(home / "dataset", trust=store.trust(), scopes=["acme"], policy_id="pricing_exception",
                                                 limit=1000), "pricing_exception", ReportParams())
    assert state.reports["effectiveness"] == expected
    assert state.reports["effectiveness"]["effectiveness_hash"] == expected["effectiveness_hash"]
    assert set(state.reports) == {"effectiveness", "confidence", "anomalies", "benchmarks"}
    assert state.reports["confidence"] == confidence_report(
        from_dataset(home / "dataset", trust=store.trust(), scopes=["acme"], policy_id="pricing_exception", limit=1000),
        "pricing_exception", ReportParams())
    series = state.series
    assert series["month"].to_list() == ["2026-01", "2026-02", "2026-03", "2026-04"]
    assert int(series["decisions"].sum()) == state.reports["effectiveness"]["sample"]["decisions_considered"]


def test_overview_without_a_policy_says_so(workbench_home):
    store, _, _ = workbench_home
    state = OverviewState(store, scope="acme")
    state.refresh()
    assert state.reports is None and "pick" in state.message


def test_decisions_page_filters_pages_and_opens_one(workbench_home):
    store, ids, _ = workbench_home
    state = DecisionsState(store, page_size=5)
    state.scope = "acme"
    assert state.total == len(ids["acme"]) and state.rows.height == 5
    assert state.pages == -(-len(ids["acme"]) // 5)
    first_page = state.rows["decision_id"].to_list()
    state.page = 2
    assert not set(first_page) & set(state.rows["decision_id"].to_list())
    state.verdict = "yes"
    assert state.page == 1 and set(state.rows["verdict"].to_list()) == {"yes"}
    decision_id = state.rows["decision_id"][0]
    state.open(decision_id)
    detail = state.detail
    assert detail["record"]["decision_id"] == decision_id
    assert detail["verification"]["verified"] is True
    assert detail["inclusion"]["decision_id"] == decision_id
    assert detail["receipts"]["outcome"]["total"] == 1


def test_another_scopes_decision_does_not_open(workbench_home):
    store, ids, _ = workbench_home
    state = DecisionsState(store)
    state.scope = "acme"
    state.open(ids["globex"][0])
    assert state.detail is None and "no decision" in state.message


def test_authoring_validates_live_and_places_errors(workbench_home):
    store, _, _ = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    state.load_current()
    assert state.check.valid and state.draft["rulebook_id"] == "pricing_exception"
    state.draft_text = state.draft_text.replace('"gt"', '"greater"', 1)
    assert not state.check.valid
    [error] = state.check.errors
    assert error["field"] == "draft.rules[0].condition.operator"
    assert '"operator"' in state.draft_text.splitlines()[error["line"]]
    state.run_facts()
    assert state.message == "fix the draft's errors first" and state.test_result is None


def test_authoring_tests_facts_decisions_and_lints(workbench_home):
    store, ids, _ = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    state.load_current()
    state.facts_text = json.dumps({"discount_percent": 30, "margin_percent": 40, "owner_approved": True})
    state.run_facts()
    assert state.test_result["verdict"] == "no" and state.test_result["matched_rule_id"] == "block_deep_discount"
    assert any(flip["field"] == "discount_percent" for flip in state.flips)
    state.facts_text = "{not json"
    state.run_facts()
    assert "not JSON" in state.message
    state.decision_id = ids["acme"][0]
    state.run_decision()
    assert state.decision_test["stored"]["verdict"] == state.decision_test["draft"]["verdict"]
    state.decision_id = ids["globex"][0]
    state.run_decision()
    assert state.decision_test is None and "no decision" in state.message
    state.run_lint()
    assert state.lint_report["kind"]


def test_migration_dry_run_export_and_promotion(workbench_home, tmp_path):
    store, _, _ = workbench_home
    authoring = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    authoring.load_current()
    draft = copy.deepcopy(authoring.draft)
    draft["version"] = "2026-12-01"
    draft["rules"][0]["condition"]["value"] = 15  # block discounts above 15 instead of 25
    authoring.draft_text = json.dumps(draft, indent=2)
    state = MigrationState(store, authoring, tmp_path, OPERATOR, scope="acme", rulebook_id="pricing_exception")
    state.run()
    result = state.result
    assert result["decisions_evaluated"] > 0 and result["decisions_changed"] > 0
    assert sum(t["count"] for t in result["transitions"]) == result["decisions_evaluated"]
    assert state.semantic["verdict"] == "different"
    state.export()
    manifest = json.loads(Path(state.exported["migration.json"]).read_text())
    assert manifest["dry_run"]["decisions_changed"] == result["decisions_changed"]
    assert Path(state.exported["report.html"]).read_text().startswith("<!")
    state.start_shadow()
    assert state.promoted["version"] == "2026-12-01" and "in shadow" in state.message
    release = store.release_status("acme", "pricing_exception")
    assert release["state"]["shadow"]["version"] == "2026-12-01"
    assert release["history"][-1]["migration_manifest_hash"] == manifest["migration_hash"]
    state.request_activation()
    assert state.proposal is not None and "is active" not in state.message  # asks first
    assert "Publish and activate pricing_exception version 2026-12-01 in scope acme?" in state.confirmation_text()
    assert f"{result['decisions_changed']:,} of {result['decisions_evaluated']:,} decisions change verdict" \
        in state.confirmation_text()
    state.confirm()
    assert "is active" in state.message
    assert store.current_rulebook("acme", "pricing_exception")["version"] == "2026-12-01"
    assert store.release_status("acme", "pricing_exception")["state"]["shadow"] is None  # it became active
    # The same version with other content is refused, and history is not edited.
    draft["rules"][0]["condition"]["value"] = 16
    authoring.draft_text = json.dumps(draft)
    state.request_activation()
    state.confirm()
    assert "RULEBOOK_VERSION_CONFLICT" in state.message
    assert store.current_rulebook("acme", "pricing_exception")["rules"][0]["condition"]["value"] == 15


def test_releases_state_moves_a_release_and_needs_a_second_identity_to_approve(workbench_home):
    store, _, _ = workbench_home
    rulebook = copy.deepcopy(store.current_rulebook("globex", "pricing_exception"))
    author = ReleasesState(store, person("alice", "author", "releaser"), scope="globex",
                           rulebook_id="pricing_exception")
    for name in ("2027-01-01", "2027-02-01"):
        rulebook["version"] = name
        store.promote("globex", rulebook, frozenset({"publish"}))
    assert author.versions()[:2] == ["2027-02-01", "2027-01-01"]  # the picker: newest first
    author.propose("activate", version="2027-01-01", reason="first")
    assert author.status["state"]["active"] is None or author.status["state"]["active"]["version"] != "2027-01-01"
    assert "Activate pricing_exception version 2027-01-01 in scope globex?" in author.confirmation_text()
    assert "Arm shares: active 2027-01-01: 100% of decides" in author.confirmation_text()
    author.confirm()
    assert author.status["state"]["active"]["version"] == "2027-01-01"
    author.act("canary", version="2027-02-01", percent=5)
    assert author.status["state"]["canary"]["percent"] == 5 and author.status["comparison"]["canary"]
    author.act("halt", reason="<b>not yet</b>")
    assert author.status["state"]["canary"] is None
    assert author.status["history"][-1]["reason"] == "<b>not yet</b>"  # stored as data
    author.act("rollback")
    assert "refused (RELEASE_NOTHING_TO_ROLL_BACK)" in author.message
    admin = (Principal.operator("test-admin"), frozenset({"admin", "approve"}))
    store.releases.set_policy("globex", *admin, {"require_approval": True}, partial=True)
    author.propose("activate", version="2027-02-01")
    assert "another person must approve" in author.confirmation_text()
    author.confirm()
    pending = author.status["state"]["pending"][0]
    author.approve(pending["request_seq"])
    assert "RELEASE_PERMISSION_DENIED" in author.message  # an author-releaser is no approver
    viewer = ReleasesState(store, person("carol", "viewer"), scope="globex", rulebook_id="pricing_exception")
    viewer.act("rollback")
    assert "RELEASE_PERMISSION_DENIED" in viewer.message and not viewer.may("rollback")
    approver = ReleasesState(store, person("bob", "approver"), scope="globex", rulebook_id="pricing_exception")
    # Issue 56: Approve request N asks first, as Activate does (one confirmation): its click on the
    # page proposes the approval; nothing is sent until Confirm, and Cancel sends nothing.
    page = releases_page(approver)
    seq = pending["request_seq"]
    approve_button = next(b for b in page.select(pn.widgets.Button) if b.name == f"Approve request {seq}")
    approve_button.clicks += 1
    assert approver.proposal == {"action": "approve", "request_seq": seq, "version": "2027-02-01",
                                 "rulebook_hash": pending["rulebook_hash"]}
    assert approver.status["state"]["active"]["version"] == "2027-01-01"  # not yet
    question = approver.confirmation_text().split("\n")
    assert question[0] == (f"Approve request {seq} by {pending['requested_by']}: activate pricing_exception "
                           "version 2027-02-01 in scope globex?")
    assert question[1] == "Arm shares: active 2027-02-01: 100% of decides (was 2027-01-01)"
    assert question[3] == "This changes what production callers get as soon as it is confirmed."
    approver.cancel()
    assert approver.proposal is None and approver.status["state"]["pending"][0]["request_seq"] == seq
    approver.approve(seq + 100)
    assert approver.proposal is None and approver.message == f"no pending request {seq + 100}"
    approve_button.clicks += 1
    approver.confirm()
    assert approver.status["state"]["active"]["version"] == "2027-02-01"
    assert [e["actor"] for e in approver.status["history"][-2:]] == ["person:password-file#alice",
                                                                     "person:password-file#bob"]
    # Turning approvals off again weakens the policy: a request a second principal approves.
    _event, requested = store.releases.set_policy("globex", *admin, {"require_approval": False}, partial=True)
    store.releases.approve_policy("globex", Principal.operator("test-approver"), frozenset({"approve"}),
                                  requested.pending[-1].seq)
    assert store.releases.policy("globex").require_approval is False


def test_migration_refuses_a_bad_draft(workbench_home, tmp_path):
    store, _, _ = workbench_home
    authoring = AuthoringState(store, scope="acme", draft_text="{}")
    state = MigrationState(store, authoring, tmp_path, OPERATOR, scope="acme", rulebook_id="pricing_exception")
    state.run()
    assert state.result is None and "errors" in state.message


def test_migration_compute_writes_no_parameter(workbench_home, tmp_path):
    """The page runs `compute` in a worker thread and `finish` on the event loop: `compute`
    must change no parameter (a write from another thread may never reach the browser)."""
    store, _, _ = workbench_home
    authoring = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    authoring.load_current()
    state = MigrationState(store, authoring, tmp_path, OPERATOR, scope="acme", rulebook_id="pricing_exception")
    draft = state.begin()
    assert state.running and draft is not None
    events = []
    state.param.watch(events.append, list(state.param))
    computed = state.compute(draft)
    assert events == [] and computed["run"].result["decisions_evaluated"] > 0
    state.finish(computed)
    assert not state.running and "decisions replayed" in state.message
    assert {event.name for event in events} >= {"result", "semantic", "message", "running"}
    # A refusal and a crash are applied the same way.
    refused = state.compute({**draft, "rules": "no"})
    state.finish(refused)
    assert state.result is None and state.message.startswith("dry-run refused: ")
    state.begin()
    state.finish(None)
    assert not state.running and "failed" in state.message


def test_each_page_of_decisions_is_newest_first(workbench_home):
    store, _, _ = workbench_home
    state = DecisionsState(store, page_size=25)
    state.scope = "acme"
    for page in (1, 2):
        state.page = page
        created = list(zip(state.rows["created_at"].to_list(), state.rows["decision_id"].to_list(),
                           strict=True))
        assert created == sorted(created, reverse=True)  # the outcome join must not reorder the page


def test_the_decision_shows_its_facts(workbench_home):
    store, ids, _ = workbench_home
    state = DecisionsState(store)
    state.scope = "acme"
    state.open(ids["acme"][0])
    assert state.detail["facts"] == store.decisions.stored_evaluation("acme", ids["acme"][0])["facts"]
    assert {"discount_percent", "margin_percent"} <= set(state.detail["facts"])


def _session(store, scopes, tmp_path):
    from workbench.app.pages import Session

    return Session(store, scopes, tmp_path, rights=OPERATOR)


def test_a_link_opens_scope_policy_page_decision_and_draft(workbench_home, tmp_path):
    store, ids, _ = workbench_home
    session = _session(store, ["acme", "globex"], tmp_path)
    draft = copy.deepcopy(RULEBOOK) | {"version": "2026-12-09"}
    session.links.param.update(scope="acme", policy="pricing_exception", page="decisions",
                               decision=ids["acme"][1], draft=draft)  # Panel parses `{…}` into a dict
    assert session.scope == "acme" and session.policy == "pricing_exception" and session.page == "decisions"
    assert session.decisions.policy_id == "pricing_exception" == session.overview.policy_id
    assert session.decisions.detail["record"]["decision_id"] == ids["acme"][1]
    assert json.loads(session.authoring.draft_text) == draft and session.authoring.check.valid
    # The session writes its own changes back into the link (the URL).
    session.decisions.open(ids["acme"][2])
    assert session.links.decision == ids["acme"][2]
    session.page = "authoring"
    assert session.links.page == "authoring" and json.loads(session.links.draft)["version"] == "2026-12-09"


def test_a_link_to_an_ungranted_scope_or_with_hostile_values_opens_nothing(workbench_home, tmp_path):
    store, ids, _ = workbench_home
    session = _session(store, ["acme"], tmp_path)  # globex is not granted
    session.links.param.update(scope="globex", policy="pricing_exception", page="decisions",
                               decision=ids["globex"][0])
    assert session.scope == "" and session.decisions.detail is None and session.overview.reports is None
    session.links.param.update(scope="acme", decision=ids["globex"][0], page="nowhere", policy="no_such")
    assert session.scope == "acme" and session.page == "overview" and session.policy == "pricing_exception"
    assert session.decisions.detail is None and "no decision" in session.decisions.message
    session.links.param.update(scope=["acme"], decision={"x": 1}, draft=12)  # wrong types: ignored
    assert session.scope == "" and session.decisions.detail is None and session.authoring.draft_text == ""


def test_typing_a_draft_shared_in_the_url_logs_neither_the_draft_nor_anything_per_keystroke(workbench_home,
                                                                                           tmp_path):
    """Issue 56: while an author typed, the URL's draft was JSON with a brace still open, and
    Panel's query parser logged a warning quoting the whole draft per keystroke (about 3 KB). The
    session's link is synced with an address bar as served (`share_in_url`), the draft set through
    the Authoring view-model keystroke by keystroke: the URL carries it and nothing is logged."""
    from panel.io.location import Location

    from workbench.app.pages.links import share_in_url

    class Caught(logging.Handler):
        def __init__(self) -> None:
            super().__init__(logging.DEBUG)
            self.lines: list[str] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(record.getMessage())

    store, _, _ = workbench_home
    session = _session(store, ["acme"], tmp_path)
    session.scope = "acme"
    location = Location()
    share_in_url(location, session.links)
    caught = Caught()
    watched = [logging.getLogger(), logging.getLogger("panel")]  # Panel's logger does not propagate
    for logger in watched:
        logger.addHandler(caught)
    try:
        draft = json.dumps(RULEBOOK | {"description": "secret-margin-42"}, indent=2)
        for end in range(len(draft) - 12, len(draft) + 1):  # the last keystrokes: a brace still open
            session.authoring.draft_text = draft[:end]
    finally:
        for logger in watched:
            logger.removeHandler(caught)
    assert "secret-margin-42" in location.search and "%7D" in location.search  # the link still carries it
    assert json.loads(session.links.draft)["description"] == "secret-margin-42"
    assert not [line for line in caught.lines if "secret-margin-42" in line or "Could not parse" in line]


def test_a_draft_too_long_for_a_link_is_left_out_of_it(workbench_home, tmp_path):
    from workbench.app.pages.links import DRAFT_URL_LIMIT

    store, _, _ = workbench_home
    session = _session(store, ["acme"], tmp_path)
    session.scope = "acme"
    session.authoring.draft_text = json.dumps(RULEBOOK, indent=2)
    assert json.loads(session.links.draft) == RULEBOOK and "\n" not in session.links.draft  # compact JSON
    session.authoring.draft_text = json.dumps(RULEBOOK | {"description": "x" * DRAFT_URL_LIMIT})
    assert session.links.draft == ""
    session.links.draft = "y" * (DRAFT_URL_LIMIT + 1)  # a link carrying more is not applied
    assert session.authoring.draft_text.startswith("{")


def test_a_loaded_version_reads_in_the_schema_order_and_hashes_the_same(workbench_home):
    """Issue 21, item 4: snapshots are stored canonically (keys sorted), so `version` landed on the
    second-to-last line; loading now lays the members out in the schema's order, moving no value."""
    from gate.protocol.canonical import sha256_hex

    store, _, _ = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    state.load_current()
    lines = state.draft_text.splitlines()
    assert [line.strip().split(":")[0] for line in lines[1:4]] == ['"schema_version"', '"rulebook_id"', '"version"']
    current = store.current_rulebook("acme", "pricing_exception")
    assert json.loads(state.draft_text) == current and sha256_hex(json.loads(state.draft_text)) == sha256_hex(current)
    first_rule = json.loads(state.draft_text)["rules"][0]
    assert list(first_rule)[:2] == ["rule_id", "priority"] and list(first_rule)[-2:] == ["condition", "outcome"]
    assert list(first_rule["outcome"])[:2] == ["decision", "verdict"]


def test_lint_findings_read_as_a_list_with_lines_and_fixes(workbench_home):
    """Issue 21, item 4: lint findings as a readable list (where, line, fix), not a JSON tree; a
    number compared with a string and an undeclared fact are both flagged."""
    from workbench.app.lintview import lint_items
    from workbench.app.pages.authoring import lint_view

    store, _, _ = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    state.load_current()
    draft = json.loads(state.draft_text)
    draft["rules"][0]["rule_id"] = "deep_*discount*"[:4] + "_cap"
    draft["rules"][0]["condition"] = {"field": "discount_percent", "operator": "gt", "value": "25"}
    draft["rules"][1]["condition"] = {"field": "coupon_code", "operator": "eq", "value": "X"}
    state.draft_text = json.dumps(draft, indent=2)
    state.run_lint()
    items = lint_items(state.lint_report, state.draft_text)
    by_code = {item["code"]: item for item in items}
    assert by_code["unsatisfiable"]["where"] == "rule deep_cap"
    assert "a number compared with a string" in by_code["unsatisfiable"]["fix"]
    assert by_code["undeclared_field"]["where"].endswith("fact coupon_code")
    line = state.draft_text.splitlines()[by_code["unsatisfiable"]["line"] - 1]
    assert '"rule_id": "deep_cap"' in line
    assert [i["severity"] for i in items] == sorted((i["severity"] for i in items),
                                                    key=lambda s: {"warning": 1, "info": 2}[s])
    rendered = "\n".join(_lint_texts(lint_view(state.lint_report, state.draft_text)))
    assert "Fix:" in rendered and "deep\\_cap" in rendered and f"(line {by_code['unsatisfiable']['line']})" in rendered
    assert _lint_texts(lint_view(None, ""))[0].startswith("*Lint")


def _lint_texts(view) -> list[str]:
    """The Markdown a lint view shows, in order: its head, each finding's line (a card's header)
    and, after a card's header, its regions."""
    import panel as pn

    texts = []
    for shown in view.objects:
        if isinstance(shown, pn.Card):
            texts += [shown.header.object, *(pane.object for pane in shown.objects)]
        else:
            texts.append(shown.object)
    return texts


def test_lint_groups_identical_findings_with_their_regions_most_severe_first(workbench_home):
    """Issue 45, item 10: loading the current refund_approval listed 13 findings, seven the same
    fall-through line once per region. One line per distinct finding, with its count; it opens to
    its regions, each with a fact set there (the engine's witness, which falls through); the
    engine's report is unchanged; warnings lead (a rule reading an undeclared fact here)."""
    from collections import Counter

    import panel as pn

    from gate.rulebook.analysis import lint
    from gate.rulebook.analysis.common import evaluator
    from workbench.app.lintview import lint_items
    from workbench.app.pages.authoring import lint_view

    store, _, _ = workbench_home
    state = AuthoringState(store, scope="acme", rulebook_id="refund_approval")
    book = json.loads(Path("gate/data/rulebooks/refund-approval-2026-08-01.json").read_text())
    state.draft_text = json.dumps(book, indent=2)
    state.run_lint()
    report = state.lint_report
    assert report == lint(book).to_json() and len(report["findings"]) == 13  # the engine's, every finding
    items = lint_items(report, state.draft_text)
    # Most severe first, then by line: the rulebook's own finding before the rules'.
    assert [(i["severity"], i["code"], i["count"]) for i in items] == [("info", "falls_through", 7)] + [
        ("info", "overlap", 1)] * 6
    falls = items[0]
    engine = [f for f in report["findings"] if f["code"] == "falls_through"]
    assert [(r["text"], r["witness"]) for r in falls["regions"]] == [(f["text"], f["witness"]) for f in engine]
    run = evaluator(book)
    # Each witness falls through: a valid input no rule matches.
    assert all(run(r["witness"]).status == "ok" and not run(r["witness"]).matched for r in falls["regions"])
    view = lint_view(report, state.draft_text)
    texts = _lint_texts(view)
    assert texts[0].startswith("**13 finding(s), 7 distinct** (exact analysis)")
    assert sum("falls\\_through" in text for text in texts) == 1
    cards = [shown for shown in view.objects if isinstance(shown, pn.Card)]
    assert len(cards) == 7 and all(card.collapsed for card in cards)  # each finding opens to its regions
    assert "falls\\_through" in cards[0].header.object and "**7 regions**" in cards[0].header.object
    assert cards[0].objects[0].object.count("*e.g.*") == 7
    # A warning leads the list; every finding is counted once.
    book["rules"][-1]["condition"] = {"field": "refund_reason", "operator": "eq", "value": "damaged"}
    state.draft_text = json.dumps(book, indent=2)
    state.run_lint()
    items = lint_items(state.lint_report, state.draft_text)
    said = Counter((f["code"], f["message"]) for f in state.lint_report["findings"])
    assert items[0]["severity"] == "warning" and items[0]["code"] == "undeclared_field"
    assert {(i["code"], i["message"]): i["count"] for i in items} == dict(said)
    assert [i["severity"] for i in items] == sorted((i["severity"] for i in items), key=["warning", "info"].index)


def test_a_guarded_activation_from_the_migration_page_carries_the_exported_manifest(workbench_home, tmp_path):
    """Where the scope requires a dry-run (issue 42, guarded activation), Request activation passes
    the exported, signed manifest itself; without an export it is refused and nothing moves."""
    store, _, _ = workbench_home
    admin = (Principal.operator("test-admin"), frozenset({"admin", "approve"}))
    store.releases.set_policy("acme", *admin, {"require_dry_run": True}, partial=True)
    authoring = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    authoring.load_current()
    draft = copy.deepcopy(authoring.draft)
    draft["version"] = "2026-12-02"
    draft["rules"][0]["condition"]["value"] = 14
    authoring.draft_text = json.dumps(draft, indent=2)
    state = MigrationState(store, authoring, tmp_path, OPERATOR, scope="acme", rulebook_id="pricing_exception")
    state.run()
    state.request_activation()
    state.confirm()
    assert "RELEASE_DRY_RUN_REQUIRED" in state.message  # no export yet: refused

    def active() -> str | None:
        release = store.release_status("acme", "pricing_exception")["state"]["active"]
        return release["version"] if release else None

    assert active() != "2026-12-02"
    state.export()
    manifest = json.loads(Path(state.exported["migration.json"]).read_text())
    state.request_activation()
    state.confirm()  # the fixture's history ends months ago: older than the default bound of 7 days
    assert "RELEASE_DRY_RUN_REJECTED" in state.message and "dry_run_max_age_seconds" in state.message
    store.releases.set_policy("acme", *admin, {"dry_run_max_age_seconds": MAX_AGE}, partial=True)
    state.request_activation()
    state.confirm()
    assert "is active" in state.message, state.message
    assert active() == "2026-12-02"
    assert store.release_status("acme", "pricing_exception")["history"][-1]["migration_manifest_hash"] == \
        manifest["migration_hash"]
