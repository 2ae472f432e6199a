"""Issue 52, defect 3's last part, through HTTP and the command line: creating, enabling or
widening a key with `release`, `approve`, `resolve` or `admin` is a governed act. While the scope
requires approvals, such a grant made by the operator (`gate keys create/enable/grant`) is a
request of the one governed-change service (setting `api_keys`): the key authenticates nothing
until a second, distinct holder approves it (`POST /api/keys/grants/approvals`, `gate keys
approve`), never the requester with any of its keys. The scope's first such key is its bootstrap
and acts at once; without approvals required every grant acts at once, as before."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

from gate.chain.sealing import seal
from gate.settings import Settings
from gate_cli.keys_cmd import create_key
from tests.cli_in_process import gate_in_process
from tests.releases.support import ALL, Api, version

POLICY = "/api/decision/release-policy"
GRANTS = "/api/keys/grants"
ANN = "person:https://id.example#ann"
BOB = "person:https://id.example#bob"
MALLORY = "person:https://id.example#mallory"
OPERATOR = "operator:" + pwd.getpwuid(os.getuid()).pw_name
GATE = str(Path(sys.executable).parent / "gate")


def _key(gate_env, permissions: str, holder: str, scope: str = "tenant_a") -> dict:
    """A key made as `gate keys create` makes it, by this process's operator."""
    return create_key(Settings.from_env(gate_env), scope, "starter", 10_000, None, None, permissions, holder)


def _approve(client, api_key: str, request_seq: int):
    return client.post(f"{GRANTS}/approvals", json={"request_seq": request_seq}, headers={"x-api-key": api_key})


def _requiring_approvals(client, gate_env) -> tuple[Api, Api]:
    """Ann's key (every right; the scope's bootstrap), Bob's approve key, then approvals required."""
    ann = Api(client, _key(gate_env, ALL, ANN)["api_key"])
    bob = Api(client, _key(gate_env, "approve", BOB)["api_key"])
    assert ann.publish(version("v1")).status_code == 201
    assert client.patch(POLICY, json={"require_approval": True}, headers=ann.headers()).status_code == 200
    return ann, bob


def _unchanged(client, ann: Api, key: dict, before: dict) -> None:
    """A refusal changed nothing: the grants, the pending requests, the key still refused."""
    assert client.get(GRANTS, headers=ann.headers()).json == before
    still = client.get(POLICY, headers={"x-api-key": key["api_key"]})
    assert still.status_code == 403 and "waits for a second holder" in still.json["message"], still.json


def test_one_holder_cannot_make_itself_a_second_approver(client, gate_env):
    """Ann asks to turn approvals off; the operator makes a key stated for someone else with
    `approve` (`admin` too): it is a pending request, the key approves nothing, and the key's
    approval by a second holder is what makes it act."""
    ann, bob = _requiring_approvals(client, gate_env)
    asked = client.patch(POLICY, json={"require_approval": False}, headers=ann.headers())
    assert asked.status_code == 202, asked.json
    second = _key(gate_env, "approve,admin", MALLORY)
    assert (second["status"], second["grant_seq"]) == ("pending", None) and second["request_seq"] is not None
    before = client.get(GRANTS, headers=ann.headers()).json
    assert [p["request_seq"] for p in before["pending"]] == [second["request_seq"]]
    assert before["pending"][0]["weakens"] == [f"{second['key_id']}: approve,admin"]
    assert second["key_id"] not in before["policy"]["keys"]
    used = client.post(f"{POLICY}/approvals", json={"request_seq": asked.json["event"]["seq"]},
                       headers={"x-api-key": second["api_key"]})
    assert used.status_code == 403, used.json
    _unchanged(client, ann, second, before)
    assert client.get(POLICY, headers=ann.headers()).json["policy"]["require_approval"] is True
    approved = _approve(client, bob.key, second["request_seq"])
    assert approved.status_code == 200, approved.json
    assert approved.json["event"]["principal"]["holder"] == BOB
    assert approved.json["policy"]["keys"][second["key_id"]] == {"holder": MALLORY,
                                                                 "permissions": "decide,approve,admin"}
    assert [g["action"] for g in approved.json["grants"]] == ["key_created"]
    assert client.get(POLICY, headers={"x-api-key": second["api_key"]}).status_code == 200


