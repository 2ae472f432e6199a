"""Issue 52, defect 1, as filed: a version its guardrail halted came back through `rollback`.

v1 active, then v2 (v1 is previous); a canary of v1 at 50%; a decide-only key reports the canary
arm failed and the active arm succeeded; the guardrail halts v1. A key with `release` and no
`admin` was refused `activate v1` (409 `RELEASE_VERSION_HALTED`) but `{"action": "rollback"}`
answered 201 with v1 active and `override: null`, and `gate verify` of the history said VERIFIED.
One rule (gate/releases/halts.py) now judges every move that makes a version serve: through
HTTP, the CLI as a subprocess, and the offline verifier of a forged, re-signed history.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gate.principals import Principal
from gate.releases.events import EventInputs, action_of, build_event, state_from_member, verify_history
from gate.releases.halts import OVERRIDE_HALT
from gate.verify import TrustAnchors
from tests.cli_in_process import gate_in_process
from tests.releases.support import ALL, Api, by_reference, version

POLICY = "/api/decision/release-policy"
SCOPE = "tenant_a"  # issue_key's scope


@pytest.fixture
def admin(client, issue_key):
    client.application.extensions["gate"].releases.reader.cache_seconds = 0
    return Api(client, issue_key(permissions=ALL)["api_key"])


@pytest.fixture
def releaser(client, issue_key):
    """The key of the report: `release` (and `publish`), no `admin`."""
    issued = issue_key(permissions="publish,release")
    return Api(client, issued["api_key"]), issued["key_id"]


@pytest.fixture
def halted(client, issue_key, admin):
    """The filed steps up to the guardrail's halt of v1; the decide-only key decides and reports."""
    reporter = Api(client, issue_key()["api_key"])  # decide only
    admin.publish(version("v1"))
    admin.publish(version("v2", approve_limit=10))
    assert admin.act("activate", version="v1").status_code == 201
    assert admin.act("activate", version="v2").status_code == 201
    assert admin.act("canary", version="v1", percent=50).status_code == 201
    return _halt_the_canary(reporter, admin)


def _halt_the_canary(reporter: Api, admin: Api) -> dict[str, Any]:
    """The decide-only key decides until each arm of the 50% canary of v1 has 30 decisions, reports
    the canary's failed and the active arm's succeeded: the guardrail halts v1. The status after."""
    arms: dict[str, list[dict[str, Any]]] = {"active": [], "canary": []}
    index = 0
    while min(len(arms["active"]), len(arms["canary"])) < 30:
        record = reporter.decide(by_reference(subject=f"order-{index}")).json
        arms[record["release_arm"]["arm"]].append(record)
        index += 1
        assert index < 400, "a 50% canary did not fill both arms"
    for record in arms["canary"][:30]:
        assert reporter.outcome(record, "failed").status_code == 201
    for record in arms["active"][:30]:
        assert reporter.outcome(record, "succeeded").status_code == 201
    status = admin.status().json
    halt = status["history"][-1]
    assert (halt["action"], halt["actor"], halt["evidence"]["canary_version"]) == ("halt", "guardrail", "v1")
    assert status["state"]["active"]["version"] == "v2"
    assert [v["version"] for v in status["state"]["previous"]] == ["v1"]
    return status


def _anchors(client) -> TrustAnchors:
    return TrustAnchors.from_registry_body(client.get("/api/decision/receipt-keys").get_data(), "key_registry_file")


