"""A gate run with signing off (GATE_REQUIRE_SIGNING=false, no key) writes its hold and key-grant
events with their hash and no signature. `gate verify` reads such a chain as intact and its
authenticity unproven, as it reads a release history written the same way; it read "members
differ", as if the chain had been tampered with. Given trust anchors, an unsigned event is named
unsigned and the chain fails: a signature a trusted key made is never optional once keys are given."""

from __future__ import annotations

import json

import pytest

from gate.chain.sealing import SIGNATURE_MEMBERS, UNSIGNED
from gate.holds.events import event_problems
from gate.verify import TrustAnchors
from tests.cli_in_process import gate_in_process
from tests.holds.support import Holds, MovingClock, held_request

SECRET = "an-hmac-secret-the-verifier-trusts"


@pytest.fixture
def unsigned(gate_env):
    """gate_env edited in place (issue_key reads the same dict): no signing key, signing off."""
    gate_env.update(GATE_SIGNING_KEY_FILE=str(gate_env["GATE_HOME"] + "/no-such-keyring.json"),
                    GATE_REQUIRE_SIGNING="false")
    return gate_env


def _verify(env, path, *trust: str):
    return gate_in_process(["verify", str(path), *trust], {**env, "TRUSTED_SECRET": SECRET})


def test_a_chain_written_with_signing_off_is_intact_unproven_and_fails_once_keys_are_given(
        unsigned, make_app, issue_key, tmp_path):
    gate = make_app(clock=MovingClock())
    caller = issue_key(permissions="decide")["api_key"]
    reviewer = issue_key(permissions="decide,resolve")["api_key"]
    admin = issue_key(permissions="decide,admin")["api_key"]
    record = Holds(gate.test_client(), caller).decide(held_request()).get_json()
    assert record["verdict"] == "review"
    assert Holds(gate.test_client(), reviewer).resolve(record["decision_id"]).status_code == 201

    history = gate.test_client().get("/api/holds/history", headers={"x-api-key": admin}).get_json()
    assert [event["action"] for event in history["events"]] == ["vote"]  # the approval that closed it
    assert all("signature" not in event and "event_hash" in event for event in [*history["events"], history["head"]])
    (tmp_path / "holds.json").write_text(json.dumps(history))
    grants = gate_in_process(["keys", "history", "--scope", "tenant_a"], unsigned)
    assert grants.returncode == 0, grants.stderr
    assert json.loads(grants.stdout)["events"], "the keys that resolve and administer are in the key chain"
    (tmp_path / "grants.json").write_text(grants.stdout)

    for name, what in (("holds.json", "hold history"), ("grants.json", "key chain")):
        alone = _verify(unsigned, tmp_path / name)
        assert alone.returncode == 1, alone.stdout + alone.stderr  # unproven is not verified
        assert "integrity    valid" in alone.stdout, (what, alone.stdout)
        assert "NOT PROVEN (no trusted key)" in alone.stdout and "members differ" not in alone.stdout
        keyed = _verify(unsigned, tmp_path / name, "--hmac-secret-env", "TRUSTED_SECRET")
        assert keyed.returncode == 1 and "integrity    INVALID" in keyed.stdout, (what, keyed.stdout)
        assert UNSIGNED in keyed.stdout, (what, keyed.stdout)


def test_a_hold_event_whose_signature_was_stripped_fails_once_keys_are_given():
    from tests.holds.chain_support import RECORDS, anchors, chain

    event = chain()[1]
    record = next(r for r in RECORDS.values() if r["decision_id"] == event["decision_id"])
    assert event_problems(event, record, anchors()) == []
    stripped = {k: v for k, v in event.items() if k not in SIGNATURE_MEMBERS[1:]}
    assert event_problems(stripped, record, None) == []  # intact: the members and the hash hold
    assert event_problems(stripped, record, anchors()) == [UNSIGNED]
    assert event_problems(stripped, record, TrustAnchors()) == [UNSIGNED]
