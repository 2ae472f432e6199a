"""Issue 52, defect 3, through HTTP: two keys of one holder are one approver. A person's second
key neither approves that person's release-policy weakening nor that person's activation request;
a key of another holder still does; the holder is signed into each event's principal, and
`gate verify` refuses a history in which one holder approved its own request."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

from gate.chain.sealing import seal
from gate.releases.events import verify_history
from gate.verify import TrustAnchors
from tests.cli_in_process import gate_in_process
from tests.releases.support import ALL, Api, version

POLICY = "/api/decision/release-policy"
ANN = "person:https://id.example#ann"
BOB = "person:https://id.example#bob"


@pytest.fixture
def ann(client, issue_key):
    """Ann's first key: every right."""
    return Api(client, issue_key(permissions=ALL, holder=ANN)["api_key"])


@pytest.fixture
def ann_second(client, issue_key):
    """Ann's second key: approve only, a different key id, the same holder."""
    return Api(client, issue_key(permissions="approve", holder=ANN)["api_key"])


@pytest.fixture
def bob(client, issue_key):
    return Api(client, issue_key(permissions="approve", holder=BOB)["api_key"])


def _anchors(client) -> TrustAnchors:
    return TrustAnchors.from_registry_body(client.get("/api/decision/receipt-keys").get_data(), "key_registry_file")


def _weakening_request(client, ann: Api) -> dict:
    ann.publish(version("v1"))
    assert client.patch(POLICY, json={"require_approval": True}, headers=ann.headers()).status_code == 200
    asked = client.patch(POLICY, json={"require_approval": False}, headers=ann.headers())
    assert asked.status_code == 202, asked.json
    return asked.json["pending"][0]


def _approve_policy(client, api: Api, request: dict):
    return client.post(f"{POLICY}/approvals", json={"request_seq": request["request_seq"]}, headers=api.headers())


def test_a_second_key_of_the_requester_cannot_approve_its_policy_weakening(client, ann, ann_second, bob):
    request = _weakening_request(client, ann)
    assert request["requested_holder"] == ANN
    refused = _approve_policy(client, ann_second, request)
    assert refused.status_code == 403 and refused.json["error"] == "RELEASE_SELF_APPROVAL", refused.json
    after = client.get(POLICY, headers=ann.headers()).json
    assert after["policy"]["require_approval"] is True and len(after["pending"]) == 1
    # ... so Ann still cannot activate alone: her activation is only a request
    alone = ann.act("activate", version="v1")
    assert alone.status_code == 201 and alone.json["state"]["active"] is None
    # A key of another holder approves, and the event states that holder, signed.
    approved = _approve_policy(client, bob, request)
    assert approved.status_code == 200, approved.json
    assert approved.json["event"]["principal"]["holder"] == BOB
    assert approved.json["policy"]["require_approval"] is False


def test_a_second_key_of_the_requester_cannot_approve_its_activation(client, ann, ann_second, bob):
    published = ann.publish(version("v1")).json["rulebook"]
    assert client.patch(POLICY, json={"require_approval": True}, headers=ann.headers()).status_code == 200
    asked = ann.act("activate", version="v1")
    assert asked.status_code == 201 and asked.json["event"]["principal"]["holder"] == ANN
    pending = asked.json["state"]["pending"][0]
    assert pending["requested_holder"] == ANN
    body = {"request_seq": asked.json["event"]["seq"], "version": "v1", "rulebook_hash": published["hash"]}
    own = ann_second.act("approve", **body)
    assert own.status_code == 403 and own.json["error"] == "RELEASE_SELF_APPROVAL", own.json
    assert ann.status().json["state"]["active"] is None
    approved = bob.act("approve", **body)
    assert approved.status_code == 201 and approved.json["state"]["active"]["version"] == "v1"
    history = ann.history().json
    assert verify_history(history["events"], _anchors(client), history["governance"]).valid


def _reseal_from(events: list[dict], start: int, signer) -> None:
    """Events `start`… sealed and chained again with the gate's own key (what a build that let one
    holder approve itself would have signed)."""
    for index in range(start, len(events)):
        events[index]["previous_event_hash"] = events[index - 1]["event_hash"] if index else None
        seal(events[index], signer)


def _gate(gate_env, *args: str, process: bool = True) -> subprocess.CompletedProcess:
    """`gate ARGS` as a subprocess; `process=False` in process (tests.cli_in_process), for the
    repeated offline `gate verify` runs (its entry point runs as a subprocess once in this file)."""
    if not process:
        return gate_in_process(args, gate_env)
    environment = {**gate_env, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=120)


def test_gate_verify_flags_a_history_whose_two_approvers_share_a_holder(client, ann, bob, gate_env, tmp_path):
    request = _weakening_request(client, ann)
    assert _approve_policy(client, bob, request).status_code == 200
    ann.act("activate", version="v1")
    history = ann.history().json
    (tmp_path / "keys.json").write_bytes(client.get("/api/decision/receipt-keys").get_data())
    (tmp_path / "history.json").write_text(json.dumps(history))
    honest = _gate(gate_env, "verify", str(tmp_path / "history.json"), "--key-registry", str(tmp_path / "keys.json"))
    assert honest.returncode == 0, honest.stdout + honest.stderr
    # The approval re-stated as Ann's own second key (another key id, her holder), signed by the gate's key.
    forged = copy.deepcopy(history)
    approve = next(i for i, e in enumerate(forged["governance"]) if e["action"] == "policy_approve")
    forged["governance"][approve]["principal"]["holder"] = ANN
    _reseal_from(forged["governance"], approve, client.application.extensions["gate"].signing.receipt_signer())
    assert forged["governance"][approve]["actor"] != forged["governance"][approve - 1]["actor"]  # two keys
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    flagged = _gate(gate_env, "verify", str(tmp_path / "forged.json"), "--key-registry", str(tmp_path / "keys.json"),
                    process=False)
    assert flagged.returncode == 1, flagged.stdout + flagged.stderr
    assert f"policy event {approve + 1}: the governance rules refuse this change (RELEASE_SELF_APPROVAL)" \
        in flagged.stdout, flagged.stdout
