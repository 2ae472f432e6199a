"""`gate verify` on a machine that has only the core installed: a fresh virtualenv with this
checkout's wheel installed with no extras, so no Flask, SQLAlchemy, Polars or Panel exist there.

The wheel is built as tests/test_wheel.py builds it (`pip wheel --no-build-isolation`, C extensions
compiled) and installed with its core dependencies by this interpreter's pip (`pip --python`): what
`pip install .` does, without the build's isolated environment and the new environment's own pip
(setup 13.9 s -> 9.1 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.test_wheel import _build_wheel

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def core_only_env(tmp_path_factory):
    base = tmp_path_factory.mktemp("core-only")
    target = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True, timeout=120)
    wheel = _build_wheel(base)
    # Without PYTHONPATH: the checkout on it would read as decision-gate already installed.
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(target / "bin" / "python"), "install",
                           "--quiet", str(wheel)], capture_output=True, text=True, timeout=600,
                          env={k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    if done.returncode != 0:
        pytest.fail("core-only install failed:\n" + done.stdout[-2000:] + done.stderr[-2000:])
    return target


def test_packet_verifies_with_only_the_core(core_only_env, client, api_key, sample_request, tmp_path):
    python = core_only_env / "bin" / "python"
    for module in ("flask", "sqlalchemy", "polars", "panel", "api.app"):
        probe = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, cwd=tmp_path)
        assert probe.returncode != 0, f"{module} should not be installed"
    records = [client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json for _ in range(3)]
    record = records[1]
    client.post(f"/api/decision/{record['decision_id']}/outcome", headers={"x-api-key": api_key},
                json={"outcome_status": "succeeded"})
    packet = client.get(f"/api/decision/{record['decision_id']}/packet", headers={"x-api-key": api_key}).json
    (tmp_path / "packet.json").write_text(json.dumps(packet))
    (tmp_path / "record.json").write_text(json.dumps(record))
    (tmp_path / "keys.json").write_text(json.dumps(client.get("/api/decision/receipt-keys").json))
    gate = str(core_only_env / "bin" / "gate")
    for exported in ("packet.json", "record.json"):
        done = subprocess.run([gate, "verify", exported, "--key-registry", "keys.json"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    packet["outcome_records"][0]["outcome_status"] = "failed"
    (tmp_path / "tampered.json").write_text(json.dumps(packet))
    done = subprocess.run([gate, "verify", "tampered.json", "--key-registry", "keys.json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "outcome_records[0]" in done.stdout
