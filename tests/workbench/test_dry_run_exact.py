"""The dry-run on a hand-checked history: the scalar path for partial rows and the review
forecast, to the exact figure (issue 22, item 5: a mutation pass found both unpinned).

Eleven decisions of `refunds`, three days apart from 2026-01-05 (nine in January, two in
February). Three carry an integer beyond 2^53, which the typed facts columns cannot hold
exactly: those partial rows go to the scalar evaluator. Two of them flip (no -> yes under the
draft's new `huge` rule, amount > 10^15), one does not. One decision has no facts (unreplayable).

    #  amount        old (rule)        draft (rule)      month
    0  10            yes small         yes small         01
    1  25            review default    yes small         01   outcome: succeeded, then failed (latest)
    2  60            review default    no big            01   outcome: succeeded
    3  120           no big            no big            01
    4  2^60 partial  no big            yes huge          01   outcome: succeeded (a stored no: unobservable)
    5  40            review default    review default    01
    6  70, no facts  review default    (unreplayable)    01
    7  2^61 partial  no big            yes huge          01
    8  28            review default    yes small         01   no outcome
    9  55            review default    no big            02   outcome: failed
   10  5, ref 2^60   yes small         yes small         02   (partial, no flip)
"""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from dryrun_support import decide, rule, rulebook, write_dataset

from gate.keys.anchors import TrustAnchors
from gate.keys.signing import HmacKey, HmacReceiptSigner
from gate.protocol.canonical import sha256_hex
from gate.rulebook import get_evaluator
from workbench.engines import rulebook_polars as rp
from workbench.migration import DryRunError, dry_run
from workbench.migration.compute import _flip_aggregates, _newest, _replay_passes, compute, replay
from workbench.migration.draft import load_draft, read_draft_file
from workbench.migration.flips import latest_outcomes
from workbench.migration.history import read_manifest
from workbench.migration.manifest import sign_manifest
from workbench.migration.run import load_history, write_dry_run

NOW = "2026-11-22T00:00:00.000Z"
OLD = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 100}, "no", "TOO_BIG"),
                rule("small", {"field": "amount", "operator": "lte", "value": 20}, "yes", "SMALL")])
DRAFT = rulebook([rule("huge", {"field": "amount", "operator": "gt", "value": 10**15}, "yes", "HUGE", priority=10),
                  rule("big", {"field": "amount", "operator": "gt", "value": 50}, "no", "TOO_BIG"),
                  rule("small", {"field": "amount", "operator": "lte", "value": 30}, "yes", "SMALL"),
                  rule("ghost", {"field": "ref", "operator": "eq", "value": "x"}, "no", "GHOST", priority=-1)],
                 version="2.0.0")
FACTS = [{"amount": 10}, {"amount": 25}, {"amount": 60}, {"amount": 120}, {"amount": 2**60}, {"amount": 40},
         {"amount": 70}, {"amount": 2**61}, {"amount": 28}, {"amount": 55}, {"amount": 5, "ref": 2**60}]
OLD_VERDICTS = ["yes", "review", "review", "no", "no", "review", "review", "no", "review", "review", "yes"]
NEW = ["new_status", "new_verdict", "new_application_verdict", "new_action", "new_reason", "new_rule"]
OUTCOMES = [(1, "succeeded", 1), (1, "failed", 2), (2, "succeeded", 1), (4, "succeeded", 1), (9, "failed", 1)]


# Function-scoped on purpose: mutmut maps a function to the tests that call it, and a shared
# fixture's work would be charged to the first test only (docs/mutation-testing.md).
@pytest.fixture
def root(tmp_path_factory):
    decisions = decide(OLD, FACTS, no_facts=(6,))
    outcomes = [{"decision_id": f"d{index:05d}", "status": status, "receipt_id": f"o{index}{day}",
                 "reported_at": decisions[index]["created_at"] + timedelta(days=day)}
                for index, status, day in OUTCOMES]
    return write_dataset(tmp_path_factory.mktemp("exact") / "ds", decisions, outcomes)


@pytest.fixture
def result(root):
    return dry_run(DRAFT, "refunds", dataset=root, created_at=NOW, flips_limit=4).result


def test_row_replay_patches_the_partial_rows_with_the_scalar_evaluator(root):
    """`compute.replay` (each decision's old and new columns; the benchmark's per-row check):
    the vector pass leaves the partial rows null, the scalar evaluator's results replace them."""
    draft = load_draft(DRAFT, "refunds")
    history = load_history("refunds", None, dataset=root, ledger=None, paths=draft.polars.paths)
    evaluated, scalar_count = replay(history, draft)
    rows = {row["decision_id"]: row for row in evaluated.collect().iter_rows(named=True)}
    assert scalar_count == 3 and len(rows) == 11
    evaluate = get_evaluator(DRAFT, sha256_hex(DRAFT)).evaluate
    for index, facts in enumerate(FACTS):
        row = rows[f"d{index:05d}"]
        kind = "unreplayable" if index == 6 else "scalar" if index in (4, 7, 10) else "vector"
        assert row["replay"] == kind, index
        assert row["old_verdict"] == OLD_VERDICTS[index] and row["month"] == ("2026-02" if index > 8 else "2026-01")
        if index == 6:
            assert [row[name] for name in NEW] == [None] * len(NEW)
            continue
        e = evaluate(facts)
        assert [row[name] for name in NEW] == [e.status, e.decision, e.application_verdict, e.action,
                                               e.reason_code, e.matched_rule_id], index


