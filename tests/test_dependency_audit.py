"""`pip-audit` over the installed environment: no dependency with a known vulnerability.

The audit needs the vulnerability database (PyPI's JSON API). Where it cannot be reached (an
offline mirror, no network) pip-audit reports every dependency as skipped; the test then skips
with that reason instead of failing, so CI is not flaky, and fails on any reported vulnerability.
`scripts/audit` runs the same audit by hand.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

PIP_AUDIT = Path(sys.executable).parent / "pip-audit"
# What pip-audit asks for each dependency (its default service: PyPI's JSON API, by name and
# version), asked once for pip-audit itself: where that does not answer 200 (no network, or a
# registry mirror that serves packages but not that API), no dependency can be audited, so the
# test skips at once instead of after one failed query per dependency (about 20 s).
PROBE = "https://pypi.org/pypi/pip-audit/{version}/json"


def _database_unreachable() -> str | None:
    """Why the vulnerability database cannot be asked (None: it answers)."""
    probe = PROBE.format(version=importlib.metadata.version("pip-audit"))
    try:
        with urllib.request.urlopen(probe, timeout=10) as answer:
            return None if answer.status == 200 else f"{probe} answered {answer.status}"
    except (urllib.error.URLError, OSError) as exc:
        return f"{probe}: {exc}"


def test_installed_dependencies_have_no_known_vulnerabilities(tmp_path):
    assert PIP_AUDIT.exists(), "pip-audit is part of the dev extra; rerun scripts/bootstrap"
    unreachable = _database_unreachable()
    if unreachable is not None:
        pytest.skip(f"the vulnerability database cannot be reached: {unreachable}")
    report_path = tmp_path / "audit.json"
    command = [str(PIP_AUDIT), "--local", "--skip-editable", "--progress-spinner", "off", "--timeout", "15",
               "--format", "json", "--output", str(report_path)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired:
        pytest.skip("the vulnerability database did not answer within 240 s")
    if not report_path.exists():
        pytest.skip(f"pip-audit produced no report (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    dependencies = json.loads(report_path.read_text())["dependencies"]
    audited = [dep for dep in dependencies if "skip_reason" not in dep]
    if dependencies and not audited:
        pytest.skip("the vulnerability database cannot be reached: no dependency could be audited "
                    f"(first reason: {dependencies[0]['skip_reason']})")
    vulnerable = {dep["name"]: [vuln["id"] for vuln in dep["vulns"]] for dep in audited if dep.get("vulns")}
    assert not vulnerable, f"dependencies with known vulnerabilities: {vulnerable}"
    assert audited, "pip-audit found no installed dependency to audit"
