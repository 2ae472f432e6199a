"""Issue 67, items 1 and 2: a scope's data map and masking rules are one governed safeguard
(`privacy`): an unknown class, action, destination or member is refused with
PRIVACY_SETTINGS_INVALID and changes nothing; a change that lets more out waits, while the scope
requires approvals, for a second distinct holder (never another key of the requester's holder);
a change that masks more applies at once. The Rulebook v1 hash of a rulebook is never touched:
the data map lives beside it (a rulebook with an annotation in `input_schema` is refused, as the
reference refuses it)."""

from __future__ import annotations

import copy

import pytest

from gate.privacy.datamap import DataMap, PrivacySettings, Rule, found_in, weakenings
from tests.holds.support import approved_request
from tests.privacy.support import privacy, rules

RELEASE_POLICY = "/api/decision/release-policy"


@pytest.fixture
def keys(issue_key):
    return {"alice": issue_key(permissions="decide,publish,release,admin,approve", holder="service:alice")["api_key"],
            "alice2": issue_key(permissions="admin,approve", holder="service:alice")["api_key"],
            "bob": issue_key(permissions="approve", holder="service:bob")["api_key"],
            "reader": issue_key(permissions="decide")["api_key"]}


def _h(keys, name):
    return {"x-api-key": keys[name]}


def _current(client, keys):
    return client.get("/api/privacy", headers=_h(keys, "alice")).get_json()


@pytest.mark.parametrize("body", [
    {"data_map": {"members": {"context.inputs.customer_email": "secret"}, "subject_key": None}, "rules": rules()},
    {"data_map": {"members": {"inputs.customer_email": "personal"}, "subject_key": None}, "rules": rules()},
    {"data_map": {"members": {}, "subject_key": "customer_id"}, "rules": rules()},
    {"data_map": {"members": {}, "subject_key": None, "x-personal": True}, "rules": rules()},
    {"data_map": {"members": {}, "subject_key": None}, "rules": rules(events={"personal": "mask", "sensitive": "drop"})},
    {"data_map": {"members": {}, "subject_key": None}, "rules": {**rules(), "sms": {"personal": "drop",
                                                                                    "sensitive": "drop"}}},
    {"data_map": {"members": {}, "subject_key": None}, "rules": {k: v for k, v in rules().items() if k != "logs"}},
    {"data_map": {"members": {}, "subject_key": None}},
    [],
])
def test_a_bad_data_map_or_rule_is_refused_and_changes_nothing(client, keys, body):
    before = _current(client, keys)
    answer = client.put("/api/privacy", json=body, headers=_h(keys, "alice"))
    assert answer.status_code == 400 and answer.get_json()["error"] == "PRIVACY_SETTINGS_INVALID", answer.get_json()
    assert _current(client, keys) == before


def test_reading_or_changing_needs_admin(client, keys):
    for method in ("get", "put"):
        answer = getattr(client, method)("/api/privacy", json=privacy(), headers=_h(keys, "reader"))
        assert answer.status_code == 403 and answer.get_json()["error"] == "PRIVACY_PERMISSION_DENIED"


def test_the_defaults_hide_personal_members_everywhere_and_hash_them_in_the_dataset(client, keys):
    body = _current(client, keys)
    assert body["privacy"] == {"data_map": {"members": {}, "subject_key": None}, "rules": rules(),
                               "retention": {"facts_days": None}}  # the gate's GATE_FACTS_RETENTION_DAYS


def test_loosening_a_destination_waits_for_a_second_holder_and_masking_more_does_not(client, keys, backend):
    assert client.put("/api/privacy", json=privacy(), headers=_h(keys, "alice")).status_code == 200
    on = client.patch(RELEASE_POLICY, json={"require_approval": True}, headers=_h(keys, "alice"))
    assert on.status_code == 200, on.get_json()
    loose = privacy(events={"personal": "hash", "sensitive": "drop", "members": {"context.customer_id": "keep"}})
    asked = client.put("/api/privacy", json=loose, headers=_h(keys, "alice"))
    assert asked.status_code == 202, asked.get_json()
    event = asked.get_json()["event"]
    assert (event["setting"], event["action"]) == ("privacy", "policy_request")
    assert event["weakens"] == ["events: personal drop -> hash", "events: context.actor drop -> hash",
                                "events: context.customer_id drop -> keep",
                                "events: context.inputs.customer_email drop -> hash"]
    assert _current(client, keys)["privacy"]["rules"]["events"] == {"personal": "drop", "sensitive": "drop"}
    seq = event["seq"]
    for name in ("alice", "alice2"):  # the requester, and another key of the same holder
        refused = client.post("/api/privacy/approvals", json={"request_seq": seq}, headers=_h(keys, name))
        assert refused.status_code == 403 and refused.get_json()["error"] == "GOVERNANCE_SELF_APPROVAL"
    assert _current(client, keys)["privacy"]["rules"]["events"]["personal"] == "drop"
    approved = client.post("/api/privacy/approvals", json={"request_seq": seq}, headers=_h(keys, "bob"))
    assert approved.status_code == 200, approved.get_json()
    assert _current(client, keys)["privacy"]["rules"]["events"]["personal"] == "hash"
    # masking more (and declaring more) is never a weakening: in force at once
    strict = copy.deepcopy(privacy())
    strict["data_map"]["members"]["context.inputs.margin_percent"] = "sensitive"
    done = client.put("/api/privacy", json=strict, headers=_h(keys, "alice"))
    assert done.status_code == 200 and done.get_json()["requested"] is False
    # declassifying a member, or moving the subject key, lets more out: a request again
    for looser in ({**privacy(), "data_map": {"members": {}, "subject_key": "context.customer_id"}},
                   {**privacy(), "data_map": {**privacy()["data_map"], "subject_key": "context.subject"}}):
        assert client.put("/api/privacy", json=looser, headers=_h(keys, "alice")).status_code == 202


