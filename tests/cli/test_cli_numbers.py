"""Numbers on the terminal at the precision the author wrote: `gate rulebook
flips|lint|diff` over a rulebook whose thresholds make the analysis's float arithmetic noisy
(500.00000000000006, 0.39999999999999997), and `gate report --limit all` (never `limit=None`).
`--json` keeps the exact values; the text says the same thing readably. What is checked is the
text the commands print, so they run in this process (`tests.cli_in_process`); the entry point's
subprocess tests are test_report_cli.py's and test_rulebook_cli.py's."""

from __future__ import annotations

import json
import math
import re

import pytest

from gate.rulebook.analysis.common import evaluator, label_of
from tests.cli.test_report_cli import POLICY, seeded  # noqa: F401 - `seeded` is a fixture
from tests.cli_in_process import gate_in_process as gate

# A number printed with float noise: 12 or more decimals (no rulebook here writes that many).
NOISE = re.compile(r"\d\.\d{12,}")


def _rule(rule_id: str, priority: int, field: str, operator: str, value, decision: str) -> dict:
    verdict = {"no": "BLOCK", "review": "REVIEW", "yes": "APPROVE"}[decision]
    return {"rule_id": rule_id, "priority": priority, "condition": {"field": field, "operator": operator, "value": value},
            "outcome": {"decision": decision, "verdict": verdict, "action": "act", "reason_code": rule_id.upper()}}


def _book(version: str, low: float, low_operator: str = "lte") -> dict:
    return {"schema_version": "rulebook_v1", "rulebook_id": "noisy", "version": version,
            "input_schema": {"required": ["score", "amount"],
                             "properties": {"score": {"type": "number"}, "amount": {"type": "number"}}},
            "rules": [_rule("low", 30, "score", low_operator, low, "no"), _rule("high", 20, "score", "gte", 0.7, "no"),
                      _rule("big", 10, "amount", "gt", 500, "review")],
            "default_outcome": {"decision": "yes", "verdict": "APPROVE", "action": "ok", "reason_code": "OK"}}


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, body in (("v1.json", _book("1", 0.1)), ("v2.json", _book("2", 0.2, "lt")),
                       ("facts.json", {"score": 0.3, "amount": 400})):
        paths[name] = tmp_path / name
        paths[name].write_text(json.dumps(body))
    return paths


def test_flips_past_an_open_threshold_read_just_above_it(files, gate_env):
    text = gate(["rulebook", "flips", str(files["v1.json"]), str(files["facts.json"])], gate_env)
    assert text.returncode == 0, text.stderr
    assert "amount: 400 -> just above 500 (increase)" in text.stdout
    assert "score: 0.3 -> 0.7 (increase)" in text.stdout and "score: 0.3 -> 0.1 (decrease)" in text.stdout
    assert not NOISE.search(text.stdout), text.stdout
    exact = json.loads(gate(["rulebook", "flips", str(files["v1.json"]), str(files["facts.json"]), "--json"],
                            gate_env).stdout)
    amount = next(flip for flip in exact["flips"] if flip["field"] == "amount")
    assert amount["to"] == math.nextafter(500, math.inf) and amount["threshold"] == {"value": 500, "inclusive": False}


def _check_witnesses(text: str, items: list[dict], runs) -> None:
    """Every printed witness is a real one: it gives the finding's labels under each rulebook."""
    printed = [json.loads(line.split("e.g. ", 1)[1]) for line in text.splitlines() if "e.g. " in line]
    assert len(printed) == len(items)
    for shown, item in zip(printed, items, strict=True):
        for run, key in runs:
            assert label_of(run, shown) == label_of(run, item["witness"]), (shown, item["witness"], key)


def test_lint_and_diff_witnesses_are_written_at_the_rulebooks_precision(files, gate_env):
    v1, v2 = str(files["v1.json"]), str(files["v2.json"])
    lint = gate(["rulebook", "lint", v1], gate_env)
    assert lint.returncode == 0, lint.stderr
    assert '"score": 0.4}' in lint.stdout and '"score": 0.7}' in lint.stdout
    assert not NOISE.search(lint.stdout), lint.stdout
    body = json.loads(gate(["rulebook", "lint", v1, "--json"], gate_env).stdout)
    assert any(NOISE.search(json.dumps(f["witness"])) for f in body["findings"])  # the exact values stay in --json
    _check_witnesses(lint.stdout, body["findings"], [(evaluator(json.loads(files["v1.json"].read_text())), "v1")])

    diff = gate(["rulebook", "diff", v1, v2], gate_env)
    assert diff.returncode == 1, diff.stderr
    assert "score: number in (0.1, 0.2)" in diff.stdout and not NOISE.search(diff.stdout), diff.stdout
    body = json.loads(gate(["rulebook", "diff", v1, v2, "--json"], gate_env).stdout)
    assert any(NOISE.search(json.dumps(item["witness"])) for item in body["differences"])
    runs = [(evaluator(json.loads(files[name].read_text())), name) for name in ("v1.json", "v2.json")]
    _check_witnesses(diff.stdout, body["differences"], runs)


def test_limit_all_is_printed_as_all(seeded, tmp_path):  # noqa: F811 - the imported fixture
    out = tmp_path / "ds"
    assert gate(["export", "--out", str(out)], seeded).returncode == 0
    base = ["--policy", POLICY, "--scope", "tenant_a", "--dataset", str(out), "--min-sample", "3"]
    every = gate(["report", "effectiveness", *base, "--limit", "all"], seeded)
    assert every.returncode == 0, every.stderr
    assert "limit=all" in every.stdout and "None" not in every.stdout
    confidence = gate(["report", "confidence", *base], seeded)
    assert confidence.returncode == 0, confidence.stderr
    assert "verdict=any  action=any  limit=1000  min_sample=3" in confidence.stdout
    assert "None" not in confidence.stdout
    anomalies = gate(["report", "anomalies", *base, "--threshold", "0.1"], seeded)
    assert "threshold=0.1 " in anomalies.stdout and not NOISE.search(anomalies.stdout)