def test_partial_rows_are_replayed_by_the_scalar_evaluator(result):
    assert result["decisions_scalar"] == 3
    assert (result["decisions_total"], result["decisions_evaluated"], result["decisions_unreplayable"]) == (11, 10, 1)
    assert result["unreplayable"] == {"count": 1, "by_verdict": {"yes": 0, "no": 0, "review": 1}}
    transitions = {(t["from"], t["to"]): t["count"] for t in result["transitions"] if t["count"]}
    assert transitions == {("yes", "yes"): 2, ("no", "no"): 1, ("no", "yes"): 2, ("review", "yes"): 2,
                           ("review", "no"): 2, ("review", "review"): 1}
    # The two partial flips answer exactly what the scalar evaluator does: rule huge, reason HUGE.
    assert {"from": "no", "to": "yes", "old_rule": "big", "new_rule": "huge", "count": 2} in result["rule_transitions"]
    rules = {r["rule_id"]: (r["fired_in_history"], r["fires_under_draft"]) for r in result["rules"]}
    assert rules == {"huge": (0, 2), "big": (3, 3), "small": (2, 4), "ghost": (0, 0)}
    assert result["rules_never_fired_in_history"] == ["huge", "ghost"]
    assert result["rules_never_firing_under_draft"] == ["ghost"]
    assert (result["decisions_changed"], result["decisions_rule_changed"], result["decisions_reason_changed"]) == (6, 6, 6)
    assert result["needs_input"] == 0


def test_flips_and_their_outcome_classes(result):
    assert result["flips"]["count"] == 6 and result["flips"]["listed_limit"] == 4
    listed = [(f["decision_id"], f["old_verdict"], f["new_verdict"], f["new_rule"], f["new_reason"],
               f["outcome_status"], f["outcome_class"]) for f in result["flips"]["listed"]]
    assert listed == [   # newest first, at most flips_limit
        ("d00009", "review", "no", "big", "TOO_BIG", "failed", "failure"),
        ("d00008", "review", "yes", "small", "SMALL", None, "none"),
        ("d00007", "no", "yes", "huge", "HUGE", None, "unobservable"),
        ("d00004", "no", "yes", "huge", "HUGE", "succeeded", "unobservable"),
    ]
    assert result["flips"]["listed"][0]["created_at"] == "2026-02-01T00:00:00.000Z"
    outcomes = result["outcomes"]
    assert (outcomes["caught_failures"], outcomes["blocked_successes"]) == (1, 1)
    assert (outcomes["unobserved_new_approvals"], outcomes["unobserved_new_reviews"]) == (2, 0)
    assert outcomes["flips_without_outcome"] == 1
    cells = {(c["from"], c["to"]): c for c in outcomes["by_transition"]}
    assert cells[("review", "yes")] == {"from": "review", "to": "yes", "count": 2, "success": 0, "failure": 1,
                                        "excluded": 0, "open": 0, "none": 1, "unobservable": 0}
    assert cells[("review", "no")]["count"] == 2 and cells[("review", "no")]["success"] == 1
    assert cells[("no", "yes")]["unobservable"] == 2



def test_transitions_drift_and_rules_in_their_order_every_member(result):
    """The lists a reader reads top down, to the member and in order (the scalar comparison of
    test_scalar_dry_run_figures.py reads them as dicts). Replayed: the ten decisions with facts."""
    assert result["transitions"] == [   # every (stored, draft) pair in verdict order, zeros included
        {"from": "yes", "to": "yes", "count": 2}, {"from": "yes", "to": "no", "count": 0},
        {"from": "yes", "to": "review", "count": 0}, {"from": "no", "to": "yes", "count": 2},
        {"from": "no", "to": "no", "count": 1}, {"from": "no", "to": "review", "count": 0},
        {"from": "review", "to": "yes", "count": 2}, {"from": "review", "to": "no", "count": 2},
        {"from": "review", "to": "review", "count": 1},
    ]
    # Largest first; ties by stored rule (the default, a null rule, after the named ones), then draft rule.
    assert result["rule_transitions"] == [
        {"from": "no", "to": "yes", "old_rule": "big", "new_rule": "huge", "count": 2},
        {"from": "yes", "to": "yes", "old_rule": "small", "new_rule": "small", "count": 2},
        {"from": "review", "to": "no", "old_rule": None, "new_rule": "big", "count": 2},
        {"from": "review", "to": "yes", "old_rule": None, "new_rule": "small", "count": 2},
        {"from": "no", "to": "no", "old_rule": "big", "new_rule": "big", "count": 1},
        {"from": "review", "to": "review", "old_rule": None, "new_rule": None, "count": 1},
    ]
    # By the size of the change, then by name.
    assert result["drift_by_rule"] == [
        {"rule_id": None, "before": 5, "after": 1, "delta": -4},
        {"rule_id": "huge", "before": 0, "after": 2, "delta": 2},
        {"rule_id": "small", "before": 2, "after": 4, "delta": 2},
        {"rule_id": "big", "before": 3, "after": 3, "delta": 0},
    ]
    assert result["drift_by_reason"] == [
        {"reason_code": "NO_RULE", "before": 5, "after": 1, "delta": -4},
        {"reason_code": "HUGE", "before": 0, "after": 2, "delta": 2},
        {"reason_code": "SMALL", "before": 2, "after": 4, "delta": 2},
        {"reason_code": "TOO_BIG", "before": 3, "after": 3, "delta": 0},
    ]
    assert result["rules"] == [   # the draft's order, each with its priority (none given: 0)
        {"rule_id": "huge", "priority": 10, "fired_in_history": 0, "fires_under_draft": 2},
        {"rule_id": "big", "priority": 0, "fired_in_history": 3, "fires_under_draft": 3},
        {"rule_id": "small", "priority": 0, "fired_in_history": 2, "fires_under_draft": 4},
        {"rule_id": "ghost", "priority": -1, "fired_in_history": 0, "fires_under_draft": 0},
    ]
    assert result["draft"] == {"rulebook_id": "refunds", "version": "2.0.0", "rulebook_hash": sha256_hex(DRAFT),
                            "rule_order": ["huge", "big", "small", "ghost"]}
    assert (result["rulebook_id"], result["scope"]) == ("refunds", None)
    # The reader's notes on what the figures mean travel with every result (four of them; the
    # first explains the unobservable class of a flip from no).
    assert len(result["notes"]) == 4 and "cannot be observed (outcome class unobservable)" in result["notes"][0]
    assert [(v["first"], v["last"]) for v in result["history_versions"]] == [
        ("2026-01-05T00:00:00.000Z", "2026-02-04T00:00:00.000Z")]


