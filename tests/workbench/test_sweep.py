"""Threshold sweeps (issue 21, item 3): every threshold's figures equal a full dry-run of the draft
with that threshold (the vectorized pass, the partial rows through the scalar evaluator), and the
refusals of what cannot be swept."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pytest
from dryrun_support import decide, rule, rulebook, write_dataset

from workbench.migration import DryRunError, dry_run
from workbench.migration.sweep import find_leaf, sweep, thresholds_between

NOW = "2026-11-24T00:00:00.000Z"
OLD = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 100}, "no", "TOO_BIG"),
                rule("fine", {"field": "amount", "operator": "lte", "value": 100}, "yes", "FINE")])
DRAFT = rulebook([
    rule("vip", {"field": "tier", "operator": "eq", "value": "vip"}, "yes", "VIP", priority=20),
    rule("big", {"all": [{"field": "amount", "operator": "gt", "value": 50},
                         {"field": "country", "operator": "neq", "value": "XX"}]}, "no", "TOO_BIG", priority=10),
    rule("small", {"field": "amount", "operator": "lte", "value": 20}, "yes", "SMALL")], version="2.0.0")
AMOUNTS = [5, 12, 25, 30, 45, 51, 60, 75, 90, 99, 120, 150, 33, 64, 2**60]
TIERS = ["vip" if i % 5 == 0 else "std" for i in range(len(AMOUNTS))]
STATUSES = ["succeeded", "failed", "failed", "succeeded", "pending", "failed", "succeeded", "failed",
            "succeeded", "failed", "succeeded", "failed", None, "failed", "succeeded"]


def _dataset(path, later=()):
    """The history; `later`: (decision index, status, hours after the decision) of further outcomes."""
    facts = [{"amount": a, "tier": t, "country": "US" if i != 7 else "XX"}
             for i, (a, t) in enumerate(zip(AMOUNTS, TIERS, strict=True))]
    decisions = decide(OLD, facts)
    outcomes = [{"decision_id": f"d{i:05d}", "status": s, "receipt_id": f"o{i}",
                 "reported_at": decisions[i]["created_at"] + timedelta(hours=2)}
                for i, s in enumerate(STATUSES) if s is not None]
    outcomes += [{"decision_id": f"d{i:05d}", "status": s, "receipt_id": f"p{i}-{hours}",
                  "reported_at": decisions[i]["created_at"] + timedelta(hours=hours)} for i, s, hours in later]
    return write_dataset(path, decisions, outcomes)


@pytest.fixture
def root(tmp_path):
    return _dataset(tmp_path / "ds")


def _with(threshold):
    draft = json.loads(json.dumps(DRAFT))
    draft["rules"][1]["condition"]["all"][0]["value"] = threshold
    return draft


def test_each_threshold_equals_a_full_dry_run_with_that_threshold(root):
    thresholds = [0, 20, 30, 45, 50.5, 60, 99, 100, 149.9, 1000]
    result = sweep(DRAFT, "refunds", ("big", "amount", 0), thresholds, scope="acme", dataset=root)
    assert result["scalar_rows"] == 1  # 2^60 cannot be held exactly by the typed columns
    assert [p["threshold"] for p in result["points"]] == thresholds
    for point in result["points"]:
        full = dry_run(_with(point["threshold"]), "refunds", scope="acme", dataset=root, created_at=NOW).result
        expected = full["impact"]
        for name in ("failures_caught", "successes_lost", "review_load_change", "immature", "expected_net_effect"):
            assert point[name] == expected[name], (point["threshold"], name)
        approvals = sum(t["count"] for t in full["transitions"] if t["to"] == "yes")
        assert point["approvals"]["count"] == approvals, point["threshold"]
    # Moving the threshold up lets more decisions through the `big` rule.
    counts = [p["approvals"]["count"] for p in result["points"]]
    assert counts == sorted(counts) and counts[0] < counts[-1]


@pytest.mark.parametrize(("spec", "message"), [
    (("nope", "amount", 0), "no rule"),
    (("vip", "tier", 0), "not a numeric comparison"),
    (("big", "weight", 0), "does not compare field"),
    (("big", "amount", 3), "occurrence 3 does not exist"),
])
def test_what_cannot_be_swept_is_refused(spec, message):
    with pytest.raises(DryRunError, match=message):
        find_leaf(DRAFT, *spec)


def test_a_comparison_under_not_is_refused():
    draft = rulebook([rule("x", {"not": {"field": "amount", "operator": "gt", "value": 5}}, "no", "X")])
    with pytest.raises(DryRunError, match="under a `not`"):
        find_leaf(draft, "x", "amount")


@pytest.mark.parametrize(("low", "high", "steps"), [(5, 1, 10), (0, float("inf"), 10), (0, 1, 0), (0, 1, 1001)])
def test_bad_ranges_are_refused(low, high, steps):
    with pytest.raises(DryRunError, match=r"SWEEP_INVALID|range|steps"):
        thresholds_between(low, high, steps)


def test_the_cli_sweeps_with_json_and_refuses_bad_input(root, tmp_path):
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps(DRAFT))
    base = [sys.executable, "-m", "gate_cli.main", "sweep", "--rulebook-id", "refunds", "--draft", str(draft),
            "--scope", "acme", "--dataset", str(root), "--allow-unsigned", "--rule", "big", "--field", "amount"]
    unsigned = subprocess.run([*base[:-5], *base[-4:], "--from", "0", "--to", "150", "--steps", "4"],
                              capture_output=True, text=True, timeout=120, env={"GATE_HOME": str(tmp_path / "home")})
    assert unsigned.returncode == 2 and "not signed" in unsigned.stderr  # an unsigned dataset only by opt-in
    done = subprocess.run([*base, "--from", "0", "--to", "150", "--steps", "4", "--json"], capture_output=True,
                          text=True, timeout=120, env={"GATE_HOME": str(tmp_path / "home"), "GATE_REQUIRE_SIGNING": "false"})
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert [p["threshold"] for p in body["points"]] == [0, 50, 100, 150]
    text = subprocess.run([*base, "--from", "0", "--to", "150", "--steps", "4"], capture_output=True, text=True,
                          timeout=120, env={"GATE_HOME": str(tmp_path / "home")})
    assert text.returncode == 0 and "threshold" in text.stdout and "approvals" in text.stdout
    bad = subprocess.run([*base, "--from", "9", "--to", "1", "--steps", "4"], capture_output=True, text=True,
                         timeout=120, env={"GATE_HOME": str(tmp_path / "home")})
    assert bad.returncode == 2 and "from <= to" in bad.stderr
    wrong = subprocess.run([*base[:-2], "--field", "tier", "--from", "0", "--to", "1", "--steps", "2"],
                           capture_output=True, text=True, timeout=120, env={"GATE_HOME": str(tmp_path / "home")})
    assert wrong.returncode == 2 and "does not compare field" in wrong.stderr


@pytest.mark.parametrize("op", ["gt", "gte", "lt", "lte"])
def test_every_operator_and_unsorted_repeated_thresholds_equal_full_dry_runs(root, op):
    # Thresholds out of order, repeated and on the data's own values (the boundaries of each operator),
    # and 2^60, the value of the row only the scalar evaluator replays.
    thresholds = [51, 30, 2.0**60, 0, 30, 99.5, 45]
    draft = _with(50)
    draft["rules"][1]["condition"]["all"][0]["operator"] = op
    result = sweep(draft, "refunds", ("big", "amount", 0), thresholds, scope="acme", dataset=root)
    assert [p["threshold"] for p in result["points"]] == thresholds
    for point in result["points"]:
        variant = json.loads(json.dumps(draft))
        variant["rules"][1]["condition"]["all"][0]["value"] = point["threshold"]
        full = dry_run(variant, "refunds", scope="acme", dataset=root, created_at=NOW).result
        for name in ("failures_caught", "successes_lost", "review_load_change", "immature", "expected_net_effect"):
            assert point[name] == full["impact"][name], (op, point["threshold"], name)
        approvals = sum(t["count"] for t in full["transitions"] if t["to"] == "yes")
        assert point["approvals"]["count"] == approvals, (op, point["threshold"])


def test_a_decision_with_several_outcomes_is_classed_by_its_latest(tmp_path):
    # Later outcomes that change the class (1, 3, 6, 12), and one reported before the first (5).
    root = _dataset(tmp_path / "ds", [(1, "succeeded", 5), (3, "failed", 3), (5, "succeeded", 1),
                                      (6, "failed", 4), (12, "failed", 6), (12, "succeeded", 7)])
    thresholds = [1000, 0, 30, 60]
    result = sweep(DRAFT, "refunds", ("big", "amount", 0), thresholds, scope="acme", dataset=root)
    for point in result["points"]:
        full = dry_run(_with(point["threshold"]), "refunds", scope="acme", dataset=root, created_at=NOW).result
        for name in ("failures_caught", "successes_lost", "review_load_change", "immature", "expected_net_effect"):
            assert point[name] == full["impact"][name], (point["threshold"], name)


def test_without_facts_rows_every_decision_goes_to_the_scalar_evaluator_and_one_without_facts_is_left_out(tmp_path):
    facts = [{"amount": a, "tier": t, "country": "US"} for a, t in zip(AMOUNTS, TIERS, strict=True)]
    decisions = decide(OLD, facts, no_facts=(3,))
    outcomes = [{"decision_id": f"d{i:05d}", "status": s, "receipt_id": f"o{i}",
                 "reported_at": decisions[i]["created_at"] + timedelta(hours=2)}
                for i, s in enumerate(STATUSES) if s is not None]
    root = write_dataset(tmp_path / "ds", decisions, outcomes, facts=False)
    result = sweep(DRAFT, "refunds", ("big", "amount", 0), [30, 60, 0], scope="acme", dataset=root)
    assert result["scalar_rows"] == len(AMOUNTS) - 1
    for point in result["points"]:
        full = dry_run(_with(point["threshold"]), "refunds", scope="acme", dataset=root, created_at=NOW).result
        assert result["decisions_replayed"] == full["impact"]["decisions_replayed"] == len(AMOUNTS) - 1
        for name in ("failures_caught", "successes_lost", "review_load_change", "immature", "expected_net_effect"):
            assert point[name] == full["impact"][name], (point["threshold"], name)
        approvals = sum(t["count"] for t in full["transitions"] if t["to"] == "yes")
        assert point["approvals"]["count"] == approvals, point["threshold"]


def test_a_signed_dataset_is_swept_only_under_its_signers_key(tmp_path):
    """`anchors` reach the history: the dataset must be signed by one of them (DATASET_INVALID
    otherwise), as for the dry-run."""
    from gate.keys.anchors import TrustAnchors
    from gate.keys.signing import Ed25519Key, Ed25519ReceiptSigner

    key = Ed25519Key.generate()
    facts = [{"amount": a, "tier": t, "country": "US"} for a, t in zip(AMOUNTS, TIERS, strict=True)]
    root = write_dataset(tmp_path / "signed", decide(OLD, facts), [], signer=Ed25519ReceiptSigner(key))
    spec, thresholds = ("big", "amount", 0), [40, 60]
    own = TrustAnchors.from_public_key_pem(key.public_key_pem, key.key_id)
    assert sweep(DRAFT, "refunds", spec, thresholds, dataset=root, anchors=own)["decisions_replayed"] == len(AMOUNTS)
    stranger = TrustAnchors.from_public_key_pem(Ed25519Key.generate().public_key_pem)
    with pytest.raises(DryRunError) as refused:
        sweep(DRAFT, "refunds", spec, thresholds, dataset=root, anchors=stranger)
    assert refused.value.code == "DATASET_INVALID"
