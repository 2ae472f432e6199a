"""`gate_client.routing.route`: the caller's routing helper never lets an advisory or failed answer proceed."""

from __future__ import annotations

import pytest

from gate_client.routing import route

BINDING_YES = {"verdict": "yes", "c": "yes", "record_hash": "a" * 64}


@pytest.mark.parametrize("status, body, expected", [
    (200, BINDING_YES, "proceed"),
    (200, {"verdict": "no", "c": "no"}, "block"),
    (200, {"verdict": "review", "c": "unclear"}, "review"),
    (200, {"verdict": "yes", "c": "unclear"}, "review"),
    (200, {"verdict": "yes"}, "review"),
    # the reference's advisory shape (c yes beside the advisory contract) still never proceeds
    (200, {**BINDING_YES, "decision_contract": {"authority": "advisory_only", "production_verdict": False}}, "review"),
    (200, {**BINDING_YES, "production_binding_required": True}, "review"),
    (200, {**BINDING_YES, "decision_contract": "advisory"}, "review"),
    (200, {**BINDING_YES, "decision_contract": {"authority": "binding"}}, "review"),
    (200, {"verdict": "no", "c": "no", "decision_contract": {"authority": "advisory_only"}}, "block"),
    (200, {**BINDING_YES, "error": "X"}, "review"),
    (401, BINDING_YES, "review"), (429, BINDING_YES, "review"), (502, BINDING_YES, "review"),
    (503, BINDING_YES, "review"), (200, None, "review"), (200, ["yes"], "review"),
])
def test_route(status, body, expected):
    assert route(status, body) == expected