@pytest.mark.parametrize("retention", [{"facts_days": 0}, {"facts_days": 36501}, {"facts_days": "30"},
                                       {"facts_days": 30, "erase": True}, {}])
def test_a_bad_retention_is_refused_and_changes_nothing(client, keys, retention):
    before = _current(client, keys)
    answer = client.put("/api/privacy", json={**privacy(), "retention": retention}, headers=_h(keys, "alice"))
    assert answer.status_code == 400 and answer.get_json()["error"] == "PRIVACY_SETTINGS_INVALID", answer.get_json()
    assert _current(client, keys) == before


def test_a_retention_change_either_way_waits_for_a_second_holder(client, keys, backend):
    """Kept longer keeps personal data longer; kept shorter removes evidence sooner, for good:
    while the scope requires approvals, both are requests a second holder approves."""
    assert client.put("/api/privacy", json={**privacy(), "retention": {"facts_days": 30}},
                      headers=_h(keys, "alice")).status_code == 200
    on = client.patch(RELEASE_POLICY, json={"require_approval": True}, headers=_h(keys, "alice"))
    assert on.status_code == 200, on.get_json()
    for days, why in ((90, "personal data kept longer"), (7, "inputs removed sooner"),
                      (None, "to or from the gate's GATE_FACTS_RETENTION_DAYS")):
        asked = client.put("/api/privacy", json={**privacy(), "retention": {"facts_days": days}},
                           headers=_h(keys, "alice"))
        assert asked.status_code == 202, asked.get_json()
        assert asked.get_json()["event"]["weakens"] == [f"retention: facts_days 30 -> {days} ({why})"]
        assert _current(client, keys)["privacy"]["retention"] == {"facts_days": 30}
    seq = asked.get_json()["event"]["seq"]
    approved = client.post("/api/privacy/approvals", json={"request_seq": seq}, headers=_h(keys, "bob"))
    assert approved.status_code == 200, approved.get_json()
    assert _current(client, keys)["privacy"]["retention"] == {"facts_days": None}


def test_weakenings_are_computed_per_member_class_and_subject_key():
    declared = DataMap({"context.a": "personal", "context.b": "sensitive"}, "context.id")
    base = PrivacySettings(declared)
    assert weakenings(base, base) == ()
    sensitive_kept = PrivacySettings(declared, {**base.rules, "logs": Rule("drop", "keep")})
    assert weakenings(base, sensitive_kept) == ("logs: sensitive drop -> keep", "logs: context.b drop -> keep")
    assert weakenings(sensitive_kept, base) == ()
    assert weakenings(base, PrivacySettings(DataMap({"context.a": "personal"}, "context.id"))) == (
        "events: context.b drop -> keep", "notices: context.b drop -> keep", "dataset: context.b hash -> keep",
        "logs: context.b drop -> keep", "mcp: context.b drop -> keep")
    assert weakenings(base, PrivacySettings(DataMap(declared.members, None)))[-1] == "subject_key: context.id -> None"


def test_one_module_answers_what_a_member_is_and_whose():
    data_map = DataMap({"context.inputs.customer_email": "personal", "context.note": "sensitive"},
                       "context.customer_id")
    assert data_map.class_of("context.customer_id") == "personal"  # the subject's key is personal
    assert data_map.class_of("context.note") == "sensitive"
    assert data_map.class_of("context.inputs.margin_percent") is None
    body = approved_request()
    body["context"].update(customer_id="cus_1", note=None)
    body["context"]["inputs"]["customer_email"] = "a@b.c"
    found = found_in(data_map, body)
    assert found.subject == "cus_1"
    assert found.members == (("context.customer_id", "personal", "cus_1"),
                             ("context.inputs.customer_email", "personal", "a@b.c"))


def test_an_annotated_input_schema_stays_refused_as_the_reference_refuses_it(client, keys):
    body = approved_request()
    body["rulebook"]["input_schema"]["properties"]["customer_email"] = {"type": "string", "x-personal": "personal"}
    answer = client.post("/api/decide", json=body, headers=_h(keys, "alice"))
    assert answer.status_code == 422 and answer.get_json()["error"] == "RULEBOOK_INVALID"


def test_the_key_file_is_made_only_when_a_scope_first_hashes(tmp_path):
    from gate.ledger import Ledger
    from gate.services.governance import SafeguardSettings
    from gate.services.privacy import PrivacyService, load_key

    key_file = tmp_path / "home" / "privacy.key"
    ledger = Ledger(f"sqlite:///{tmp_path / 'gate.db'}")
    ledger.upgrade()
    service = PrivacyService(ledger, SafeguardSettings(ledger), lambda: load_key(None, key_file))
    assert not service.masker("tenant_a", "logs", approved_request()).active
    assert not key_file.exists()  # nothing declared: nothing hashed, no key read or made
    first = service.key
    assert key_file.read_text().strip().encode() == first and len(first) == 64
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert load_key(None, key_file) == first  # every process reads the same one
    with pytest.raises(Exception, match="at least 32"):
        load_key("short", key_file)
