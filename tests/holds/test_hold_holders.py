"""Issue 52, defect 3, for held actions through HTTP: four eyes and quorums count holders, not
keys. A person's second key neither casts a second approving vote nor resolves the hold that
person's own key asked for; another holder still does; `gate verify --hold-history` refuses a
history in which one holder's two keys made a two-person quorum."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest

from gate.chain.sealing import seal
from gate.holds.events import build_head
from tests.cli_in_process import gate_in_process
from tests.holds.support import Holds, MovingClock, held_request, policy, queue

ANN = "person:https://id.example#ann"
BOB = "person:https://id.example#bob"
CRM = "service:crm"


@pytest.fixture
def gate(make_app):
    return make_app(clock=MovingClock())


@pytest.fixture
def keys(issue_key):
    return {
        "caller": issue_key(permissions="decide", holder=CRM)["api_key"],
        "ann": issue_key(permissions="decide,resolve", holder=ANN)["api_key"],
        "ann_second": issue_key(permissions="resolve", holder=ANN)["api_key"],
        "bob": issue_key(permissions="resolve", holder=BOB)["api_key"],
        "admin": issue_key(permissions="decide,admin", holder="operator:ops")["api_key"],
    }


def _as(gate, keys, name) -> Holds:
    return Holds(gate.test_client(), keys[name])


def _held(gate, keys, caller: str = "caller") -> dict:
    answer = _as(gate, keys, caller).decide(held_request())
    assert answer.status_code == 200 and answer.get_json()["verdict"] == "review", answer.get_json()
    return answer.get_json()


def _two_person(gate, keys) -> None:
    assert _as(gate, keys, "admin").put_policy(policy({"default": queue(quorum="two")})).status_code == 200


def test_a_second_key_of_one_holder_cannot_cast_a_second_vote(gate, keys):
    _two_person(gate, keys)
    record = _held(gate, keys)
    first = _as(gate, keys, "ann").resolve(record["decision_id"]).get_json()
    assert first["event"]["outcome"] is None and first["event"]["principal"]["holder"] == ANN
    again = _as(gate, keys, "ann_second").resolve(record["decision_id"])
    assert again.status_code == 409 and again.get_json()["error"] == "HOLD_ALREADY_VOTED", again.get_json()
    shown = _as(gate, keys, "bob").show(record["decision_id"]).get_json()["hold"]
    assert shown["state"] == "open" and [a["holder"] for a in shown["approvals"]] == [ANN]
    assert [e["action"] for e in shown["events"]] == ["vote"]  # the refusal recorded nothing
    second = _as(gate, keys, "bob").resolve(record["decision_id"]).get_json()
    assert second["event"]["outcome"] == "approved" and second["event"]["principal"]["holder"] == BOB


def test_four_eyes_refuses_every_key_of_the_holder_that_asked(gate, keys):
    record = _held(gate, keys, caller="ann")  # Ann's decide key asked for the action
    hold = _as(gate, keys, "bob").show(record["decision_id"]).get_json()["hold"]
    assert hold["requested_holder"] == ANN
    own = _as(gate, keys, "ann_second").resolve(record["decision_id"])
    assert own.status_code == 403 and own.get_json()["error"] == "HOLD_FOUR_EYES", own.get_json()
    approved = _as(gate, keys, "bob").resolve(record["decision_id"]).get_json()
    assert approved["event"]["outcome"] == "approved" and approved["event"]["requested_holder"] == ANN


def _key_id(gate, key: str) -> str:
    from gate.keys.apikeys import hash_api_key

    return gate.extensions["gate"].ledger.api_key_by_hash(hash_api_key(key))["key_id"]


def test_a_quorum_all_of_holders_takes_each_holders_keys_once(gate, keys, issue_key):
    """`all` lists holders: any key of a listed holder votes, once for that holder; a key of a
    holder not listed is no member; the hold closes when every listed holder approved."""
    assert _as(gate, keys, "admin").put_policy(policy({"default": queue(quorum="all", members=[ANN, BOB])})) \
        .status_code == 200
    record = _held(gate, keys)
    first = _as(gate, keys, "ann_second").resolve(record["decision_id"])  # listed by its holder only
    assert first.status_code == 201 and first.get_json()["event"]["outcome"] is None, first.get_json()
    again = _as(gate, keys, "ann").resolve(record["decision_id"])
    assert again.status_code == 409 and again.get_json()["error"] == "HOLD_ALREADY_VOTED", again.get_json()
    reviewer = issue_key(permissions="resolve", holder="service:triage")["api_key"]
    outsider = Holds(gate.test_client(), reviewer).resolve(record["decision_id"])
    assert outsider.status_code == 403 and outsider.get_json()["error"] == "HOLD_NOT_A_MEMBER", outsider.get_json()
    shown = _as(gate, keys, "bob").show(record["decision_id"]).get_json()["hold"]
    assert shown["state"] == "open" and [a["holder"] for a in shown["approvals"]] == [ANN]
    assert [e["action"] for e in shown["events"]] == ["vote"]  # the refusals recorded nothing
    closed = _as(gate, keys, "bob").resolve(record["decision_id"]).get_json()
    assert closed["event"]["outcome"] == "approved" and closed["event"]["approvals_needed"] == 2


def test_a_quorum_all_of_key_ids_never_counts_one_holders_two_keys_twice(gate, keys):
    """`all` listing two keys of Ann's and Bob's key: Ann's second key is no second approval, so
    the hold stays open (three approvers listed, two holders: it never closes on Ann's keys)."""
    members = [_key_id(gate, keys[name]) for name in ("ann", "ann_second", "bob")]
    assert _as(gate, keys, "admin").put_policy(policy({"default": queue(quorum="all", members=members)})) \
        .status_code == 200
    record = _held(gate, keys)
    assert _as(gate, keys, "ann").resolve(record["decision_id"]).status_code == 201
    twin = _as(gate, keys, "ann_second").resolve(record["decision_id"])
    assert twin.status_code == 409 and twin.get_json()["error"] == "HOLD_ALREADY_VOTED", twin.get_json()
    after_bob = _as(gate, keys, "bob").resolve(record["decision_id"]).get_json()
    assert after_bob["event"]["outcome"] is None  # two holders of the three approvals listed
    shown = _as(gate, keys, "bob").show(record["decision_id"]).get_json()["hold"]
    assert shown["state"] == "open" and [a["holder"] for a in shown["approvals"]] == [ANN, BOB]


def _gate(gate_env, *args: str, process: bool = True) -> subprocess.CompletedProcess:
    """`gate ARGS` as a subprocess; `process=False` in process (tests.cli_in_process), for the
    repeated offline `gate verify` runs (its entry point runs as a subprocess once in this file)."""
    if not process:
        return gate_in_process(args, gate_env)
    environment = {**gate_env, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=120)


def _forged(document: dict, index: int, signer, **principal: str) -> dict:
    """The history with event `index`'s principal changed, it and every later event chained and
    signed again with the gate's own key, and a new head: what a build that let one holder's two
    keys make a quorum would have served."""
    forged = copy.deepcopy(document)
    events = forged["events"]
    events[index]["principal"].update(principal)
    for at in range(index, len(events)):
        events[at]["previous_event_hash"] = events[at - 1]["event_hash"] if at else None
        seal(events[at], signer)
    forged["head"] = build_head(forged["scope_hash"], events[-1:], forged["head"]["as_of"], signer)
    return forged


def test_gate_verify_flags_two_approving_keys_of_one_holder(gate, keys, gate_env, tmp_path):
    _two_person(gate, keys)
    record = _held(gate, keys)
    _as(gate, keys, "ann").resolve(record["decision_id"])
    _as(gate, keys, "bob").resolve(record["decision_id"])
    document = gate.test_client().get("/api/holds/history", headers={"x-api-key": keys["admin"]}).get_json()
    registry = tmp_path / "keys.json"
    registry.write_bytes(gate.test_client().get("/api/decision/receipt-keys").get_data())
    (tmp_path / "honest.json").write_text(json.dumps(document))
    honest = _gate(gate_env, "verify", "--hold-history", str(tmp_path / "honest.json"), "--key-registry", str(registry))
    assert honest.returncode == 0, honest.stdout + honest.stderr
    signer = gate.extensions["gate"].signing.receipt_signer()
    # Bob's closing vote re-stated as another key of Ann's: two keys, one holder.
    closing = len(document["events"]) - 1
    forged = _forged(document, closing, signer, holder=ANN)
    assert forged["events"][closing]["actor"] != forged["events"][closing - 1]["actor"]
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    flagged = _gate(gate_env, "verify", "--hold-history", str(tmp_path / "forged.json"), "--key-registry", str(registry),
                    process=False)
    assert flagged.returncode == 1 and "NOT VERIFIED" in flagged.stdout, flagged.stdout + flagged.stderr
    assert "one holder approved twice" in flagged.stdout
    assert "approved by 1 distinct holder(s), the quorum needs 2" in flagged.stdout
    # The requester's holder under four eyes: the crm service's own key approving is named too.
    as_requester = _forged(document, closing, signer, holder=CRM)
    (tmp_path / "requester.json").write_text(json.dumps(as_requester))
    own = _gate(gate_env, "verify", "--hold-history", str(tmp_path / "requester.json"), "--key-registry", str(registry),
                process=False)
    assert own.returncode == 1 and "approved by the holder that asked for the action (four eyes)" in own.stdout
