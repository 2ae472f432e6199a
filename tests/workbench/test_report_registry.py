"""A new report engine is its engine, one registry entry, its test and its doc (issue 19).

The entry below is what a new report adds to `gate/reports/registry.py`: a name, its own
envelope, its parameters and its engine (by reference, `module:function`). It is installed at interpreter start (a
`sitecustomize` module on PYTHONPATH, as if the entry were in the file) of real processes, and
everything else must pick it up with no other file touched: `gate report` (choices, parameters,
text, JSON), the HTTP route with its parameter refusals and its 401 code, the OpenAPI document,
and the workbench's Overview (its store and its page). Each of them builds the report through
the one report service (`workbench.services.reports.ReportService`, issue 46): the entry's spy
records every kind that service builds, and each shell's run must have built the new kind there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gate.protocol.report_envelopes import Envelope, verify
from tests.workbench.ledger_support import LedgerWriter, at
from workbench.reports.textsafe import md_cell, md_text

GATE = str(Path(sys.executable).parent / "gate")
POLICY = "pricing_exception"
VOLUME = Envelope("volume", "decision_volume_report_version", "decision_volume_report_v1", "volume_hash")

ENTRY = textwrap.dedent('''
    import polars as pl

    from gate.protocol.report_envelopes import Envelope
    from gate.reports import registry


    def volume(frames, params, cohort):
        """Decisions per verdict: the whole of a new report's engine."""
        counts = frames.decisions.group_by("verdict").agg(pl.len().alias("n")).collect()
        by_verdict = {row["verdict"]: row["n"] for row in counts.iter_rows(named=True)}
        return {"decision_count": sum(by_verdict.values()), "by_verdict": dict(sorted(by_verdict.items())),
                "sample": {"decisions_considered": sum(by_verdict.values())}}


    registry.REPORTS["volume"] = registry.ReportKind(
        "volume", Envelope("volume", "decision_volume_report_version", "decision_volume_report_v1", "volume_hash"),
        "Decision volume per verdict.", ("policy_version", "limit"), engine="sitecustomize:volume")
    registry.NAMES = tuple(registry.REPORTS)

    # The test's spy (not part of an entry): each kind the report service builds, one line each.
    import os

    from workbench.services import reports as service

    built = service.ReportService.build


    def spied(kind, *args, **kwargs):
        with open(os.environ["REPORT_SPY"], "a", encoding="utf-8") as spy:
            spy.write(kind.name + "\\n")
        return built(kind, *args, **kwargs)


    service.ReportService.build = staticmethod(spied)
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
    return {**os.environ, **gate_env, "PYTHONPATH": os.pathsep.join([str(site), str(Path.cwd())]),
            "REPORT_SPY": str(tmp_path / "spy.txt")}


def run(args, env):
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=180, check=False)


def built_by_the_service(env) -> list[str]:
    """The kinds the report service built in the processes run with `env` so far (the spy's lines)."""
    spy = Path(env["REPORT_SPY"])
    return spy.read_text(encoding="utf-8").split() if spy.exists() else []


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
    assert built_by_the_service(with_entry) == ["volume", "volume"]  # the JSON and the text, not the refusal


