"""`gate verify FILE --json` of each signed chain document (a hold history, a release history, a
key chain) begins its chain check with the same members (`gate.chain.event_check.EventChainCheck`):
`verified`, `valid`, `signatures_checked`, `events`, `problems`, with consistent values (verified
is valid with its signatures checked, and is the exit status), whether the chain verifies, is only
intact (no trusted key) or is tampered with. Run in process (tests/cli_in_process.py); the
documents are built with the real event builders and one Ed25519 key, no ledger."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from gate.chain.links import scope_hash
from gate.keys.signing import Ed25519ReceiptSigner
from gate.principals import Principal
from gate.releases.events import EventInputs, build_event, history_document
from gate.releases.key_grants import KeyGrant, build_grant_event, grants_document
from gate.releases.model import Action, ReleaseState, Version
from tests.cli_in_process import gate_in_process
from tests.holds.chain_support import KEY, SCOPE, history

BASE = ["verified", "valid", "signatures_checked", "events", "problems"]
SIGNER = Ed25519ReceiptSigner(KEY)
AT = "2026-11-26T00:00:00.000Z"
ANN = "person:https://id.example#ann"


def _release_history() -> dict[str, Any]:
    state, events = ReleaseState("rb"), []
    for action in (Action("activate", "key-a", AT, Version("v1", "1" * 64)),
                   Action("canary", "key-a", AT, Version("v2", "2" * 64), 10, "context.x")):
        event, state = build_event(state, action, EventInputs(scope_hash(SCOPE), "why"), SIGNER)
        events.append(event)
    return dict(history_document(scope_hash(SCOPE), "rb", events))


def _key_chain() -> dict[str, Any]:
    first = build_grant_event(KeyGrant("key_created", "key_a", ANN, "decide,approve", Principal.operator("ops"), AT),
                              scope_hash=scope_hash(SCOPE), seq=1, previous_event_hash=None, signer=SIGNER)
    second = build_grant_event(KeyGrant("key_widened", "key_a", ANN, "decide,approve,admin",
                                        Principal.operator("ops"), AT),
                               scope_hash=scope_hash(SCOPE), seq=2, previous_event_hash=first["event_hash"],
                               signer=SIGNER)
    return grants_document(scope_hash(SCOPE), [first, second])


# Each document, a member of one event to edit, and what the check then names.
CHAINS = {
    "hold history": (history, 2, "note", "event 3 (seq 3): event_hash does not match its content (tampered)"),
    "release history": (_release_history, 1, "reason", "event 2: event_hash does not match its content (tampered)"),
    "key chain": (_key_chain, 1, "permissions", "grant event 2: event_hash does not match its content (tampered)"),
}


@pytest.fixture
def registry(tmp_path) -> str:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"keys": [{
        "key_id": KEY.key_id, "algorithm": "ed25519", "public_key": KEY.public_key_pem,
        "public_key_fingerprint": KEY.fingerprint, "status": "active", "not_before": "2026-01-01T00:00:00.000Z"}]}))
    return str(path)


def _verify(tmp_path, document: dict[str, Any], *trust: str) -> dict[str, Any]:
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(document))
    done = gate_in_process(["verify", str(path), *trust, "--json"])
    assert done.returncode in (0, 1), done.stdout + done.stderr
    body: dict[str, Any] = json.loads(done.stdout)
    assert done.returncode == (0 if body["verified"] else 1)  # the exit status is the verdict
    assert body["verified"] is (body["valid"] and body["signatures_checked"])
    assert (body["problems"] == []) is body["valid"]
    if "integrity_valid" in body:  # the release history and the key chain state them too
        assert (body["integrity_valid"], body["authenticity_valid"]) == (body["valid"], body["verified"])
    return body


@pytest.mark.parametrize("name", list(CHAINS))
def test_every_chain_verifiers_json_carries_the_chain_checks_members(name, tmp_path, registry):
    make, index, member, problem = CHAINS[name]
    document = make()
    count = len(document["events"])
    keyed = _verify(tmp_path, document, "--key-registry", registry)
    assert [key for key in keyed if key in BASE] == BASE, "in one order"
    assert {key: keyed[key] for key in BASE} == {"verified": True, "valid": True, "signatures_checked": True,
                                                 "events": count, "problems": []}
    intact = _verify(tmp_path, document)
    assert {key: intact[key] for key in BASE} == {"verified": False, "valid": True, "signatures_checked": False,
                                                  "events": count, "problems": []}
    tampered = copy.deepcopy(document)
    tampered["events"][index][member] += "!"
    failed = _verify(tmp_path, tampered, "--key-registry", registry)
    assert {key: failed[key] for key in BASE} == {"verified": False, "valid": False, "signatures_checked": True,
                                                  "events": count, "problems": [problem]}


def test_a_key_chain_whose_governance_chain_fails_fails_with_its_problem(tmp_path, registry):
    document = {**_key_chain(), "governance": [{"release_governance_event_version": "v0"}]}
    failed = _verify(tmp_path, document, "--key-registry", registry)
    assert {key: failed[key] for key in BASE} == {
        "verified": False, "valid": False, "signatures_checked": True, "events": 2,
        "problems": ["policy event 1: not a release_governance_event_v1 object"]}
    assert len(failed["grants"]) == 2 and failed["grant_changes"] == []
