"""A release on the decide path (docs/releases.md): a decide by reference routed to the version
its release says (active, canary by subject, pinned, or a retry's own), an inline decide of a
released id checked against the active version, and each decide's release row, with the
shadow's verdict on the same facts and the record's arm block. It reads through the release's
`ReleaseReader` and counts canary decides for its `ReleaseGuardrails`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, cast

from gate.errors import GateError
from gate.ledger import StoredSnapshot
from gate.ledger.releases import ReleaseDecisionRow, ShadowColumns
from gate.protocol.canonical import sha256_hex
from gate.protocol.release_arm import ArmBlock
from gate.releases.model import Version, in_canary, subject_value
from gate.rulebook import get_evaluator
from gate.rulebook.budget import check_evaluation_cost
from gate.services.pipeline import Caller
from gate.services.release_guards import ReleaseGuardrails
from gate.services.release_reads import ReleaseReader
from gate.strict_json import JsonValue

ARM_BLOCK_VERSION = "release_arm_v1"


@dataclass(frozen=True, slots=True)
class Routed:
    """Where a decide by reference went: the version that decided, and why."""

    rulebook_id: str
    version: str
    arm: str  # active | canary | pinned
    release_seq: int
    subject_hash: str | None


@dataclass(frozen=True, slots=True)
class Observed:
    """What a release adds to a decide: its row, the record's arm block, response headers."""

    row: ReleaseDecisionRow | None
    arm_block: ArmBlock | None
    headers: tuple[tuple[str, str], ...]


class RulebookRef(TypedDict):
    """A decide body's `rulebook_ref` once checked (`checked_ref`)."""

    rulebook_id: str
    version: NotRequired[str]


def checked_ref(body: Mapping[str, JsonValue]) -> RulebookRef:
    """A decide body's `rulebook_ref`, `{rulebook_id, version?}` (strings) in place of `rulebook`
    (gate/bodies/decide.schema.json), or RULEBOOK_REF_INVALID."""
    ref = body.get("rulebook_ref")
    if "rulebook" in body or not isinstance(ref, Mapping) or set(ref) - {"rulebook_id", "version"} \
            or not isinstance(ref.get("rulebook_id"), str) \
            or not isinstance(ref.get("version", ""), str):
        raise GateError("RULEBOOK_REF_INVALID", "rulebook_ref is {rulebook_id, version?} (strings) and replaces "
                        "rulebook: send one of them")
    return cast(RulebookRef, ref)  # checked just above: only these members, each a string


