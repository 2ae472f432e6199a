"""Issue 42 through `gate release` (each subcommand at least once as a subprocess): no option
names an identity (`--as` is gone), the local operator is `operator:<login of the real user
id>`, marked as an operator in the signed event, and cannot approve its own request, whatever
LOGNAME or USER say; a policy weakening from the CLI is a request like any other; `gate keys
create --permissions admin` works."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys

from tests.cli_in_process import gate_in_process
from tests.releases.support import ALL, Api, version

SCOPE = "tenant_a"


def _gate(gate_env, *args: str, env: dict | None = None, process: bool = True) -> subprocess.CompletedProcess:
    """`gate ARGS` as a subprocess; `process=False` in process (tests.cli_in_process), for the
    calls of a subcommand this file already runs once as a subprocess."""
    if not process:
        return gate_in_process(args, {**gate_env, **(env or {})})
    environment = {**gate_env, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", ""),
                   **(env or {})}
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=120)


def _login() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def test_as_is_refused_as_an_unknown_option(gate_env):
    for command, process in ((["approve", "--request-seq", "1", "--version", "v1", "--rulebook-hash", "0" * 64], True),
                             (["activate", "--version", "v1"], False)):
        run = _gate(gate_env, "release", command[0], "pricing_exception", "--scope", SCOPE, *command[1:],
                    "--as", "someone-else", process=process)
        assert run.returncode == 2, run.stdout + run.stderr
        assert "unrecognized arguments: --as someone-else" in run.stderr


def test_an_operator_cannot_approve_its_own_request_under_any_name(client, issue_key, gate_env, tmp_path):
    author = Api(client, issue_key(scope=SCOPE, permissions=ALL)["api_key"])
    # made before approvals are required: a grant made after waits for a second holder (issue 52)
    second = Api(client, issue_key(scope=SCOPE, permissions="approve")["api_key"])
    published = author.publish(version("v1")).json["rulebook"]
    policy = _gate(gate_env, "release", "policy", "--scope", SCOPE, "--require-approval", "--reason", "two people")
    assert policy.returncode == 0, policy.stderr
    assert json.loads(policy.stdout)["event"]["principal"] == {"kind": "operator", "id": f"operator:{_login()}"}
    requested = _gate(gate_env, "release", "activate", "--scope", SCOPE, "--rulebook-id", "pricing_exception",
                      "--version", "v1", "--json")
    assert requested.returncode == 0, requested.stderr
    event = json.loads(requested.stdout)
    assert event["principal"] == {"kind": "operator", "id": f"operator:{_login()}"}
    assert event["actor"] == f"operator:{_login()}" and event["state"]["pending"][0]["request_seq"] == event["seq"]
    approve = ("release", "approve", "--scope", SCOPE, "--rulebook-id", "pricing_exception", "--request-seq",
               str(event["seq"]), "--version", "v1", "--rulebook-hash", published["hash"])
    for names in ({}, {"LOGNAME": "someone-else", "USER": "someone-else", "USERNAME": "someone-else"}):
        own = _gate(gate_env, *approve, env=names, process=bool(names))
        assert own.returncode == 2 and "RELEASE_SELF_APPROVAL" in own.stderr, own.stdout + own.stderr
    status = author.status().json
    assert status["state"]["active"] is None and len(status["history"]) == 1  # nothing recorded
    approved = second.act("approve", request_seq=event["seq"], version="v1", rulebook_hash=published["hash"])
    assert approved.status_code == 201 and approved.json["state"]["active"]["version"] == "v1"
    # `gate verify` of the history names both principals' changes and lists the policy change.
    history = _gate(gate_env, "release", "history", "--scope", SCOPE, "--rulebook-id", "pricing_exception")
    (tmp_path / "history.json").write_text(history.stdout)
    (tmp_path / "keys.json").write_bytes(client.get("/api/decision/receipt-keys").get_data())
    verified = _gate(gate_env, "verify", str(tmp_path / "history.json"), "--key-registry", str(tmp_path / "keys.json"))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "VERIFIED (2 events, 1 policy changes)" in verified.stdout
    assert (f"release_policy policy_set by operator:{_login()} (operator), approved by operator:{_login()}: "
            "require_approval: False -> True" in verified.stdout)


def test_a_weakening_from_the_cli_is_a_request_the_same_operator_cannot_approve(gate_env):
    assert _gate(gate_env, "release", "policy", "--scope", SCOPE, "--require-approval",
                 "--approval-ttl", "3600", process=False).returncode == 0
    weakened = _gate(gate_env, "release", "policy", "--scope", SCOPE, "--no-require-approval", process=False)
    assert weakened.returncode == 0, weakened.stderr
    shown = json.loads(weakened.stdout)
    assert shown["policy"]["require_approval"] is True and shown["policy"]["approval_ttl_seconds"] == 3600
    assert shown["event"]["action"] == "policy_request" and "waits for a second principal" in weakened.stderr
    own = _gate(gate_env, "release", "policy-approve", "--scope", SCOPE, "--request-seq", str(shown["event"]["seq"]),
                env={"LOGNAME": "someone-else", "USER": "someone-else"})
    assert own.returncode == 2 and "RELEASE_SELF_APPROVAL" in own.stderr, own.stdout + own.stderr
    still = json.loads(_gate(gate_env, "release", "policy", "--scope", SCOPE, process=False).stdout)
    assert still["policy"]["require_approval"] is True and len(still["pending"]) == 1


def test_keys_are_created_with_the_admin_permission(gate_env):
    run = _gate(gate_env, "keys", "create", "--scope", SCOPE, "--permissions", "release,admin",
                "--holder", "person:https://idp.example#ann", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["permissions"] == "decide,release,admin"