def test_two_keys_of_the_requester_are_refused_as_approvers_of_its_grant(client, gate_env):
    """The operator asks; a key the operator holds (`operator:<login>`) is the requester's holder
    however many keys it has, and so is the operator approving from the command line."""
    ann, bob = _requiring_approvals(client, gate_env)
    own = _key(gate_env, "approve", OPERATOR)  # asked while approvals are required: a request too
    assert own["status"] == "pending"
    assert _approve(client, bob.key, own["request_seq"]).status_code == 200  # Bob lets the operator approve
    asked = _key(gate_env, "release", BOB)
    before = client.get(GRANTS, headers=ann.headers()).json
    refused = _approve(client, own["api_key"], asked["request_seq"])
    assert refused.status_code == 403 and refused.json["error"] == "GOVERNANCE_SELF_APPROVAL", refused.json
    _unchanged(client, ann, asked, before)
    cli = gate_in_process(["keys", "approve", "--scope", "tenant_a", str(asked["request_seq"])], gate_env)
    assert cli.returncode == 2 and "GOVERNANCE_SELF_APPROVAL" in cli.stderr, cli.stderr
    _unchanged(client, ann, asked, before)
    denied = _approve(client, _key(gate_env, "decide", ANN)["api_key"], asked["request_seq"])
    assert denied.status_code == 403 and denied.json["error"] == "KEYS_PERMISSION_DENIED", denied.json
    _unchanged(client, ann, asked, before)
    assert _approve(client, bob.key, 999).json["error"] == "GOVERNANCE_REQUEST_NOT_FOUND"
    assert _approve(client, bob.key, str(asked["request_seq"])).json["error"] == "GOVERNANCE_REQUEST_INVALID"
    _unchanged(client, ann, asked, before)
    assert _approve(client, ann.key, asked["request_seq"]).status_code == 200  # a second holder
    assert client.get(POLICY, headers={"x-api-key": asked["api_key"]}).status_code == 200


def test_the_holder_a_grant_is_for_never_approves_it(client, gate_env):
    """Issue 64: the operator asks for a `release` key for Bob; Bob's own approve key (another
    key of the grantee) is refused as its approver, through HTTP, and nothing changes; Ann, a
    third holder, approves it."""
    ann, bob = _requiring_approvals(client, gate_env)
    asked = _key(gate_env, "release", BOB)
    assert asked["status"] == "pending", asked
    before = client.get(GRANTS, headers=ann.headers()).json
    refused = _approve(client, bob.key, asked["request_seq"])
    assert refused.status_code == 403 and refused.json["error"] == "GOVERNANCE_SELF_APPROVAL", refused.json
    assert "cannot approve a grant to itself" in refused.json["message"]
    _unchanged(client, ann, asked, before)
    assert _approve(client, ann.key, asked["request_seq"]).status_code == 200
    assert client.get(POLICY, headers={"x-api-key": asked["api_key"]}).status_code == 200


def test_enabling_and_widening_a_key_are_grants_too(make_app, gate_env):
    client = make_app(api_key_cache_ms=0).test_client()  # a widened key's rights are read at once
    ann, bob = _requiring_approvals(client, gate_env)
    ann_key = client.get(GRANTS, headers=ann.headers()).json["policy"]["keys"]
    bob_id = next(k for k, grant in ann_key.items() if grant["holder"] == BOB)
    widened = gate_in_process(["keys", "grant", bob_id, "--permissions", "admin"], gate_env)
    assert widened.returncode == 0 and "waits for a second holder" in widened.stdout, widened.stdout
    assert client.patch(POLICY, json={"approval_ttl_seconds": 600}, headers=bob.headers()).status_code == 403
    pending = client.get(GRANTS, headers=ann.headers()).json["pending"]
    assert _approve(client, ann.key, pending[0]["request_seq"]).status_code == 200
    assert client.patch(POLICY, json={"approval_ttl_seconds": 600}, headers=bob.headers()).status_code == 200
    assert gate_in_process(["keys", "disable", bob_id], gate_env).returncode == 0  # never waits
    enabled = gate_in_process(["keys", "enable", bob_id], gate_env)
    assert enabled.returncode == 0 and "waits for a second holder" in enabled.stdout, enabled.stdout
    assert client.get(POLICY, headers=bob.headers()).status_code == 403
    pending = client.get(GRANTS, headers=ann.headers()).json["pending"]
    assert _approve(client, ann.key, pending[0]["request_seq"]).status_code == 200
    assert client.get(POLICY, headers=bob.headers()).status_code == 200