def test_review_forecast_is_exact(result):
    load = result["review_load"]
    assert (load["before"], load["after"], load["delta"]) == (5, 1, -4)
    assert load["relative_change"] == -0.8
    assert (load["months"], load["per_month_before"], load["per_month_after"]) == (2, 2.5, 0.5)
    assert load["by_month"] == [
        {"month": "2026-01", "replayed": 8, "review_before": 4, "review_after": 1},
        {"month": "2026-02", "replayed": 2, "review_before": 1, "review_after": 0},
    ]
    # A dataset written without hold tables: the cost of a hold is not measured, and says so.
    assert load["hold_cost"] == {
        "measured": False, "source": None, "assumed_review_cost": 0.05,
        "note": ("no closed hold of this rulebook in the history: the review forecast is the queue's counts, and the "
                 "cost model's review cost (0.05 per review) is assumed, not measured")}


def test_review_forecast_without_reviews_before_has_no_relative_change(tmp_path):
    decisions = decide(OLD, [{"amount": 10}, {"amount": 200}, {"amount": 2**60}])
    root = write_dataset(tmp_path / "ds", decisions, [])
    load = dry_run(DRAFT, "refunds", dataset=root, created_at=NOW).result["review_load"]
    assert (load["before"], load["after"], load["delta"], load["relative_change"]) == (0, 0, 0, None)
    assert (load["months"], load["per_month_before"], load["per_month_after"]) == (1, 0.0, 0.0)


def test_row_replay_without_partial_rows_counts_no_scalar_row(tmp_path):
    decisions = decide(OLD, [{"amount": 10}, {"amount": 200}], no_facts=(1,))
    root = write_dataset(tmp_path / "ds", decisions, [])
    draft = load_draft(DRAFT, "refunds")
    history = load_history("refunds", None, dataset=root, ledger=None, paths=draft.polars.paths)
    evaluated, scalar_count = replay(history, draft)
    assert scalar_count == 0
    assert sorted(evaluated.collect()["replay"].to_list()) == ["unreplayable", "vector"]


def test_review_forecast_rounding_over_seven_months(tmp_path):
    """One decision a month, January to July: 3 reviews before, 1 after. The per-month figures
    are rounded to 3 decimals and the relative change to 6, so thirds and sevenths show it."""
    amounts = [40, 25, 28, 10, 120, 5, 200]  # review, review, review, yes, no, yes, no under OLD
    decisions = [row for month, amount in enumerate(amounts, start=1)
                 for row in decide(OLD, [{"amount": amount}], start=datetime(2026, month, 5, tzinfo=UTC),
                                   prefix=f"m{month}-")]
    root = write_dataset(tmp_path / "ds", decisions, [])
    load = dry_run(DRAFT, "refunds", dataset=root, created_at=NOW).result["review_load"]
    assert (load["before"], load["after"], load["delta"]) == (3, 1, -2)
    assert load["relative_change"] == -0.666667
    assert (load["months"], load["per_month_before"], load["per_month_after"]) == (7, 0.429, 0.143)
    assert [m["month"] for m in load["by_month"]] == [f"2026-{m:02d}" for m in range(1, 8)]
    assert [m["review_before"] for m in load["by_month"]] == [1, 1, 1, 0, 0, 0, 0]
    assert [m["review_after"] for m in load["by_month"]] == [1, 0, 0, 0, 0, 0, 0]


def test_read_draft_file_answers_json_or_draft_unreadable(tmp_path):
    good = tmp_path / "draft.json"
    good.write_text('{"rulebook_id": "refunds", "note": "caf\u00e9"}', encoding="utf-8")
    assert read_draft_file(good) == {"rulebook_id": "refunds", "note": "caf\u00e9"}
    assert read_draft_file(str(good)) == {"rulebook_id": "refunds", "note": "caf\u00e9"}
    bad = {"missing.json": None, "latin1.json": '{"a": "caf\u00e9"}'.encode("latin-1"),
           "broken.json": b'{"a": ', "duplicate.json": b'{"a": 1, "a": 2}'}
    for name, content in bad.items():
        if content is not None:
            (tmp_path / name).write_bytes(content)
        with pytest.raises(DryRunError) as refused:
            read_draft_file(tmp_path / name)
        assert refused.value.code == "DRAFT_UNREADABLE", name


