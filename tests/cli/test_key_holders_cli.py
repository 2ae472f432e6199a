"""Issue 52, defect 3, from the shell: `gate keys create --holder` states who a key belongs to,
`gate keys list` shows it, a key that may act on production or governance cannot be created
without one, and a key of no stated holder (as every key made before holders) is its own,
`key:<key_id>`. Creating and listing keys run as subprocesses of the real entry point; the
refusals and the grant chain's verification run the same command lines in this process
(`tests.cli_in_process`), forty subprocess start-ups fewer."""

from __future__ import annotations

import json
import os
import pwd
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_in_process import gate_in_process

GATE = str(Path(sys.executable).parent / "gate")
ANN = "person:https://id.example#ann"


def run(args: list[str], env: dict[str, str], process: bool = False) -> subprocess.CompletedProcess:
    if process:
        return subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    return gate_in_process(args, env)


def _listed(env: dict[str, str], process: bool = False) -> list[dict]:
    done = run(["keys", "list", "--json"], env, process)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_key_is_created_for_its_holder_and_listed_with_it(gate_env):
    made = run(["keys", "create", "--scope", "acme", "--permissions", "approve", "--holder", ANN, "--json"], gate_env,
               process=True)
    assert made.returncode == 0, made.stderr
    first = json.loads(made.stdout)
    assert (first["holder"], first["permissions"]) == (ANN, "decide,approve")
    second = json.loads(run(["keys", "create", "--scope", "acme", "--permissions", "resolve", "--holder", ANN,
                             "--json"], gate_env, process=True).stdout)
    plain = json.loads(run(["keys", "create", "--scope", "acme", "--json"], gate_env, process=True).stdout)
    assert plain["holder"] == f"key:{plain['key_id']}"  # decide only, none stated: its own holder
    listed = {row["key_id"]: row["holder"] for row in _listed(gate_env, process=True)}
    assert listed == {first["key_id"]: ANN, second["key_id"]: ANN, plain["key_id"]: f"key:{plain['key_id']}"}
    text = run(["keys", "list"], gate_env, process=True).stdout.splitlines()
    assert [line.rsplit("  ", 1)[-1] for line in text] == [f"holder={ANN}", f"holder={ANN}",
                                                            f"holder=key:{plain['key_id']}"]
    shown = run(["keys", "create", "--scope", "acme", "--permissions", "admin", "--holder", "service:deploy"], gate_env,
                process=True)
    assert shown.returncode == 0 and "holder service:deploy" in shown.stdout


@pytest.mark.parametrize("permissions", ["release", "approve", "resolve", "admin", "publish,release"])
def test_a_key_that_acts_on_production_or_governance_names_its_holder(gate_env, permissions):
    refused = run(["keys", "create", "--scope", "acme", "--permissions", permissions, "--json"], gate_env)
    assert refused.returncode != 0 and refused.stdout == ""
    assert refused.stderr.startswith("gate keys: CLI_REFUSED: --holder is required for a key with "), refused.stderr
    assert _listed(gate_env) == []  # nothing was created


@pytest.mark.parametrize("holder", ["ann", "key:key_0123456789ab", "person:ann", "person:#ann", "service:",
                                    "operator:", "guardrail", "service:a\nb", "service:" + "x" * 600])
def test_a_holder_that_is_no_person_service_or_operator_is_refused(gate_env, holder):
    refused = run(["keys", "create", "--scope", "acme", "--permissions", "approve", "--holder", holder], gate_env)
    assert refused.returncode == 2 and refused.stderr.startswith("gate keys: CLI_REFUSED: --holder: "), refused.stderr
    assert _listed(gate_env) == []


