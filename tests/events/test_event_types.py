"""docs/events.md lists exactly the event types the gate can write, and every setting it names; each
type's data is declared once as JSON Schema, checked when an event is written, and documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gate import bodies
from gate.events.cloudevent import EVENT_TYPES, cloud_event

DOC = (Path(__file__).resolve().parents[2] / "docs" / "events.md").read_text()


def test_the_types_table_lists_every_type_and_no_other():
    table = DOC.split("## Types", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([a-z_.]+)` \|", table, flags=re.MULTILINE))
    assert documented == set(EVENT_TYPES)


def _members(text: str) -> set[str]:
    """The backquoted member names of a list, leaving out what parentheses say about them."""
    previous = None
    while previous != text:
        previous, text = text, re.sub(r"\([^()]*\)", "", text)
    return set(re.findall(r"`([a-z_]+)`", text))


def _group(name: str) -> set[str]:
    return _members(DOC.split(f"{name} members:", 1)[1].split("\n\n", 1)[0])


def _schema_members(event_type: str) -> set[str]:
    """Every member a type's data schema allows (its own, and those of a member set it refers to)."""
    definitions = bodies.schema(bodies.EVENT_DATA)["$defs"]
    node = definitions[event_type]
    members = set(node.get("properties", {}))
    if "$ref" in node:
        members |= set(definitions[node["$ref"].rsplit("/", 1)[1]]["properties"])
    return members


def test_every_type_has_one_data_schema_and_the_docs_list_its_members():
    assert set(bodies.event_types()) == set(EVENT_TYPES)
    table = DOC.split("## Types", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_.]+)` \| .* \| ([^|]*) \|$", table, flags=re.MULTILINE)
    assert {name for name, _ in rows} == set(EVENT_TYPES)
    for name, cell in rows:
        documented = _members(cell)
        for group in ("release", "governance", "hold"):
            if f"{group} members" in cell:
                documented |= _group(group.capitalize())
        assert documented == _schema_members(name), name


def test_a_payload_the_schema_does_not_describe_is_never_written():
    good = {"rulebook_id": "refunds", "version": "v1", "rulebook_hash": "a" * 64}
    assert cloud_event("acme", 1, "rulebook.published", "refunds", "2026-01-01T00:00:00.000Z", good)["data"] == good
    for bad in ({**good, "extra": 1}, {"rulebook_id": "refunds", "version": "v1"}, {**good, "version": 1}):
        with pytest.raises(bodies.EventDataInvalid, match=r"rulebook\.published data does not match its schema"):
            cloud_event("acme", 1, "rulebook.published", "refunds", "2026-01-01T00:00:00.000Z", bad)
    with pytest.raises(ValueError, match="unknown event type"):
        cloud_event("acme", 1, "rulebook.deleted", None, "2026-01-01T00:00:00.000Z", good)


def test_shared_member_sets_hold_types_closed():
    hold = {"decision_id": "dec_1", "record_hash": "a" * 64, "queue": "default", "outcome": None,
            "inbox_url": None, "hold_event": {"hold_event_version": "hold_event_v1", "event_hash": "b" * 64}}
    bodies.check_event_data("hold.claimed", hold)
    for bad in ({**hold, "outcome": "maybe"}, {**hold, "policy": {}}, {k: v for k, v in hold.items() if k != "queue"}):
        with pytest.raises(bodies.EventDataInvalid):
            bodies.check_event_data("hold.claimed", bad)


@pytest.mark.parametrize(("event_type", "good"), [
    ("decision.created", {"decision_id": "dec_1", "record_hash": "a" * 64, "receipt_hash": "b" * 64,
                          "audit_chain": {"chain_position": 1}, "record": {"decision_id": "dec_1"}}),
    ("hold.opened", {"decision_id": "dec_1", "record_hash": "a" * 64, "queue": "default", "priority": "high",
                     "deadline_at": "2026-01-01T00:00:00.000Z", "policy_id": None, "rule_id": "r",
                     "reason_code": None, "inbox_url": None}),
])
def test_the_quick_check_of_a_decides_announcements_refuses_what_the_schema_refuses(event_type, good):
    # The decide's announcements are accepted by a plain-Python check of their simple shapes
    # (`gate.bodies`); whatever it takes, the schema's validator must take too, member by member.
    quick = bodies.quick_event_check(event_type)
    assert quick is not None and quick(good)
    strict = bodies.event_validator(event_type)
    wrong_values = (None, True, 1, 1.5, "x", [], {}, "urgent", ["x"])
    candidates = [good, dict(good, extra=1), *({k: v for k, v in good.items() if k != name} for name in good),
                  *(dict(good, **{name: value}) for name in good for value in wrong_values), [good], None]
    for data in candidates:
        valid = isinstance(data, dict) and next(strict.iter_errors(data), None) is None
        if valid:
            bodies.check_event_data(event_type, data)
        else:
            with pytest.raises(bodies.EventDataInvalid):
                bodies.check_event_data(event_type, data)