def test_dry_run_error_body():
    plain = DryRunError("HISTORY_EMPTY", "no decision in scope acme")
    assert (plain.code, plain.message, plain.errors, str(plain)) == \
        ("HISTORY_EMPTY", "no decision in scope acme", [], "no decision in scope acme")
    assert plain.to_dict() == {"error": "HISTORY_EMPTY", "message": "no decision in scope acme"}
    found = [{"field": "rules[0]", "code": "REQUIRED", "message": "is required"}]
    listed = DryRunError("DRAFT_INVALID", "the draft is not valid", found)
    assert listed.to_dict() == {"error": "DRAFT_INVALID", "message": "the draft is not valid", "errors": found}


def test_write_dry_run_files_folders_and_format(root, tmp_path):
    """`write_dry_run`: the folder and its parents are made, `migration.json` is the manifest as
    sorted, two-space-indented UTF-8 JSON with a final newline, unsigned without a signer; a second
    write into the now existing folder replaces the files and leaves no temporary file."""
    manifest = dry_run(DRAFT, "refunds", dataset=root, created_at=NOW).manifest | {"note": "naïve ünïcode"}
    out = tmp_path / "a" / "b"
    written = write_dry_run(out, manifest, None)
    assert written == manifest and "signature" not in written and "migration_hash" not in written
    text = (out / "migration.json").read_text(encoding="utf-8")
    assert text == json.dumps(manifest, indent=2, ensure_ascii=False, sort_keys=True) + "\n"
    assert '\n  "note": "naïve ünïcode",\n' in text and text.endswith("}\n")
    assert sorted(p.name for p in out.iterdir()) == ["migration.json", "report.html", "report.md"]
    signer = HmacReceiptSigner(HmacKey("hmac-out", b"o" * 32))
    signed = write_dry_run(out, manifest, signer)
    assert signed == sign_manifest(manifest, signer) and signed["migration_hash"] != written.get("migration_hash")
    assert json.loads((out / "migration.json").read_text(encoding="utf-8")) == signed
    assert signed["migration_hash"] in (out / "report.md").read_text(encoding="utf-8")
    assert sorted(p.name for p in out.iterdir()) == ["migration.json", "report.html", "report.md"]


def test_the_default_flips_limit_and_the_dataset_anchors(root, tmp_path):
    """`dry_run` lists at most 200 flips unless told otherwise, and hands its `anchors` to the
    history: a dataset manifest no trusted key signed is refused before any replay."""
    run = dry_run(DRAFT, "refunds", dataset=root, created_at=NOW)
    assert run.result["flips"]["listed_limit"] == 200
    # The run carries the history it read and the draft it compiled.
    assert (run.history.rulebook_id, run.history.source["kind"]) == ("refunds", "dataset")
    assert run.draft.rulebook_hash == sha256_hex(DRAFT) == run.manifest["to"]["rulebook_hash"]
    key = HmacKey("hmac-dataset", b"d" * 32)
    anchors = TrustAnchors.from_hmac_key(key)
    with pytest.raises(DryRunError) as caught:
        dry_run(DRAFT, "refunds", dataset=root, created_at=NOW, anchors=anchors)
    assert caught.value.code == "DATASET_INVALID"
    signed = write_dataset(tmp_path / "signed", decide(OLD, FACTS), [], signer=HmacReceiptSigner(key))
    assert dry_run(DRAFT, "refunds", dataset=signed, created_at=NOW, anchors=anchors).result["decisions_total"] == 11


def test_every_flip_is_written_to_the_flips_path(root, tmp_path):
    """`dry_run(flips_path=...)` writes every flipped decision, not only the listed ones."""
    path = tmp_path / "flips.parquet"
    run = dry_run(DRAFT, "refunds", dataset=root, created_at=NOW, flips_limit=1, flips_path=path)
    written = pl.read_parquet(path)
    flips = run.result["flips"]
    assert written.height == flips["count"] > 1 and len(flips["listed"]) == 1
    assert flips["listed"][0]["decision_id"] in written["decision_id"].to_list()


