"""A version its guardrail halted stays halted: the one rule, for every move and for the verifier.

A guardrail's halt (a `halt` event by the actor `guardrail` naming the canary's version as
`evidence.canary_version`) marks that version halted for good. A move that makes a version serve
decides, or asks to, is judged here, whichever shell sent it (the API, `gate release`, the
workbench) and whatever path it takes:

* `activate` and `canary` (applied, or requested where approvals are required) serve their `version`;
* `rollback` serves the version it restores, the state's newest `previous`;
* `approve` serves the version of the pending request it applies (a canary or an activation).

A halt binds the version's rules, not only its label (issue 64): a version whose rules hash
(`rules_hash`: the rulebook less its `version` label) is a halted version's is halted
too, so the halted rules republished as `v1-again` do not serve. The service finds such a version
(it holds the rulebooks) and states it in the move's `evidence` as `same_rules_as` (the halted
version), which the signed event keeps, so the offline verifier judges that event as the service
did; a history cannot show rules, so an event that states nothing is judged by its label alone.

Such a move of a halted version needs `override: "guardrail_halt"` and a `reason` in the signed
event; an override on any other move is refused. `ReleaseMoves.act` raises the refusal (and asks
the `admin` permission of an override, which a history cannot show), and `verify_history` reports
it for an event of a signed history, so a history in which a halted version was made to serve
without the override does not verify. A shadow never answers a decide: a halted version may be
shadowed (its verdicts beside the live ones answer nobody), and a `halt` stops what serves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gate.protocol.canonical import sha256_hex
from gate.releases.model import ReleaseRefused, ReleaseState
from gate.strict_json import JsonValue

OVERRIDE_HALT = "guardrail_halt"  # an admin's move that makes a version its guardrail halted serve
SAME_RULES = "same_rules_as"  # a move's evidence: the halted version whose rules it makes serve
_NOT_RULES = ("version",)  # a rulebook's members that decide nothing


def rules_hash(rulebook: Mapping[str, JsonValue]) -> str:
    """The hash of what a rulebook decides by: every member but its version label (which
    `rulebook_hash` covers too), so the same rules under another label hash the same."""
    return sha256_hex({name: value for name, value in rulebook.items() if name not in _NOT_RULES})


def same_rules_as(move: Mapping[str, JsonValue], halted: frozenset[str]) -> str | None:
    """The halted version a move's evidence states it makes serve the rules of (None: none, or
    one that is not halted)."""
    evidence = move.get("evidence")
    named = evidence.get(SAME_RULES) if isinstance(evidence, Mapping) else None
    return named if isinstance(named, str) and named in halted else None


def halted_version(event: Mapping[str, JsonValue]) -> str | None:
    """The version a guardrail halted, when the event is such a halt."""
    if event.get("action") != "halt" or event.get("actor") != "guardrail":
        return None
    evidence = event.get("evidence")
    version = evidence.get("canary_version") if isinstance(evidence, Mapping) else None
    return version if isinstance(version, str) else None


def halted_versions(events: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Every version the guardrail halted in these events (a halt binds for good)."""
    return frozenset(version for version in map(halted_version, events) if version is not None)


def serving_version(move: Mapping[str, JsonValue], state: ReleaseState) -> str | None:
    """The version a move (a request body or an event) on `state` makes serve decides, or asks
    to; None for a move that makes no version serve (shadow, halt) or names nothing to serve."""
    action = move.get("action")
    if action in ("activate", "canary"):
        version = move.get("version")
        return version if isinstance(version, str) else None
    if action == "rollback":
        return state.previous[-1].version if state.previous else None
    if action == "approve":
        request = next((p for p in state.pending if p.seq == move.get("request_seq")), None)
        return request.version.version if request is not None else None
    return None


def halt_refusal(move: Mapping[str, JsonValue], state: ReleaseState, halted: frozenset[str]) -> ReleaseRefused | None:
    """Why the move may not be made as stated (None when it may): a halted version (or the rules
    of one, `same_rules_as`) made to serve without the override and a reason, or an override where
    no halted version is made to serve."""
    version = serving_version(move, state)
    same = same_rules_as(move, halted)
    if version is None or (version not in halted and same is None):
        if move.get("override") is not None:
            return ReleaseRefused("RELEASE_ACTION_INVALID", "override applies only to a move that makes a version "
                                  "its guardrail halted serve", 400)
        return None
    if move.get("override") != OVERRIDE_HALT or not move.get("reason"):
        served = f"version {version!r}" if version in halted else f"version {version!r}, the rules of version {same!r},"
        return ReleaseRefused("RELEASE_VERSION_HALTED", f"{move.get('action')} makes {served} serve, "
                              f"which its guardrail halted: only an admin does so, with override {OVERRIDE_HALT!r} "
                              "and a reason", version=version)  # 409, ReleaseRefused's status
    return None


__all__ = ["OVERRIDE_HALT", "SAME_RULES", "halt_refusal", "halted_version", "halted_versions", "rules_hash",
           "same_rules_as", "serving_version"]