def _refused(response, code: str, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.json
    assert response.json["error"] == code
    return dict(response.json)


def test_the_filed_rollback_of_a_halted_version_is_refused_and_changes_nothing(client, admin, releaser, halted):
    key, _key_id = releaser
    _refused(key.act("activate", version="v1"), "RELEASE_VERSION_HALTED", 409)  # as documented before
    rolled = _refused(key.act("rollback"), "RELEASE_VERSION_HALTED", 409)  # was 201, v1 active, override null
    assert rolled["version"] == "v1"
    assert rolled["message"] == ("rollback makes version 'v1' serve, which its guardrail halted: only an admin does "
                                 "so, with override 'guardrail_halt' and a reason")
    # Nor as a canary, at any share; a shadow never answers a decide and stays allowed (below).
    _refused(key.act("canary", version="v1", percent=99.99), "RELEASE_VERSION_HALTED", 409)
    # The override is an admin's, and needs a reason.
    denied = _refused(key.act("rollback", override="guardrail_halt", reason="fixed"), "RELEASE_PERMISSION_DENIED", 403)
    assert denied["permission"] == "admin"
    _refused(admin.act("rollback", override="guardrail_halt"), "RELEASE_VERSION_HALTED", 409)
    _refused(admin.act("rollback", reason="fixed"), "RELEASE_VERSION_HALTED", 409)
    # An override where nothing halted would serve is refused too.
    _refused(key.act("activate", version="v2", override="guardrail_halt", reason="x"), "RELEASE_ACTION_INVALID", 400)
    after = admin.status().json
    assert after["history"] == halted["history"] and after["state"]["active"]["version"] == "v2"
    # Approvals on: rollback never waits for one, and is refused all the same.
    assert client.patch(POLICY, json={"require_approval": True}, headers=admin.headers()).status_code == 200
    _refused(key.act("rollback"), "RELEASE_VERSION_HALTED", 409)
    shadow = key.act("shadow", version="v1")
    assert shadow.status_code == 201 and shadow.json["event"]["override"] is None
    # The documented way back: an admin's override with a reason, in the signed event.
    back = admin.act("rollback", override="guardrail_halt", reason="the failing adapter is fixed")
    assert back.status_code == 201, back.json
    event = back.json["event"]
    assert (event["action"], event["override"], event["reason"]) == (
        "rollback", "guardrail_halt", "the failing adapter is fixed")
    assert event["state"]["active"]["version"] == "v1"
    history = admin.history().json
    check = verify_history(history["events"], _anchors(client), history["governance"])
    assert check.valid, check.problems


def test_a_canary_request_made_before_the_halt_is_not_approved_after_it(client, issue_key, admin):
    """Approvals on: two canary requests of v1, the first approved and halted by its guardrail;
    approving the second (made before the halt) would start v1 again (was 201)."""
    reporter = Api(client, issue_key()["api_key"])
    approver = Api(client, issue_key(permissions="approve")["api_key"])
    hashes = {v: admin.publish(version(v, approve_limit=limit)).json["rulebook"]["hash"]
              for v, limit in (("v1", 20), ("v2", 10))}
    admin.act("activate", version="v1")
    admin.act("activate", version="v2")
    assert client.patch(POLICY, json={"require_approval": True}, headers=admin.headers()).status_code == 200
    first = admin.act("canary", version="v1", percent=50).json["event"]["seq"]
    second = admin.act("canary", version="v1", percent=10).json["event"]["seq"]
    approval = {"version": "v1", "rulebook_hash": hashes["v1"]}
    assert approver.act("approve", request_seq=first, **approval).json["state"]["canary"]["percent"] == 50
    status = _halt_the_canary(reporter, admin)
    assert [p["request_seq"] for p in status["state"]["pending"]] == [second]
    refused = _refused(approver.act("approve", request_seq=second, **approval), "RELEASE_VERSION_HALTED", 409)
    assert refused["message"].startswith("approve makes version 'v1' serve, which its guardrail halted")
    assert admin.status().json["state"]["canary"] is None


def test_approving_a_halted_version_needs_the_admin_override_too(client, issue_key, admin, halted):
    approver = Api(client, issue_key(permissions="approve")["api_key"])
    assert client.patch(POLICY, json={"require_approval": True}, headers=admin.headers()).status_code == 200
    _refused(admin.act("activate", version="v1"), "RELEASE_VERSION_HALTED", 409)  # the request needs it as well
    asked = admin.act("activate", version="v1", override="guardrail_halt", reason="fixed upstream")
    assert asked.status_code == 201 and asked.json["state"]["active"]["version"] == "v2"
    request = asked.json["state"]["pending"][0]
    approval = {"request_seq": request["request_seq"], "version": "v1", "rulebook_hash": request["rulebook_hash"]}
    _refused(approver.act("approve", **approval), "RELEASE_VERSION_HALTED", 409)
    denied = _refused(approver.act("approve", override="guardrail_halt", reason="agreed", **approval),
                      "RELEASE_PERMISSION_DENIED", 403)
    assert denied["permission"] == "admin"
    assert admin.status().json["state"]["active"]["version"] == "v2"


def test_the_halted_rules_under_another_label_are_halted_too(client, issue_key, admin, releaser, halted):
    """Issue 64: a halt binds the version's rules, not only its label. v1's rules republished as
    `v1-again` are refused as v1 is, on every move that makes them
    serve, and nothing changes; other rules (`v3`) are not; an admin's override with a reason
    makes them serve, and the signed history that records it (its evidence names v1) verifies."""
    key, _key_id = releaser
    published = admin.publish(version("v1-again"))
    assert published.status_code == 201, published.json
    assert admin.publish(version("v3", approve_limit=12)).status_code == 201
    refused = _refused(key.act("activate", version="v1-again"), "RELEASE_VERSION_HALTED", 409)
    assert refused["version"] == "v1-again"
    assert refused["message"] == ("activate makes version 'v1-again', the rules of version 'v1', serve, which its "
                                  "guardrail halted: only an admin does so, with override 'guardrail_halt' and a reason")
    _refused(key.act("canary", version="v1-again", percent=5), "RELEASE_VERSION_HALTED", 409)
    # A caller never states the evidence (the gate finds the rules): refused, nothing changes.
    _refused(key.act("activate", version="v1-again", evidence={"same_rules_as": "v2"}), "RELEASE_ACTION_INVALID", 400)
    _refused(admin.act("activate", version="v1-again", reason="no override"), "RELEASE_VERSION_HALTED", 409)
    after = admin.status().json
    assert after["history"] == halted["history"] and after["state"]["active"]["version"] == "v2"
    other = key.act("activate", version="v3")
    assert other.status_code == 201 and other.json["event"]["override"] is None, other.json
    back = admin.act("activate", version="v1-again", override="guardrail_halt", reason="the adapter is fixed")
    assert back.status_code == 201, back.json
    assert back.json["event"]["evidence"] == {"same_rules_as": "v1"}
    history = admin.history().json
    check = verify_history(history["events"], _anchors(client), history["governance"])
    assert check.valid, check.problems


def _gate(gate_env: dict[str, str], *args: str, process: bool = True) -> subprocess.CompletedProcess[str]:
    """`gate ARGS` as a subprocess; `process=False` in process (tests.cli_in_process), for the
    repeated offline `gate verify` runs (its entry point runs as a subprocess once in this file)."""
    if not process:
        return gate_in_process(args, gate_env)
    environment = {**gate_env, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=120)


def test_gate_release_refuses_the_halted_version_without_the_override(gate_env, admin, halted):
    where = ("pricing_exception", "--scope", SCOPE)
    for move in (("rollback",), ("canary", "--version", "v1", "--percent", "5"), ("activate", "--version", "v1")):
        refused = _gate(gate_env, "release", *move, *where)
        assert refused.returncode == 2, refused.stdout  # a refusal, as of every command
        assert refused.stderr.startswith(f"gate release: RELEASE_VERSION_HALTED: {move[0]} makes version 'v1' serve")
    no_reason = _gate(gate_env, "release", "rollback", *where, "--override-halt")
    assert no_reason.returncode == 2 and "RELEASE_VERSION_HALTED" in no_reason.stderr
    assert admin.status().json["history"] == halted["history"]  # nothing recorded
    back = _gate(gate_env, "release", "rollback", *where, "--override-halt", "--reason", "fixed", "--json")
    assert back.returncode == 0, back.stderr
    event = json.loads(back.stdout)
    assert (event["override"], event["reason"], event["state"]["active"]["version"]) == ("guardrail_halt", "fixed", "v1")
    assert event["principal"]["kind"] == "operator"


def _forged(client, history: dict[str, Any], principal: Principal, **body: Any) -> dict[str, Any]:
    """The history with one more event, made with the library and signed with the gate's own key,
    bypassing the service: what a holder of the signing key could write."""
    events = history["events"]
    last = events[-1]
    state = state_from_member(last["rulebook_id"], last["seq"], last["event_hash"], last["state"])
    move = {"action": "rollback", "actor": principal.actor, "created_at": "2026-11-27T00:00:00.000Z", **body}
    inputs = EventInputs(last["scope_hash"], body.get("reason"), principal=principal,
                         governance_seq=last["governance_seq"], override=body.get("override"))
    signer = client.application.extensions["gate"].releases.moves.signing.receipt_signer()
    event, _after = build_event(state, action_of(move), inputs, signer)
    return {**history, "events": [*events, event]}


def _verify(gate_env: dict[str, str], tmp_path: Path, registry: bytes, document: dict[str, Any], name: str,
            process: bool = False):
    (tmp_path / "keys.json").write_bytes(registry)
    (tmp_path / name).write_text(json.dumps(document))
    return _gate(gate_env, "verify", str(tmp_path / name), "--key-registry", str(tmp_path / "keys.json"),
                 process=process)


def test_gate_verify_flags_a_forged_history_that_revives_the_halted_version(client, gate_env, tmp_path, admin,
                                                                           releaser, halted):
    _key, key_id = releaser
    history = admin.history().json
    registry = client.get("/api/decision/receipt-keys").get_data()
    seq = len(history["events"]) + 1
    forged = _forged(client, history, Principal.api_key(key_id))
    assert forged["events"][-1]["state"]["active"]["version"] == "v1"
    run = _verify(gate_env, tmp_path, registry, forged, "forged.json", process=True)
    assert run.returncode == 1
    assert "NOT VERIFIED" in run.stdout and "integrity    INVALID" in run.stdout
    assert (f"event {seq}: rollback makes version 'v1' serve, which its guardrail halted: only an admin does so, "
            "with override 'guardrail_halt' and a reason") in run.stdout
    # The same event with the override and a reason verifies: the halt rule alone told them apart.
    overridden = _forged(client, history, Principal.api_key(key_id), override=OVERRIDE_HALT, reason="fixed")
    run = _verify(gate_env, tmp_path, registry, overridden, "overridden.json")
    assert run.returncode == 0, run.stdout
    assert "VERIFIED" in run.stdout
    # Dropping the principal (the form before issue 42) does not escape the rule.
    stripped = _forged(client, history, Principal.api_key(key_id))
    event = stripped["events"][-1]
    for member in ("principal", "governance_seq", "override"):
        event.pop(member)
    from gate.chain.sealing import seal

    seal(event, client.application.extensions["gate"].releases.moves.signing.receipt_signer())
    run = _verify(gate_env, tmp_path, registry, stripped, "stripped.json")
    assert run.returncode == 1 and "NOT VERIFIED" in run.stdout
    assert (f"event {seq}: lacks the principal every event carries since event 1 (the form before issue 42 cannot "
            "follow it)") in run.stdout