def test_read_manifest_refusals_and_answer(root, tmp_path):
    """`history.read_manifest`: the manifest, its exact bytes and its trust status as
    `workbench.dataset.load.open_dataset` gives them (issue 41), or DATASET_INVALID naming why."""
    raw = (root / "manifest.json").read_bytes()
    manifest, read, trusted = read_manifest(root)
    assert read == raw and manifest == json.loads(raw)
    assert trusted == {"kind": "dataset", "dataset_hash": manifest["dataset_hash"], "key_id": None,
                       "trust": "unsigned", "synthetic": bool(manifest.get("synthetic"))}

    def refused(folder, anchors=None) -> str:
        with pytest.raises(DryRunError) as caught:
            read_manifest(folder, anchors)
        assert caught.value.code == "DATASET_INVALID"
        return str(caught.value)

    assert refused(tmp_path / "nothing") == f"{tmp_path / 'nothing'}: no manifest.json; not a decision dataset"
    for name, content in (("bytes", b"\xff\xfe"), ("text", b"{"), ("list", b"[]"), ("old", b'{"dataset_schema_version": "x"}')):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "manifest.json").write_bytes(content)
        why = refused(folder)
        assert why.startswith(f"{folder}/manifest.json: unreadable manifest (") == (name in ("bytes", "text")), why
        assert ("schema version" in why) == (name in ("list", "old")), why
    changed = tmp_path / "changed"
    changed.mkdir()
    (changed / "manifest.json").write_text(json.dumps({**manifest, "synthetic": False}))
    assert refused(changed) == (f"{changed}/manifest.json: its dataset_hash does not match its content (the manifest "
                                "was changed after it was sealed)")
    unsealed = tmp_path / "unsealed"
    unsealed.mkdir()
    (unsealed / "manifest.json").write_text(json.dumps({k: v for k, v in manifest.items() if k != "dataset_hash"}))
    assert "its dataset_hash does not match its content" in refused(unsealed)
    # With anchors the signature decides: this dataset is sealed but not signed.
    assert "it is not signed" in refused(root, TrustAnchors.from_hmac_key(HmacKey("k", b"k" * 32)))
    # A location that cannot be opened: the location's own reason.
    assert refused("") == "the dataset location is empty"
    assert refused("nosuch://x/y").startswith("cannot open dataset location 'nosuch://x/y': ")


def _outcome(decision: str, verdict: str, action: str, reason: str) -> dict:
    return {"decision": decision, "verdict": verdict, "action": action, "reason_code": reason}


def test_field_changes_count_each_outcome_field_on_its_own(tmp_path):
    """The manifest's `field_changes`: per outcome field, the replayed decisions whose value
    changes. Each decision below changes a different set of fields, so every count differs:

        #  facts                   old (OLD_FIELDS)          draft (DRAFT_FIELDS)         changes
        0  amount 200, tier        no  NO_V  act_no  BIG     no  NO_V  act_block BIG      action
        1  amount 5, tier          yes YES_V act_yes SMALL   yes OK    act_yes   SMALL    application verdict
        2  amount 70, tier         review (default)          yes YES_V act_yes   MID (mid) verdict, application
                                                                                          verdict, action, reason, rule
        3  amount 30, no tier      review (default)          needs_input                  status, application
                                                                                          verdict, action, reason
        4  nothing                 needs_input               needs_input                  none
        5  amount 30, tier         review (default)          review (default)             none
    """
    old = rulebook([
        {"rule_id": "big", "condition": {"field": "amount", "operator": "gt", "value": 100},
         "outcome": _outcome("no", "NO_V", "act_no", "BIG")},
        {"rule_id": "small", "condition": {"field": "amount", "operator": "lte", "value": 10},
         "outcome": _outcome("yes", "YES_V", "act_yes", "SMALL")},
    ]) | {"input_schema": {"required": ["amount"]}}
    draft = rulebook([
        {"rule_id": "big", "condition": {"field": "amount", "operator": "gt", "value": 100},
         "outcome": _outcome("no", "NO_V", "act_block", "BIG")},
        {"rule_id": "small", "condition": {"field": "amount", "operator": "lte", "value": 10},
         "outcome": _outcome("yes", "OK", "act_yes", "SMALL")},
        {"rule_id": "mid", "condition": {"field": "amount", "operator": "gt", "value": 50},
         "outcome": _outcome("yes", "YES_V", "act_yes", "MID")},
    ], version="2.0.0") | {"input_schema": {"required": ["amount", "tier"]}}
    facts = [{"amount": 200, "tier": "t"}, {"amount": 5, "tier": "t"}, {"amount": 70, "tier": "t"}, {"amount": 30},
             {}, {"amount": 30, "tier": "t"}]
    decisions = decide(old, facts)
    assert [d["reason_code"] for d in decisions] == ["BIG", "SMALL", "NO_RULE", "NO_RULE", "INPUT_SCHEMA_FAILED", "NO_RULE"]
    root = write_dataset(tmp_path / "ds", decisions, [])
    dry = dry_run(draft, "refunds", dataset=root, created_at=NOW)
    assert dry.manifest["dry_run"]["field_changes"] == {
        "status": 1, "verdict": 1, "application_verdict": 3, "action": 3, "reason_code": 2, "matched_rule_id": 1}
    # A tie in the size of the change puts the default (a null rule) after the named rule.
    assert dry.result["drift_by_rule"] == [
        {"rule_id": "mid", "before": 0, "after": 1, "delta": 1},
        {"rule_id": None, "before": 4, "after": 3, "delta": -1},
        {"rule_id": "big", "before": 1, "after": 1, "delta": 0},
        {"rule_id": "small", "before": 1, "after": 1, "delta": 0},
    ]
    assert [(r["reason_code"], r["delta"]) for r in dry.result["drift_by_reason"]] == [
        ("NO_RULE", -2), ("INPUT_SCHEMA_FAILED", 1), ("MID", 1), ("BIG", 0), ("SMALL", 0)]
    assert (dry.result["decisions_changed"], dry.result["decisions_reason_changed"],
            dry.result["decisions_rule_changed"], dry.result["needs_input"]) == (1, 2, 1, 2)


