"""A new report engine is its engine, one registry entry, its test and its doc (issue 19).

The entry below is what a new report adds to `workbench/reports/registry.py`: a name, its own
envelope, its parameters and its engine. It is installed at interpreter start (a
`sitecustomize` module on PYTHONPATH, as if the entry were in the file) of real processes, and
everything else must pick it up with no other file touched: `gate report` (choices, parameters,
text, JSON), the HTTP route with its parameter refusals and its 401 code, and the OpenAPI
document.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gate.protocol.report_envelopes import ReportKind as Envelope
from gate.protocol.report_envelopes import verify
from tests.workbench.ledger_support import LedgerWriter, at

GATE = str(Path(sys.executable).parent / "gate")
POLICY = "pricing_exception"
VOLUME = Envelope("volume", "decision_volume_report_version", "decision_volume_report_v1", "volume_hash")

ENTRY = textwrap.dedent('''
    import polars as pl

    from gate.protocol.report_envelopes import ReportKind as Envelope
    from workbench.reports import registry


    def volume(frames, params, cohort):
        """Decisions per verdict: the whole of a new report's engine."""
        counts = frames.decisions.group_by("verdict").agg(pl.len().alias("n")).collect()
        by_verdict = {row["verdict"]: row["n"] for row in counts.iter_rows(named=True)}
        return {"decision_count": sum(by_verdict.values()), "by_verdict": dict(sorted(by_verdict.items())),
                "sample": {"decisions_considered": sum(by_verdict.values())}}


    registry.REPORTS["volume"] = registry.ReportKind(
        "volume", Envelope("volume", "decision_volume_report_version", "decision_volume_report_v1", "volume_hash"),
        "Decision volume per verdict.", ("policy_version", "limit"), engine=volume)
    registry.NAMES = tuple(registry.REPORTS)
''')


@pytest.fixture
def with_entry(gate_env, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(ENTRY, encoding="utf-8")
    writer = LedgerWriter(gate_env["GATE_DATABASE_URL"], tmp_path / "writer-keys.json")
    for i in range(9):
        writer.decide("tenant_a", at(1 + i % 3, 1 + i, ms=i), discount=10 + i % 4, margin=15 + i % 3 * 8)
    writer.close()
    return {**os.environ, **gate_env, "PYTHONPATH": os.pathsep.join([str(site), str(Path.cwd())])}


def run(args, env):
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=180, check=False)


def test_gate_report_serves_a_kind_added_by_its_registry_entry_alone(with_entry):
    done = run([GATE, "report", "volume", "--policy", POLICY, "--scope", "tenant_a", "--json"], with_entry)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["decision_volume_report_version"] == "decision_volume_report_v1"
    assert verify(VOLUME, report)
    assert report["decision_count"] == 9 and report["parameters"] == {"policy_version": None, "limit": 1000}
    text = run([GATE, "report", "volume", "--policy", POLICY, "--scope", "tenant_a"], with_entry)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines()[-1] == f"volume_hash {report['volume_hash']}"
    refused = run([GATE, "report", "volume", "--policy", POLICY, "--scope", "tenant_a", "--threshold", "0.5"],
                  with_entry)
    assert refused.returncode != 0 and "threshold" in refused.stderr


def test_the_api_and_its_contract_serve_a_kind_added_by_its_registry_entry_alone(with_entry):
    script = textwrap.dedent(f'''
        import json
        from api.app import create_app
        from gate.settings import Settings
        from gate_cli.main import create_key

        settings = Settings.from_env()
        key = create_key(settings, "tenant_a", "growth", 10_000, None)["api_key"]
        client = create_app(settings).test_client()
        base = "/api/decision/policies/{POLICY}/volume"
        ok = client.get(base, headers={{"x-api-key": key}})
        bad = client.get(base + "?threshold=0.5", headers={{"x-api-key": key}})
        anonymous = client.get(base)
        spec = client.get("/openapi.json").json
        print(json.dumps({{"ok": [ok.status_code, ok.json], "bad": [bad.status_code, bad.json],
                          "anonymous": [anonymous.status_code, anonymous.json],
                          "path": spec["paths"].get("/api/decision/policies/{{policy_id}}/volume")}}))
    ''')
    done = run([sys.executable, "-c", script], with_entry)
    assert done.returncode == 0, done.stderr
    answers = json.loads(done.stdout.splitlines()[-1])
    status, report = answers["ok"]
    assert status == 200 and verify(VOLUME, report) and report["decision_count"] == 9
    assert answers["bad"][0] == 400 and answers["bad"][1]["error"] == "REQUEST_INVALID"
    assert answers["anonymous"][0] == 401
    assert answers["anonymous"][1]["error"] == "SVC_POLICY_VOLUME_UNAUTHORIZED"
    parameters = {p["name"] for p in answers["path"]["get"]["parameters"]}
    assert {"policy_version", "limit"} <= parameters and "threshold" not in parameters
