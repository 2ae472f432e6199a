"""The notebooks once the demo has been used (issue 45, item 4): after decides the history's newest
flips have no outcome yet, so a frame built from the listed flips sees only nulls in its first
hundred rows and then a `pending`; `scripts/notebooks` must still run `migration_impact`, and a
notebook that fails must say which notebook, which cell and why."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gate.clock import FixedClock
from gate.keys.config import SigningSetup
from gate.ledger import Ledger
from gate.rulebook.analysis import semantic_diff
from gate.services.decide import Caller
from gate.services.lifecycle import KINDS
from gate.services.root import decision_services
from tests.demo_support import GATE, build_demo_home, gate_env, require_bootstrapped_venv
from workbench.demo.seed import _receipt_body, _request
from workbench.migration.run import dry_run
from workbench.notebooks.run import execute
from workbench.notebooks.support import NotebookPaths

ROOT = Path(__file__).resolve().parents[2]
RULEBOOKS = ROOT / "gate" / "data" / "rulebooks"
pytestmark = [pytest.mark.notebook, pytest.mark.slow]


class _Clock(FixedClock):
    def set(self, moment: datetime) -> None:
        self._current = moment


def _decide_flips(home: Path, count: int, pending: int) -> None:
    """`count` refund_approval decides in scope demo after the seeded history, each in a region
    where the notebook's draft decides otherwise than the current version; the first `pending`
    (approved ones) are executed with a `pending` outcome, the newest have no outcome yet."""
    current = json.loads((RULEBOOKS / "refund-approval-2026-08-01.json").read_text())
    draft = json.loads((RULEBOOKS / "refund-approval.json").read_text())
    differences = [d for d in semantic_diff(current, draft).to_json()["differences"]
                   if d["old"]["decision"] != d["new"]["decision"]]
    approved = [d["witness"] for d in differences if d["old"]["decision"] == "yes"]
    witnesses = [d["witness"] for d in differences]
    assert approved, "the current version approves some of what the notebook's draft does not"
    ledger = Ledger(f"sqlite:///{home / 'gate.db'}")
    clock = _Clock(datetime(2026, 11, 20, tzinfo=UTC))
    signing = SigningSetup.load(home / "signing-keys.json", None, "hmac")
    core = decision_services(ledger, signing, clock=clock, releases=False)
    service, lifecycle = core.decisions, core.lifecycle
    caller = Caller("key_after_use", "demo", "growth", 1000, 10_000_000)
    try:
        for index in range(count):
            clock.set(datetime(2026, 11, 20, tzinfo=UTC) + timedelta(minutes=index))
            facts = (approved if index < pending else witnesses)[index % len(approved if index < pending else witnesses)]
            record = service.decide(caller, _request("refund_approval", copy.deepcopy(current), copy.deepcopy(facts),
                                                     900_000 + index)).record
            for kind, status in (("execution", "executed"), ("outcome", "pending")) if index < pending else ():
                lifecycle.record(KINDS[kind], scope="demo", decision_id=record["decision_id"], record=record,
                                 body=_receipt_body(kind, status, record, "refund_approval"), idempotency_key=None)
    finally:
        ledger.dispose()


@pytest.fixture(scope="module")
def used_demo(tmp_path_factory):
    home = build_demo_home(tmp_path_factory.mktemp("used") / "home")["home"]
    _decide_flips(home, 130, 20)
    subprocess.run([GATE, "export", "--out", str(home / "refreshed")], env=gate_env(home), check=True,
                   capture_output=True, timeout=600)
    return home


def test_the_used_dataset_lists_a_pending_outcome_after_a_hundred_without_one(used_demo):
    current = json.loads((RULEBOOKS / "refund-approval-2026-08-01.json").read_text())
    draft = dict(json.loads((RULEBOOKS / "refund-approval.json").read_text()), version="2026-12-01")
    listed = dry_run(draft, "refund_approval", scope="demo", dataset=used_demo / "refreshed", baseline=current,
                     created_at="2026-12-01T00:00:00.000Z").result["flips"]["listed"]
    statuses = [row["outcome_status"] for row in listed]
    assert statuses[:100] == [None] * 100 and "pending" in statuses[100:]


def test_scripts_notebooks_runs_migration_impact_after_use(used_demo, tmp_path):
    # scripts/notebooks runs scripts/bootstrap, which reinstalls this checkout into its .venv when the
    # venv's stamp names other install inputs: refuse instead, as test_notebook_command does.
    require_bootstrapped_venv(ROOT)
    env = {key: value for key, value in os.environ.items() if not key.startswith("GATE_")}
    env.update(GATE_DATASET=str(used_demo / "refreshed"), GATE_HOME=str(tmp_path / "home"),
               GATE_SIGNING_KEY_FILE=str(used_demo / "signing-keys.json"))  # the key that signed the export
    env.pop("PYTHONPATH", None)
    done = subprocess.run([str(ROOT / "scripts" / "notebooks"), "--only", "migration_impact"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok migration_impact" in done.stdout


def test_a_failing_notebook_names_its_cell_and_the_exception(tmp_path):
    source = tmp_path / "broken.py"
    source.write_text("# %%\nx = 1\n\n# %% [markdown]\n# text\n\n# %%\n# a comment first\n"
                      "import polars as pl\npl.DataFrame([{'a': None}] * 100 + [{'a': 'pending'}])\n")
    paths = NotebookPaths(root=ROOT, home=tmp_path, dataset=str(tmp_path), rulebooks=RULEBOOKS, output=tmp_path)
    target, error, _ = execute(source, paths, 120)
    assert target.exists()
    assert error.startswith("cell 3 of 3 (import polars as pl): ComputeError: could not append value: \"pending\"")