def test_rule_transitions_of_equal_count_by_verdicts_too(tmp_path):
    """Ties on count and rules are ordered by the stored verdict, then the draft's verdict. The
    history holds two versions: rule big said no under 1.0.0 and review under 1.1.0; the draft's
    default is no, and its schema sends a decision without `tier` to needs_input (a review)."""
    big = {"field": "amount", "operator": "gt", "value": 100}
    v1 = rulebook([rule("big", big, "no", "BIG")])
    v2 = rulebook([rule("big", big, "review", "BIG")], version="1.1.0")
    draft = rulebook([rule("big", big, "no", "BIG")], version="2.0.0", default=("no", "NO", "stop", "NO_RULE")) | {
        "input_schema": {"required": ["amount", "tier"]}}
    decisions = decide(v1, [{"amount": 200, "tier": "t"}], prefix="a") + decide(
        v2, [{"amount": 200, "tier": "t"}, {"amount": 5}, {"amount": 5, "tier": "t"}], prefix="b",
        start=datetime(2026, 2, 1, tzinfo=UTC))
    root = write_dataset(tmp_path / "ds", decisions, [])
    result = dry_run(draft, "refunds", dataset=root, created_at=NOW).result
    assert result["rule_transitions"] == [
        {"from": "no", "to": "no", "old_rule": "big", "new_rule": "big", "count": 1},
        {"from": "review", "to": "no", "old_rule": "big", "new_rule": "big", "count": 1},
        {"from": "review", "to": "no", "old_rule": None, "new_rule": None, "count": 1},
        {"from": "review", "to": "review", "old_rule": None, "new_rule": None, "count": 1},
    ]
    assert result["needs_input"] == 1


def test_history_versions_by_their_first_decision(tmp_path):
    """`history_versions`: each stored version with its decisions and first and last time, oldest
    first (five versions, named so that no text order is the time order)."""
    names = ["3.0.0", "1.0.0", "5.0.0", "2.0.0", "4.0.0"]
    decisions = []
    for month, name in enumerate(names, start=1):
        book = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 100}, "no", "BIG")], version=name)
        decisions += decide(book, [{"amount": 5}] * month, prefix=f"v{month}-",
                            start=datetime(2026, month, 2, tzinfo=UTC))
    root = write_dataset(tmp_path / "ds", decisions, [])
    versions = dry_run(DRAFT, "refunds", dataset=root, created_at=NOW).result["history_versions"]
    assert [(v["policy_version"], v["decisions"], v["first"], v["last"]) for v in versions] == [
        ("3.0.0", 1, "2026-01-02T00:00:00.000Z", "2026-01-02T00:00:00.000Z"),
        ("1.0.0", 2, "2026-02-02T00:00:00.000Z", "2026-02-05T00:00:00.000Z"),
        ("5.0.0", 3, "2026-03-02T00:00:00.000Z", "2026-03-08T00:00:00.000Z"),
        ("2.0.0", 4, "2026-04-02T00:00:00.000Z", "2026-04-11T00:00:00.000Z"),
        ("4.0.0", 5, "2026-05-02T00:00:00.000Z", "2026-05-14T00:00:00.000Z"),
    ]


def test_a_flip_exactly_at_the_horizon_is_mature(tmp_path):
    """`young` is newer than the horizon (30 days) before the history's newest decision: a flip
    exactly 30 days before it is mature, so its failed outcome counts as a failure caught."""
    ok = {"field": "amount", "operator": "lte", "value": 100}
    old = rulebook([rule("ok", ok, "yes", "OK")])
    draft = rulebook([rule("cap", {"field": "amount", "operator": "gt", "value": 50}, "no", "CAP", priority=5),
                      rule("ok", ok, "yes", "OK")], version="2.0.0")
    decisions = decide(old, [{"amount": 60}] + [{"amount": 10}] * 10)   # d00000 at T0, d00010 30 days later
    outcomes = [{"decision_id": "d00000", "status": "failed", "receipt_id": "o0",
                 "reported_at": decisions[0]["created_at"] + timedelta(days=1)}]
    root = write_dataset(tmp_path / "ds", decisions, outcomes)
    impact = dry_run(draft, "refunds", dataset=root, created_at=NOW).result["impact"]
    assert impact["as_of"] == "2026-02-04T00:00:00.000Z"
    assert (impact["failures_caught"]["count"], impact["immature"]["count"]) == (1, 0)


class _LocalPasses:
    """`compute`'s `Passes` made in this process as a cluster's workers make them
    (`workbench.migration.on_cluster`): the replay passes of `_replay_passes`, and the latest outcome
    of each decision it is handed (kept, to be read)."""

    def __init__(self, history):
        self.history = history
        self.handed = None
        self.replayed = 0

    def replay(self, history, draft, table):
        self.replayed += 1
        return _replay_passes(history, draft, table)

    def latest_outcomes(self, flipped):
        self.handed = flipped
        wanted = self.history.outcomes.filter(pl.col("decision_id").is_in(flipped["decision_id"].implode()))
        return latest_outcomes(wanted).collect()


def _sorted(frame: pl.DataFrame) -> tuple:
    return frame.schema, frame.sort(frame.columns, nulls_last=True).rows()