class ReleaseRouter:
    """Route, check and observe decides for the releases of the caller's scope."""

    def __init__(self, reader: ReleaseReader, guardrails: ReleaseGuardrails) -> None:
        """Built once by the composition root over the release's `reader` and `guardrails`."""
        self.reader = reader
        self.guardrails = guardrails

    def prior_version(self, scope: str, idempotency_key: str | None, rulebook_id: str) -> str | None:
        """The version of `rulebook_id` an earlier decide under this idempotency key ran (a retry
        stays in its arm); None when the key is new or was used for another rulebook (whose replay
        then answers the idempotency conflict)."""
        if idempotency_key is None:
            return None
        stored = self.reader.ledger.decision_by_idempotency(scope, idempotency_key)
        if stored is None or stored.columns.get("policy_id") != rulebook_id:
            return None
        # the decisions table's text column: a version's text, or NULL (a decide that named none)
        return cast("str | None", stored.columns.get("policy_version"))

    def route(self, caller: Caller, body: dict[str, JsonValue], idempotency_key: str | None,
              prior_version: Callable[[str], str | None] | None = None) -> tuple[dict[str, JsonValue], Routed]:
        """The request an inline decide of the referenced version would be, and where it went.
        `prior_version(rulebook_id)` names the version an earlier decide under the same
        idempotency key ran (by default read from the ledger: `prior_version`), so a retry replays
        in its arm whatever the release did since."""
        ref = checked_ref(body)
        rulebook_id, scope = ref["rulebook_id"], caller.scope
        state = self.reader.state(scope, rulebook_id)
        version, arm, subject_hash = ref.get("version"), "pinned", None
        if version is None:
            prior = prior_version or (lambda rid: self.prior_version(scope, idempotency_key, rid))
            version = prior(rulebook_id) if idempotency_key is not None else None
            arm = "replayed" if version is not None else "active"
        if version is None:
            if state.active is None:
                self.reader.known(scope, rulebook_id)  # 404 for an id not published here, before the 409
                raise GateError("RULEBOOK_NOT_ACTIVE", f"rulebook {rulebook_id!r} has no active version: activate "
                                "one (POST /api/decision/rulebooks/{id}/release) or name a version")
            version = state.active.version
            if state.canary is not None:
                subject = subject_value(body, state.canary.subject, sha256_hex(body))
                subject_hash = sha256_hex(subject)
                if in_canary(state.canary, scope, rulebook_id, subject):
                    version, arm = state.canary.version.version, "canary"
        snapshot = self.reader.snapshots.bound_snapshot(scope, rulebook_id, version)
        if snapshot is None:
            raise GateError("RULEBOOK_NOT_FOUND", f"version {version!r} of this rulebook is not published in this scope")
        request = {k: v for k, v in body.items() if k != "rulebook_ref"}
        request["rulebook"] = self._body(snapshot)
        return request, Routed(rulebook_id, version, arm, state.seq, subject_hash)

    def _body(self, snapshot: StoredSnapshot) -> dict[str, JsonValue]:
        """A fresh parse of the snapshot's canonical body (the decide path must not share a
        mutable document between requests)."""
        fresh: dict[str, JsonValue] = json.loads(snapshot["body_json"])
        return fresh

    def check_inline(self, scope: str, rulebook: Mapping[str, Any], rulebook_hash: str) -> tuple[tuple[str, str], ...]:
        """An inline decide of a released id: the superseded header, or 409 when the scope refuses."""
        rulebook_id = rulebook.get("rulebook_id")
        if not isinstance(rulebook_id, str):
            return ()
        active = self.reader.state(scope, rulebook_id).active
        if active is None or active.rulebook_hash == rulebook_hash:
            return ()
        if self.reader.policy(scope).refuse_superseded_inline:
            raise GateError("RULEBOOK_SUPERSEDED", f"rulebook {rulebook_id!r} has an active release, version "
                            f"{active.version!r}, with other content: decide by reference or send that version",
                            active_version=active.version)
        return (("x-decision-rulebook-superseded-by", active.version),)

    def observe(self, scope: str, record: Mapping[str, Any], facts: Mapping[str, Any],
                routed: Routed | None) -> Observed:
        """The release row of a decide (arm, and the shadow's result on the same facts), and the
        arm block its record carries when it was decided by reference."""
        rulebook_id = record.get("policy_id")
        if not isinstance(rulebook_id, str):
            return Observed(None, None, ())
        state = self.reader.state(scope, rulebook_id)
        if state.seq == 0 and routed is None:
            return Observed(None, None, ())
        shadow: ShadowColumns = {}
        if state.shadow is not None and state.shadow.version != record["policy_version"]:
            shadow = self._shadow(scope, rulebook_id, state.shadow, facts)
        row: ReleaseDecisionRow = {
            "decision_id": record["decision_id"], "scope": scope, "rulebook_id": rulebook_id,
            "release_seq": routed.release_seq if routed else state.seq, "arm": routed.arm if routed else "inline",
            "version": record["policy_version"], "verdict": record["verdict"], "created_at": record["created_at"],
            "shadow_version": shadow.get("shadow_version"), "shadow_verdict": shadow.get("shadow_verdict"),
            "shadow_reason_code": shadow.get("shadow_reason_code"),
            "shadow_matched_rule_id": shadow.get("shadow_matched_rule_id"),
        }
        block: ArmBlock | None = None
        if routed is not None:
            block = {"release_arm_version": ARM_BLOCK_VERSION, "rulebook_id": rulebook_id,
                     "version": routed.version, "arm": routed.arm, "release_seq": routed.release_seq,
                     "subject_hash": routed.subject_hash}
            if routed.arm == "canary":
                self.guardrails.count_canary_decide(scope, rulebook_id)
        return Observed(row, block, ())

    def _shadow(self, scope: str, rulebook_id: str, shadow: Version, facts: Mapping[str, JsonValue]) -> ShadowColumns:
        """The shadow version on the live decision's facts (no adapter runs again). A shadow that
        cannot be evaluated (over budget, invalid) records no verdict; it never fails the decide."""
        snapshot = self.reader.snapshots.bound_snapshot(scope, rulebook_id, shadow.version)
        if snapshot is None:
            return {"shadow_version": shadow.version}
        rulebook = self._body(snapshot)
        try:
            evaluator = get_evaluator(rulebook, shadow.rulebook_hash)
            check_evaluation_cost(evaluator.document, shadow.rulebook_hash, dict(facts))
            evaluation = evaluator.evaluate(dict(facts))
        except GateError:
            return {"shadow_version": shadow.version}
        return {"shadow_version": shadow.version, "shadow_verdict": evaluation.decision,
                "shadow_reason_code": evaluation.reason_code, "shadow_matched_rule_id": evaluation.matched_rule_id}