def test_without_approvals_required_a_grant_acts_at_once(client, gate_env):
    first = _key(gate_env, ALL, ANN)
    second = _key(gate_env, "approve,admin", BOB)
    assert (first["status"], second["status"]) == ("active", "active")
    assert (first["grant_seq"], second["grant_seq"]) == (1, 2)
    assert client.get(POLICY, headers={"x-api-key": second["api_key"]}).status_code == 200
    assert client.get(GRANTS, headers={"x-api-key": first["api_key"]}).json["pending"] == []


def test_the_operator_bootstraps_a_scope_then_a_second_holder_approves(client, gate_env, tmp_path):
    """`gate release policy --require-approval` on an empty scope, then the first admin key acts at
    once (the bootstrap); the next one waits; `gate verify` of `gate keys history` lists the grant
    request and who approved it. `gate keys requests` and `gate keys history` run as subprocesses
    of the real entry point (their one such proof); `release policy`, `keys create` and `verify`,
    whose entry point tests/cli and tests/releases/test_release_witness.py run as subprocesses,
    run in process (four process start-ups fewer)."""
    env = {**os.environ, **gate_env}

    def gate(*args: str, process: bool = False) -> subprocess.CompletedProcess:
        if not process:
            return gate_in_process(args, gate_env)
        return subprocess.run([GATE, *args], env=env, capture_output=True, text=True, timeout=120)

    assert gate("release", "policy", "--scope", "boot", "--require-approval").returncode == 0
    first = json.loads(gate("keys", "create", "--scope", "boot", "--permissions", "approve,admin", "--holder", BOB,
                            "--json").stdout)
    assert first["status"] == "active"
    made = gate("keys", "create", "--scope", "boot", "--permissions", "admin", "--holder", ANN)
    assert made.returncode == 0 and "pending: the key acts only once a second holder approves" in made.stdout
    key = next(line.split(": ", 1)[1] for line in made.stdout.splitlines() if line.startswith("API key"))
    request_seq = json.loads(gate("keys", "requests", "--scope", "boot", process=True).stdout)["pending"][0]["request_seq"]
    assert client.get(POLICY, headers={"x-api-key": key}).status_code == 403
    assert _approve(client, first["api_key"], request_seq).status_code == 200
    assert client.get(POLICY, headers={"x-api-key": key}).status_code == 200
    (tmp_path / "grants.json").write_text(gate("keys", "history", "--scope", "boot", process=True).stdout)
    (tmp_path / "keys.json").write_bytes(client.get("/api/decision/receipt-keys").get_data())
    verified = gate("verify", str(tmp_path / "grants.json"), "--key-registry", str(tmp_path / "keys.json"))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    listed = f"policy_approve by {first['key_id']}, requested by {OPERATOR}, approved by {OPERATOR} and {first['key_id']}"
    assert listed in verified.stdout, verified.stdout


def _reseal_from(events: list[dict], start: int, signer) -> None:
    """Events `start`… sealed and chained again with the gate's own key (what a build that let the
    requester approve its own grant would have signed)."""
    for index in range(start, len(events)):
        events[index]["previous_event_hash"] = events[index - 1]["event_hash"] if index else None
        seal(events[index], signer)


def test_gate_verify_refuses_a_grant_its_requester_approved(client, gate_env, tmp_path):
    _ann, bob = _requiring_approvals(client, gate_env)
    asked = _key(gate_env, "release", MALLORY)
    assert _approve(client, bob.key, asked["request_seq"]).status_code == 200
    document = json.loads(gate_in_process(["keys", "history", "--scope", "tenant_a"], gate_env).stdout)
    (tmp_path / "keys.json").write_bytes(client.get("/api/decision/receipt-keys").get_data())
    (tmp_path / "honest.json").write_text(json.dumps(document))
    honest = gate_in_process(["verify", str(tmp_path / "honest.json"), "--key-registry", str(tmp_path / "keys.json")],
                             gate_env)
    assert honest.returncode == 0, honest.stdout
    at = next(i for i, e in enumerate(document["governance"]) if e["action"] == "policy_approve")
    document["governance"][at]["principal"] = {"kind": "operator", "id": OPERATOR}  # the requester itself
    document["governance"][at]["actor"] = OPERATOR
    _reseal_from(document["governance"], at, client.application.extensions["gate"].signing.receipt_signer())
    (tmp_path / "forged.json").write_text(json.dumps(document))
    refused = gate_in_process(["verify", str(tmp_path / "forged.json"), "--key-registry",
                               str(tmp_path / "keys.json")], gate_env)
    assert refused.returncode == 1, refused.stdout
    assert "the governance rules refuse this change (GOVERNANCE_SELF_APPROVAL)" in refused.stdout, refused.stdout