def test_passes_made_elsewhere_give_the_figures_of_the_local_pass(root, tmp_path):
    """`compute(passes=...)` (a cluster's passes): the grouped counts and the selected rows come
    from the passes, the selected decisions (the four vector flips and the three partial rows)
    are handed over for their latest outcomes, and every figure and the flips file are the local
    pass's, flips without an outcome included."""
    draft = load_draft(DRAFT, "refunds")
    history = load_history("refunds", None, dataset=root, ledger=None, paths=draft.polars.paths)
    local = compute(history, draft, flips_limit=4, flips_path=tmp_path / "local.parquet")
    passes = _LocalPasses(history)
    made = compute(history, draft, flips_limit=4, flips_path=tmp_path / "made.parquet", passes=passes)
    assert passes.replayed == 1 and passes.handed.columns == ["decision_id", "scope"]
    assert sorted(passes.handed.rows()) == [(f"d{i:05d}", "acme") for i in (1, 2, 4, 7, 8, 9, 10)]
    for name in ("cube", "outcome_cube", "months", "versions"):
        assert _sorted(getattr(made, name)) == _sorted(getattr(local, name)), name
    assert made.flips.equals(local.flips) and made.flips.height == 4
    assert (made.changes, made.scalar_rows, made.impact_tally, made.as_of, made.flips_limit) == (
        local.changes, local.scalar_rows, local.impact_tally, local.as_of, local.flips_limit)
    assert sum(made.outcome_cube["count"]) == 6
    assert pl.read_parquet(tmp_path / "made.parquet").equals(pl.read_parquet(tmp_path / "local.parquet"))


def test_replay_passes_hold_the_grouped_counts_and_the_selected_rows(root):
    """`_replay_passes` (a cluster worker's pass over its partition): the typed and absent rows
    counted by stored outcome, month and pick, and the selected rows in the history's order,
    every column as read (the partial rows with their facts, the flips without)."""
    draft = load_draft(DRAFT, "refunds")
    history = load_history("refunds", None, dataset=root, ledger=None, paths=draft.polars.paths)
    grouped, rows = _replay_passes(history, draft, rp.outcome_table(draft.polars))
    assert int(grouped["count"].sum()) == 8 and grouped["count"].dtype == pl.Int64
    assert rows["decision_id"].to_list() == [f"d{i:05d}" for i in (1, 2, 4, 7, 8, 9, 10)]
    assert rows.schema["created_at"] == history.base.collect_schema()["created_at"]
    by_id = {row["decision_id"]: row for row in rows.iter_rows(named=True)}
    assert [by_id[f"d{i:05d}"]["facts_json"] is None for i in (1, 2, 4, 7, 8, 9, 10)] == [
        True, True, False, False, True, True, False]
    assert json.loads(by_id["d00004"]["facts_json"]) == {"amount": 2**60}
    assert [by_id[f"d{i:05d}"]["old_verdict"] for i in (1, 2, 4, 9)] == ["review", "review", "no", "review"]
    assert by_id["d00009"]["month"] == "2026-02" and by_id["d00009"]["scope"] == "acme"


def test_compute_defaults_list_two_hundred_flips_over_a_thirty_day_horizon(tmp_path):
    """`compute`'s own defaults (the run passes its cost model's): at most 200 flips listed, and
    a flip exactly 30 days before the newest decision is mature."""
    ok = {"field": "amount", "operator": "lte", "value": 100}
    old = rulebook([rule("ok", ok, "yes", "OK")])
    book = rulebook([rule("cap", {"field": "amount", "operator": "gt", "value": 50}, "no", "CAP", priority=5),
                     rule("ok", ok, "yes", "OK")], version="2.0.0")
    root = write_dataset(tmp_path / "ds", decide(old, [{"amount": 60}] + [{"amount": 10}] * 10), [])
    draft = load_draft(book, "refunds")
    history = load_history("refunds", None, dataset=root, ledger=None, paths=draft.polars.paths)
    computed = compute(history, draft)
    assert computed.flips_limit == 200 and computed.flips["decision_id"].to_list() == ["d00000"]
    assert computed.impact_tally == {("yes", "no", "none", False): 1}
    assert computed.as_of == "2026-02-04T00:00:00.000Z"


def test_the_run_spills_beside_its_flips_file(root, tmp_path, monkeypatch):
    """`compute`'s intermediate files go to a new folder beside `flips_path` (on its disk, not the
    system's temporary one), removed when the run ends."""
    made = []
    real = tempfile.mkdtemp

    def mkdtemp(*args, **kwargs):
        made.append(Path(real(*args, **kwargs)))
        return str(made[-1])

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    draft = load_draft(DRAFT, "refunds")
    history = load_history("refunds", None, dataset=root, ledger=None, paths=draft.polars.paths)
    folder = tmp_path / "out"
    folder.mkdir()
    computed = compute(history, draft, flips_limit=4, flips_path=folder / "flips.parquet")
    assert computed.flips.height == 4 and pl.read_parquet(folder / "flips.parquet").height == 6
    assert [path.parent for path in made] == [folder] and not made[0].exists()
    assert [path.name for path in folder.iterdir()] == ["flips.parquet"]


def _flips_frame(rows: list[tuple]) -> pl.DataFrame:
    """Flips as `write_flips` yields them (FLIP_COLUMNS): (id, created_at, old, new, class)."""
    return pl.DataFrame(
        [{"decision_id": i, "created_at": at, "scope": "acme", "old_verdict": old, "new_verdict": new,
          "old_rule": None, "new_rule": None, "old_reason": None, "new_reason": None, "outcome_status": None,
          "outcome_class": cls} for i, at, old, new, cls in rows],
        schema={"decision_id": pl.String, "created_at": pl.Datetime("ms", "UTC"), "scope": pl.String,
                "old_verdict": pl.String, "new_verdict": pl.String, "old_rule": pl.String, "new_rule": pl.String,
                "old_reason": pl.String, "new_reason": pl.String, "outcome_status": pl.String,
                "outcome_class": pl.String})


