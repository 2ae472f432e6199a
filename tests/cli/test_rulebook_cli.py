"""`gate rulebook lint|diff|flips`, exit codes included: each subcommand once through the real
console script (a subprocess), the other calls in process (`tests.cli_in_process`)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_in_process import gate_in_process

GATE = str(Path(sys.executable).parent / "gate")


def outcome(decision, verdict):
    return {"decision": decision, "verdict": verdict, "action": "act", "reason_code": "RULE_HIT"}


BOOK = {
    "schema_version": "rulebook_v1", "rulebook_id": "pricing", "version": "1",
    "input_schema": {"required": ["discount"], "properties": {"discount": {"type": "number"},
                                                              "margin": {"type": "number"}}},
    "rules": [
        {"rule_id": "block", "priority": 100, "condition": {"field": "discount", "operator": "gt", "value": 25},
         "outcome": outcome("no", "BLOCK")},
        {"rule_id": "approve", "priority": 10, "condition": {"all": [
            {"field": "margin", "operator": "gte", "value": 20}, {"field": "discount", "operator": "lte", "value": 20}]},
         "outcome": outcome("yes", "APPROVE")},
    ],
    "default_outcome": outcome("review", "REVIEW"),
}


def gate(*args, cwd, process=False):
    """`gate rulebook ARGS` in `cwd`: in process (tests.cli_in_process), or with `process=True` as a
    subprocess of the console script, which each subcommand (and an exit 2) keeps once here."""
    if not process:
        return gate_in_process(["rulebook", *args], cwd=cwd)
    return subprocess.run([GATE, "rulebook", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def files(tmp_path):
    def write(name, body):
        path = tmp_path / name
        path.write_text(body if isinstance(body, str) else json.dumps(body))
        return name

    return write


def test_diff_reports_each_changed_region_and_exits_1(tmp_path, files):
    new = copy.deepcopy(BOOK)
    new["version"] = "2"
    new["rules"][0]["condition"]["value"] = 30
    files("old.json", BOOK)
    files("new.json", new)
    done = gate("diff", "old.json", "new.json", "--json", cwd=tmp_path, process=True)
    assert done.returncode == 1, done.stderr
    body = json.loads(done.stdout)
    assert body["verdict"] == "different" and body["exact"] is True and body["difference_count"] == 1
    region = body["differences"][0]
    assert region["old"]["rule_id"] == "block" and region["new"]["rule_id"] is None
    assert region["text"].startswith("discount: number in (25, 30]") and 25 < region["witness"]["discount"] <= 30
    text = gate("diff", "old.json", "new.json", cwd=tmp_path)
    assert text.returncode == 1 and "rule block (no/BLOCK/RULE_HIT) -> default outcome" in text.stdout


def test_equivalent_versions_exit_0(tmp_path, files):
    reordered = copy.deepcopy(BOOK)
    reordered["rules"].reverse()
    files("old.json", BOOK)
    files("new.json", reordered)
    done = gate("diff", "old.json", "new.json", "--json", cwd=tmp_path)
    assert done.returncode == 0 and json.loads(done.stdout)["verdict"] == "equivalent"
    assert "equivalent" in gate("diff", "old.json", "new.json", cwd=tmp_path).stdout
    renamed = copy.deepcopy(BOOK)
    renamed["rules"][0]["rule_id"] = "block_deep"
    files("renamed.json", renamed)
    assert gate("diff", "old.json", "renamed.json", cwd=tmp_path).returncode == 0
    assert gate("diff", "old.json", "renamed.json", "--compare", "rule", cwd=tmp_path).returncode == 1


def test_unproven_equivalence_exits_3(tmp_path, files):
    book = copy.deepcopy(BOOK)
    book["rules"][1]["condition"] = {"any": [{"field": "note", "operator": "contains", "value": f"w{i}"}
                                             for i in range(12)]}
    files("many.json", book)
    done = gate("diff", "many.json", "many.json", "--json", cwd=tmp_path)
    assert done.returncode == 3
    body = json.loads(done.stdout)
    assert body["verdict"] == "no_difference_found" and body["exact"] is False and body["inexact"][0]["field"] == "note"


def test_lint_exit_codes(tmp_path, files):
    files("clean.json", BOOK)
    done = gate("lint", "clean.json", "--json", cwd=tmp_path, process=True)
    assert done.returncode == 0, done.stdout
    body = json.loads(done.stdout)
    assert body["counts"]["warning"] == 0 and {f["code"] for f in body["findings"]} == {"falls_through"}
    assert gate("lint", "clean.json", "--strict", cwd=tmp_path).returncode == 1
    shadowed = copy.deepcopy(BOOK)
    shadowed["rules"].append({"rule_id": "hidden", "condition": {"field": "discount", "operator": "gt", "value": 30},
                              "outcome": outcome("yes", "APPROVE")})
    files("shadowed.json", shadowed)
    done = gate("lint", "shadowed.json", cwd=tmp_path)
    assert done.returncode == 1 and "shadowed: rule hidden can never match" in done.stdout


@pytest.mark.parametrize("command", ["lint", "diff", "flips"])
def test_invalid_input_exits_2_with_exact_paths_and_no_output_otherwise(tmp_path, files, command):
    bad = copy.deepcopy(BOOK)
    bad["rules"][1]["condition"]["all"][0]["operator"] = "matches"
    files("bad.json", bad)
    files("good.json", BOOK)
    files("facts.json", {"discount": 1})
    extra = {"lint": [], "diff": ["good.json"], "flips": ["facts.json"]}[command]
    done = gate(command, "bad.json", *extra, "--json", cwd=tmp_path)
    assert done.returncode == 2
    error = json.loads(done.stdout)["error"]
    assert error["problem"] == "invalid_rulebook" and error["code"] == "RULEBOOK_INVALID"
    assert error["errors"][0]["field"] == "rulebook.rules[1].condition.all[0].operator"
    text = gate(command, "bad.json", *extra, cwd=tmp_path)
    assert text.returncode == 2 and "rulebook.rules[1].condition.all[0].operator" in text.stderr


def test_unreadable_and_non_json_files_exit_2(tmp_path, files):
    files("broken.json", '{"schema_version": ')
    files("nan.json", '{"x": NaN}')
    for name, problem in (("missing.json", "unreadable"), ("broken.json", "invalid_json"), ("nan.json", "invalid_json")):
        done = gate("lint", name, "--json", cwd=tmp_path)
        assert done.returncode == 2 and json.loads(done.stdout)["error"]["problem"] == problem
    assert "gate rulebook: RULEBOOK_INPUT_INVALID: cannot read missing.json" in gate("lint", "missing.json", cwd=tmp_path, process=True).stderr


def test_flips_list_the_nearest_changes(tmp_path, files):
    files("book.json", BOOK)
    files("facts.json", {"discount": 22, "margin": 30})
    done = gate("flips", "book.json", "facts.json", "--json", cwd=tmp_path, process=True)
    assert done.returncode == 0, done.stderr
    flips = {(f["field"], f["change"]): f for f in json.loads(done.stdout)["flips"]}
    assert flips[("discount", "decrease")]["to"] == 20 and flips[("discount", "decrease")]["new"]["rule_id"] == "approve"
    assert flips[("discount", "increase")]["new"]["rule_id"] == "block"
    files("list.json", [1])
    assert gate("flips", "book.json", "list.json", cwd=tmp_path).returncode == 2


def test_lint_prints_each_distinct_finding_once_with_its_regions(tmp_path):
    """Issue 45, item 10: the current refund_approval has 13 findings, seven of them the same
    fall-through line once per region. The text prints that line once with its count, then each
    region with a fact set inside it; `--json` keeps every finding as the engine gave it."""
    book = str(Path(__file__).resolve().parents[2] / "gate" / "data" / "rulebooks" / "refund-approval-2026-08-01.json")
    body = json.loads(gate("lint", book, "--json", cwd=tmp_path).stdout)
    falls = [finding for finding in body["findings"] if finding["code"] == "falls_through"]
    assert len(body["findings"]) == 13 and len(falls) == 7
    text = gate("lint", book, cwd=tmp_path).stdout.splitlines()
    heads = [line for line in text if not line.startswith(" ")][1:]
    assert len(heads) == 7 and heads[-1] == ("info    falls_through (7 regions): inputs here match no rule and get "
                                             "the default outcome")
    assert sum("falls_through" in line for line in text) == 1
    regions = text[text.index(heads[-1]) + 1:]
    assert [line.split(" ", 1)[0] for line in (r.strip() for r in regions)] == ["where", "e.g."] * 7
    assert [line.strip()[len("where "):] for line in regions[::2]] == [finding["text"] for finding in falls]