def test_the_api_and_its_contract_serve_a_kind_added_by_its_registry_entry_alone(with_entry):
    script = textwrap.dedent(f'''
        import json
        from gate_cli.served_app import create_app
        from gate.settings import Settings
        from gate_cli.keys_cmd import create_key

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
    assert built_by_the_service(with_entry) == ["volume"]  # the 200; the 400 and the 401 build nothing


def test_the_workbench_overview_shows_a_kind_added_by_its_registry_entry_alone(with_entry, tmp_path):
    """The Overview's store builds every registry kind through the report service, and its page
    shows a kind it has no code for: the same sealed report `gate report --dataset` prints."""
    dataset = tmp_path / "dataset"
    exported = run([GATE, "export", "--out", str(dataset)], with_entry)
    assert exported.returncode == 0, exported.stderr
    script = textwrap.dedent(f'''
        import json
        from gate.settings import Settings
        from gate_cli.workbench_cmd import build_store
        from workbench.app.pages.overview import more_reports_markdown
        from workbench.app.state.overview import OverviewState

        store = build_store(Settings.from_env(), {str(dataset)!r})
        state = OverviewState(store, scope="tenant_a", policy_id="{POLICY}")
        print(json.dumps({{"more": state.more, "cards": sorted(state.reports),
                          "markdown": more_reports_markdown(state.more)}}))
        store.ledger.dispose()
    ''')
    shown = run([sys.executable, "-c", script], with_entry)
    assert shown.returncode == 0, shown.stderr
    page = json.loads(shown.stdout.splitlines()[-1])
    assert built_by_the_service(with_entry).count("volume") == 1
    assert page["cards"] == ["anomalies", "benchmarks", "confidence", "effectiveness"]
    assert list(page["more"]) == ["volume"]  # the hold report has its own place on the page
    report = page["more"]["volume"]
    assert verify(VOLUME, report) and report["decision_count"] == 9 and report["source"]["trust"] == "signed"
    printed = run([GATE, "report", "volume", "--policy", POLICY, "--scope", "tenant_a", "--dataset", str(dataset),
                   "--json"], with_entry)
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout) == report
    lines = page["markdown"].splitlines()
    assert lines[:2] == ["#### Report: volume", md_text("Decision volume per verdict.")]
    assert f"| {md_cell('decision_count')} | 9 |" in lines
    assert f"| {md_cell('volume_hash')} | {report['volume_hash']} |" in lines


def _volume(frames, params, cohort):
    """The entry's engine, in this process."""
    import polars as pl

    counts = frames.decisions.group_by("verdict").agg(pl.len().alias("n")).collect()
    by_verdict = {row["verdict"]: row["n"] for row in counts.iter_rows(named=True)}
    return {"decision_count": sum(by_verdict.values()), "by_verdict": dict(sorted(by_verdict.items())),
            "sample": {"decisions_considered": sum(by_verdict.values())}}


def test_under_a_cluster_a_kind_with_its_own_engine_reads_its_rows_here(tmp_path, monkeypatch):
    """`gate report KIND --dataset D --limit all --cluster A`: the cluster computes the built-in
    engines' partials (its frames carry no rows), so a kind with its own engine is built from the
    rows in this process, never from the cluster's empty frames: the same report either way."""
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from gate.reports import registry
    from gate.reports.params import ReportParams
    from workbench.services.exports import ExportService
    from workbench.services.reports import ReportService

    kind = registry.ReportKind("volume", VOLUME, "Decision volume per verdict.", ("policy_version", "limit"),
                               engine=f"{__name__}:_volume")
    monkeypatch.setitem(registry.REPORTS, "volume", kind)
    writer = LedgerWriter(f"sqlite:///{tmp_path / 'gate.db'}", tmp_path / "keys.json")
    for i in range(5):
        writer.decide("tenant_a", at(1, 1 + i, ms=i), discount=10 + i)
    writer.close()
    signing = SigningSetup.load(tmp_path / "keys.json", None, "hmac")
    ledger = Ledger(f"sqlite:///{tmp_path / 'gate.db'}")
    try:
        ExportService(signing).begin().run(ledger, str(tmp_path / "dataset"))
    finally:
        ledger.dispose()
    service, whole = ReportService(), ReportParams(limit=None)
    here = service.from_dataset(kind, tmp_path / "dataset", POLICY, whole, scope="tenant_a",
                                trust=signing.trust_anchors())
    assert verify(VOLUME, here) and here["decision_count"] == 5
    client = object()  # a Dask client the kind must never hand its frames to
    assert service.from_dataset(kind, tmp_path / "dataset", POLICY, whole, scope="tenant_a",
                                trust=signing.trust_anchors(), cluster=client) == here