def _versions(last: datetime | None) -> pl.DataFrame:
    rows = [] if last is None else [("1.0.0", "h", 1, last, last)]
    return pl.DataFrame(rows, schema={"policy_version": pl.String, "rulebook_hash": pl.String, "decisions": pl.Int64,
                                      "first": pl.Datetime("ms", "UTC"), "last": pl.Datetime("ms", "UTC")},
                        orient="row")


def test_flip_aggregates_count_one_cell_over_young_and_mature_flips():
    """The outcome cube has one row per (old verdict, new verdict, outcome class), young and
    mature flips of a cell added up; the impact tally tells them apart (two buckets here)."""
    newest = datetime(2026, 3, 31, tzinfo=UTC)
    first = _flips_frame([("a", newest - timedelta(days=40), "review", "yes", "failure"),
                          ("b", newest - timedelta(days=2), "review", "yes", "failure")])
    second = _flips_frame([("c", newest - timedelta(days=1), "review", "yes", "failure"),
                           ("d", newest - timedelta(days=50), "yes", "no", "success")])
    cube, listed, as_of, tally = _flip_aggregates([first, second], 3, _versions(newest), 30)
    assert cube.columns == ["old_verdict", "new_verdict", "outcome_class", "count"]
    assert sorted(cube.rows()) == [("review", "yes", "failure", 3), ("yes", "no", "success", 1)]
    assert tally == {("review", "yes", "failure", False): 1, ("review", "yes", "failure", True): 2,
                     ("yes", "no", "success", False): 1}
    assert as_of == "2026-03-31T00:00:00.000Z" and listed["decision_id"].to_list() == ["c", "b", "a"]


def test_flip_aggregates_without_a_decision_time_have_no_tally():
    """A history without a decision time has no `as_of` and no young flips: the outcome cube
    still counts every flip, the impact tally is empty."""
    flipped = _flips_frame([("a", None, "review", "yes", "none"), ("b", None, "review", "yes", "none")])
    cube, listed, as_of, tally = _flip_aggregates([flipped], 5, _versions(None), 30)
    assert (as_of, tally) == (None, {})
    assert cube.rows() == [("review", "yes", "none", 2)]
    assert cube.columns == ["old_verdict", "new_verdict", "outcome_class", "count"]
    assert listed["decision_id"].to_list() == ["a", "b"]


def test_month_counts_of_the_computed_history(root):
    """`Computed.months`: per month the decisions, those replayed (not the one without facts) and
    those in review before and after the draft."""
    draft = load_draft(DRAFT, "refunds")
    history = load_history("refunds", None, dataset=root, ledger=None, paths=draft.polars.paths)
    months = compute(history, draft, flips_limit=4).months
    assert months.columns == ["month", "decisions", "replayed", "review_before", "review_after"]
    assert sorted(months.rows()) == [("2026-01", 9, 8, 4, 1), ("2026-02", 2, 2, 1, 0)]


def test_the_newest_flips_break_a_tie_by_decision_id():
    """`_newest`: a flip without a time first, then newest first, flips of the same time by
    decision id (ascending), at most k."""
    at = datetime(2026, 3, 1, tzinfo=UTC)
    flipped = _flips_frame([("b", at, "review", "yes", "none"), ("c", at - timedelta(days=1), "review", "yes", "none"),
                            ("a", at, "review", "yes", "none"), ("n", None, "review", "yes", "none")])
    assert _newest(flipped, 3)["decision_id"].to_list() == ["n", "a", "b"]
    assert _newest(flipped, 9)["decision_id"].to_list() == ["n", "a", "b", "c"]
    assert _newest(flipped, 0).height == 0 and _newest(flipped, 0).columns == flipped.columns


def test_a_dry_run_error_carries_its_problems_as_the_refusals_details():
    """The API answers a GateError with its details: a draft's problems reach the caller as
    `errors`, and an error without problems adds no member."""
    problems = [{"field": "rules[0].priority", "code": "invalid_type", "message": "priority must be an integer"}]
    invalid = DryRunError("DRAFT_INVALID", "the draft is not a valid rulebook", problems)
    assert (invalid.code, invalid.message, invalid.details, invalid.errors) == (
        "DRAFT_INVALID", "the draft is not a valid rulebook", {"errors": problems}, problems)
    assert invalid.to_dict() == {"error": "DRAFT_INVALID", "message": "the draft is not a valid rulebook",
                                 "errors": problems}
    usage = DryRunError("USAGE", "--out is required")
    assert (usage.details, usage.errors, usage.to_dict()) == ({}, [], {"error": "USAGE", "message": "--out is required"})
    assert DryRunError("USAGE", "m", []).details == {}


def test_the_result_is_json_with_every_member_the_type_names_in_its_order(result):
    # One type per shape (issue 66, item 7): the result is the TypedDict `summarize` writes, no
    # dataclass beside it. Its members are the type's, in the type's order, and it is JSON as it is.
    from workbench.migration.summary import DryRunResult

    assert list(result) == list(DryRunResult.__annotations__)
    assert json.loads(json.dumps(result, allow_nan=False)) == result
