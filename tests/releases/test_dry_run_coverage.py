"""Issue 64/5, the pure rule: the chain head a dry-run covered must be one this scope's chain had
(a prefix of it now) and leave out no decision older than `dry_run_max_age_seconds`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gate.releases.guards import head_problem, scope_problem

NOW = datetime(2026, 11, 27, 12, tzinfo=UTC)
HEAD = {"chain_id": "chain_a", "size": 6, "head_link_hash": "a" * 64}
CURRENT = {"chain_id": "chain_a", "size": 9, "scope": "tenant_a"}


def test_the_scope_a_dry_run_ran_over_is_the_activations():
    assert scope_problem({"scope": "tenant_a"}, "tenant_a") is None
    assert "another scope's history" in str(scope_problem({"scope": "tenant_b"}, "tenant_a"))
    assert "every scope's history" in str(scope_problem({"scope": None}, "tenant_a"))


def test_a_covered_head_is_a_prefix_of_this_scopes_chain():
    assert head_problem(HEAD, {**CURRENT, "size": 6}, "a" * 64, None, NOW, 3600) is None
    for current, covered in ((None, None), ({**CURRENT, "chain_id": "chain_b"}, "a" * 64),
                             ({**CURRENT, "size": 5}, "a" * 64), (CURRENT, "b" * 64)):
        assert "does not hold" in str(head_problem(HEAD, current, covered, None, NOW, 3600))


def test_a_head_older_than_the_bound_is_refused():
    recent = NOW - timedelta(seconds=3599)
    assert head_problem(HEAD, CURRENT, "a" * 64, recent, NOW, 3600) is None
    old = head_problem(HEAD, CURRENT, "a" * 64, NOW - timedelta(seconds=3601), NOW, 3600)
    assert old is not None and "6 of 9 decisions" in old and "dry_run_max_age_seconds" in old
