"""Issue 52, defect 3, from the shell: `gate keys create --holder` states who a key belongs to,
`gate keys list` shows it, a key that may act on production or governance cannot be created
without one, and a key of no stated holder (as every key made before holders) is its own,
`key:<key_id>`. Run as subprocesses of the real entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

GATE = str(Path(sys.executable).parent / "gate")
ANN = "person:https://id.example#ann"


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60)


def _listed(env: dict[str, str]) -> list[dict]:
    done = run(["keys", "list", "--json"], env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_key_is_created_for_its_holder_and_listed_with_it(gate_env):
    made = run(["keys", "create", "--scope", "acme", "--permissions", "approve", "--holder", ANN, "--json"], gate_env)
    assert made.returncode == 0, made.stderr
    first = json.loads(made.stdout)
    assert (first["holder"], first["permissions"]) == (ANN, "decide,approve")
    second = json.loads(run(["keys", "create", "--scope", "acme", "--permissions", "resolve", "--holder", ANN,
                             "--json"], gate_env).stdout)
    plain = json.loads(run(["keys", "create", "--scope", "acme", "--json"], gate_env).stdout)
    assert plain["holder"] == f"key:{plain['key_id']}"  # decide only, none stated: its own holder
    listed = {row["key_id"]: row["holder"] for row in _listed(gate_env)}
    assert listed == {first["key_id"]: ANN, second["key_id"]: ANN, plain["key_id"]: f"key:{plain['key_id']}"}
    text = run(["keys", "list"], gate_env).stdout.splitlines()
    assert [line.rsplit("  ", 1)[-1] for line in text] == [f"holder={ANN}", f"holder={ANN}",
                                                            f"holder=key:{plain['key_id']}"]
    shown = run(["keys", "create", "--scope", "acme", "--permissions", "admin", "--holder", "service:deploy"], gate_env)
    assert shown.returncode == 0 and "holder service:deploy" in shown.stdout


@pytest.mark.parametrize("permissions", ["release", "approve", "resolve", "admin", "publish,release"])
def test_a_key_that_acts_on_production_or_governance_names_its_holder(gate_env, permissions):
    refused = run(["keys", "create", "--scope", "acme", "--permissions", permissions, "--json"], gate_env)
    assert refused.returncode != 0 and refused.stdout == ""
    assert refused.stderr.startswith("gate: --holder is required for a key with "), refused.stderr
    assert _listed(gate_env) == []  # nothing was created


@pytest.mark.parametrize("holder", ["ann", "key:key_0123456789ab", "person:ann", "person:#ann", "service:",
                                    "operator:", "guardrail", "service:a\nb", "service:" + "x" * 600])
def test_a_holder_that_is_no_person_service_or_operator_is_refused(gate_env, holder):
    refused = run(["keys", "create", "--scope", "acme", "--permissions", "approve", "--holder", holder], gate_env)
    assert refused.returncode != 0 and refused.stderr.startswith("gate: --holder: "), refused.stderr
    assert _listed(gate_env) == []
