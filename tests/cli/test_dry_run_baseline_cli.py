"""`gate dry-run --baseline`: the draft against what production runs (docs/dry-run.md), through the
CLI over the demo ledger a newcomer gets (`gate demo seed`, `gate export`): refund_approval's history
mixes two versions, so the draft that is the current version changes nothing against it and
changes decisions only against the history."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.demo_support import GATE, build_demo_home, gate_env

CURRENT = "gate/data/rulebooks/refund-approval-2026-08-01.json"  # the demo's newest refund_approval version
EARLIER = "gate/data/rulebooks/refund-approval.json"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_home(tmp_path_factory.mktemp("demo") / "home")


def dry_run(demo, tmp_path, *extra):
    args = [GATE, "dry-run", "--rulebook-id", "refund_approval", "--draft", CURRENT, "--dataset",
            str(demo["dataset"]), "--out", str(tmp_path / "out"), *extra]
    return subprocess.run(args, env=gate_env(demo["home"]), capture_output=True, text=True, timeout=600)


def test_the_current_version_against_itself_changes_nothing(demo, tmp_path):
    done = dry_run(demo, tmp_path, "--scope", "demo", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["baseline"]["kind"] == "version" and summary["baseline"]["version"] == "2026-08-01"
    assert summary["baseline"]["source"] == "newest inline version (no release)"
    assert summary["decisions_evaluated"] > 0 and summary["decisions_changed"] == 0
    assert summary["impact"]["failures_caught"]["count"] == summary["impact"]["successes_lost"]["count"] == 0
    assert all(t["from"] == t["to"] for t in summary["transitions"] if t["count"])
    manifest = json.loads((tmp_path / "out" / "migration.json").read_text())
    assert manifest["dry_run"]["baseline"] == summary["baseline"]
    verified = subprocess.run([GATE, "dry-run", "--verify", str(tmp_path / "out"), "--draft", CURRENT, "--dataset",
                               str(demo["dataset"])], env=gate_env(demo["home"]), capture_output=True, text=True,
                              timeout=300)
    assert verified.returncode == 0 and "VERIFIED" in verified.stdout, verified.stdout + verified.stderr
    text = dry_run(demo, tmp_path / "text", "--scope", "demo")
    assert text.returncode == 0, text.stderr
    assert "compared with version 2026-08-01 (newest inline version (no release)) replayed over the same history" \
        in text.stdout and " 0 change verdict" in text.stdout


def test_the_history_is_the_second_named_view(demo, tmp_path):
    done = dry_run(demo, tmp_path, "--scope", "demo", "--baseline", "history", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["baseline"]["kind"] == "history" and summary["decisions_changed"] > 0
    earlier = dry_run(demo, tmp_path / "file", "--scope", "demo", "--baseline", EARLIER, "--json")
    assert earlier.returncode == 0, earlier.stderr
    against_file = json.loads(earlier.stdout)
    assert against_file["baseline"]["kind"] == "version" and against_file["baseline"]["version"] == "2026-05-01"
    assert against_file["baseline"]["source"] == f"file {EARLIER}" and against_file["decisions_changed"] > 0


@pytest.mark.parametrize(("extra", "code"), [
    (["--baseline", "current"], "USAGE"),  # no --scope: which scope's version?
    (["--scope", "nowhere", "--baseline", "current"], "BASELINE_INVALID"),
    (["--scope", "demo", "--baseline", "missing.json"], "BASELINE_INVALID"),
])
def test_a_baseline_that_cannot_be_found_is_refused_and_nothing_is_written(demo, tmp_path, extra, code):
    done = dry_run(demo, tmp_path, *extra, "--json")
    assert done.returncode == 2, done.stdout + done.stderr
    assert json.loads(done.stderr)["error"] == code
    assert not (tmp_path / "out").exists()