def test_a_key_that_acts_on_production_is_a_signed_grant_gate_verify_checks(gate_env, tmp_path):
    """Creating a key with release/approve/resolve/admin (and enabling one again) is an event of
    the scope's signed key chain naming the operator who did it; a plain decide key is not."""
    made = json.loads(run(["keys", "create", "--scope", "acme", "--permissions", "approve", "--holder", ANN,
                           "--json"], gate_env).stdout)
    plain = json.loads(run(["keys", "create", "--scope", "acme", "--json"], gate_env).stdout)
    assert (made["grant_seq"], plain["grant_seq"]) == (1, None)
    assert run(["keys", "disable", made["key_id"]], gate_env).returncode == 0
    assert run(["keys", "enable", made["key_id"]], gate_env).returncode == 0
    missing = run(["keys", "enable", "key_000000000000"], gate_env)
    assert missing.returncode == 2 and "no API key key_000000000000" in missing.stderr
    history = run(["keys", "history", "--scope", "acme"], gate_env)
    assert history.returncode == 0, history.stderr
    document = json.loads(history.stdout)
    login = pwd.getpwuid(os.getuid()).pw_name
    assert [(e["seq"], e["action"], e["api_key_id"], e["holder"], e["permissions"], e["actor"])
            for e in document["events"]] == [(1, "key_created", made["key_id"], ANN, "decide,approve",
                                              f"operator:{login}"),
                                             (2, "key_enabled", made["key_id"], ANN, "decide,approve",
                                              f"operator:{login}")]
    registry = tmp_path / "keys.json"
    registry.write_text(json.dumps({"keys": _registry(gate_env)}))
    (tmp_path / "grants.json").write_text(history.stdout)
    verified = run(["verify", str(tmp_path / "grants.json"), "--key-registry", str(registry)], gate_env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "VERIFIED (2 grants)" in verified.stdout
    first = document["events"][0]
    assert f"grant 1 {first['created_at']} key_created {made['key_id']} of {ANN} (decide,approve) by operator:{login}" \
        in verified.stdout
    document["events"][0]["holder"] = "service:someone-else"  # edited after the fact
    (tmp_path / "edited.json").write_text(json.dumps(document))
    edited = run(["verify", str(tmp_path / "edited.json"), "--key-registry", str(registry)], gate_env)
    assert edited.returncode == 1 and "grant event 1: event_hash does not match its content (tampered)" in edited.stdout
    (tmp_path / "cut.json").write_text(json.dumps({**json.loads(history.stdout), "events": document["events"][1:]}))
    cut = run(["verify", str(tmp_path / "cut.json"), "--key-registry", str(registry)], gate_env)
    assert cut.returncode == 1 and "grant event 1: seq 2, expected 1 (gap or reorder)" in cut.stdout
    unproven = run(["verify", str(tmp_path / "grants.json")], gate_env)
    assert unproven.returncode == 1 and "NOT PROVEN (no trusted key)" in unproven.stdout


def test_a_key_chain_cut_back_is_refused_and_fails_offline_against_the_checkpoint_log(gate_env, tmp_path):
    """Issue 64: the key chain is witnessed in the gate's checkpoint log beside the release, hold
    and governance chains. A writer of the database who deletes the newest grant is refused by the
    next grant and by `gate keys history` (CHAIN_INTEGRITY_FAILED, nothing written), and the chain
    cut back fails `gate verify --checkpoints` against a witness's copy of the log."""
    made = [json.loads(run(["keys", "create", "--scope", "acme", "--permissions", permissions, "--holder", holder,
                            "--json"], gate_env).stdout) for permissions, holder in
            (("approve", ANN), ("release", "service:deployer"))]
    assert [key["grant_seq"] for key in made] == [1, 2]
    history = run(["keys", "history", "--scope", "acme"], gate_env)
    assert history.returncode == 0, history.stderr
    log = Path(gate_env["GATE_HOME"]) / "checkpoints.jsonl"
    witness, registry = tmp_path / "witness.jsonl", tmp_path / "keys.json"
    witness.write_text(log.read_text())
    assert any(json.loads(line)["chain_id"].startswith("key_chain_") for line in witness.read_text().splitlines())
    registry.write_text(json.dumps({"keys": _registry(gate_env)}))
    document = json.loads(history.stdout)
    (tmp_path / "whole.json").write_text(history.stdout)
    (tmp_path / "cut.json").write_text(json.dumps({**document, "events": document["events"][:-1]}))
    checked = ["--key-registry", str(registry), "--checkpoints", str(witness)]
    whole = run(["verify", str(tmp_path / "whole.json"), *checked], gate_env)
    assert whole.returncode == 0 and "VERIFIED (2 grants)" in whole.stdout, whole.stdout + whole.stderr
    alone = run(["verify", str(tmp_path / "cut.json"), "--key-registry", str(registry)], gate_env)
    assert alone.returncode == 0, alone.stdout  # the chain alone cannot see its newest grant cut off
    cut = run(["verify", str(tmp_path / "cut.json"), *checked], gate_env)
    assert cut.returncode == 1 and "NOT VERIFIED" in cut.stdout, cut.stdout
    assert "checkpoint_log.size: the chain was cut back" in cut.stdout, cut.stdout

    with sqlite3.connect(gate_env["GATE_DATABASE_URL"].removeprefix("sqlite:///")) as db:
        db.execute("DELETE FROM release_events WHERE rulebook_id = '@api-keys' AND seq = 2")
    keys_before = _listed(gate_env)
    refused = run(["keys", "create", "--scope", "acme", "--permissions", "resolve", "--holder", ANN], gate_env)
    assert refused.returncode != 0 and "CHAIN_INTEGRITY_FAILED" in refused.stderr, refused.stderr
    assert _listed(gate_env) == keys_before  # nothing written: no key, no grant
    served = run(["keys", "history", "--scope", "acme"], gate_env)
    assert served.returncode != 0 and "CHAIN_INTEGRITY_FAILED" in served.stderr, served.stdout + served.stderr


def _registry(gate_env: dict[str, str]) -> list[dict]:
    """The receipt keys of the gate's keyring, as a key registry lists them."""
    from gate.keys.signing import load_keyring

    return load_keyring(Path(gate_env["GATE_SIGNING_KEY_FILE"])).registry_entries()
