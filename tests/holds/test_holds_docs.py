"""docs/holds.md states what the code does: every hold error code, every event member, the policy's
members and the caller's routes (documented or the test fails)."""

from __future__ import annotations

import re
from pathlib import Path

from api.errors import ERROR_TABLE
from api.routes.holds import routes
from gate.chain.sealing import SIGNATURE_MEMBERS
from gate.holds.events import EVENT_MEMBERS, OPTIONAL_MEMBER
from gate.holds.policy import _QUEUE_MEMBERS, PRIORITIES, QUORUMS

DOC = (Path(__file__).resolve().parents[2] / "docs" / "holds.md").read_text()


def test_every_hold_error_code_is_documented():
    codes = [code for code in ERROR_TABLE if code.startswith("HOLD_") and code not in ("HOLD_BUSY",
                                                                                       "HOLD_NOT_ESCALABLE",
                                                                                       "HOLD_POLICY_INVALID")]
    assert codes and [code for code in codes if f"`{code}`" not in DOC] == []


def test_the_event_members_are_listed_in_order():
    section = DOC.split("## The resolution record", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"`([a-z_]+)`", section.split("* `event_hash`", 1)[0])
    assert listed == [*EVENT_MEMBERS, *SIGNATURE_MEMBERS, OPTIONAL_MEMBER]


def test_the_policy_members_quorums_and_priorities_are_documented():
    for name in (*_QUEUE_MEMBERS, *QUORUMS, *PRIORITIES, "four_eyes", "routes"):
        assert f"`{name}`" in DOC, name


def test_every_hold_route_is_in_the_routes_table():
    table = DOC.split("## Routes", 1)[1]
    for endpoint in routes.endpoints:
        path = endpoint.path.replace("{decision_id}", "{id}")
        base = path.rsplit("/", 1)[-1] if path.count("/") > 3 and "holds/{id}/" in path else None
        assert path.split("?")[0] in table or (base and f"/{base}" in table), endpoint.path
