"""A release's moves (docs/releases.md): shadow, canary, activate, halt, rollback and approve,
each checked (the body, the principal's right, the halt rule, the policy's dry-run and its
coverage of the scope's history) and written as one signed, chained release event with its
announcement. The state the move starts from and the policy it obeys are read through the
release's `ReleaseReader`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from gate.chain.links import scope_hash
from gate.clock import Clock, iso_ms
from gate.errors import GateError, SigningUnavailable
from gate.keys.config import LiveSigning, SigningSetup
from gate.keys.signing import ReceiptSigner
from gate.ledger.releases import Announcement, ReleaseRace
from gate.principals import Permission, Permissions, Principal, require
from gate.protocol.canonical import canonical_text, sha256_hex
from gate.releases.events import EventInputs, ReleaseEvent, build_event
from gate.releases.guards import head_problem, manifest_problems, scope_problem, stated_head
from gate.releases.halts import (
    OVERRIDE_HALT,
    SAME_RULES,
    halt_refusal,
    halted_versions,
    rules_hash,
    serving_version,
)
from gate.releases.model import Action, ReleaseState, Version
from gate.releases.policy import ReleasePolicy, needs_dry_run
from gate.services.release_reads import ReleaseReader

_BODY_MEMBERS = {"action", "version", "percent", "subject", "reason", "migration_manifest_hash", "request_seq",
                 "rulebook_hash", "migration_manifest", "override"}
_SUBJECT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63}){0,7}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_ACTION_PERMISSION: dict[str, Permission] = {"approve": "approve"}
RELEASE_DENIED = "RELEASE_PERMISSION_DENIED"  # the code of every right a release step lacks


# A release event's announcement type (docs/events.md); a canary or activation that waits for a
# second principal is announced as a request, not as the move it asks for.
_ANNOUNCED = {"shadow": "release.shadow", "canary": "release.canary", "activate": "release.activated",
              "halt": "release.halted", "rollback": "release.rolled_back", "approve": "release.approved"}
_ANNOUNCED_MEMBERS = ("rulebook_id", "seq", "action", "actor", "principal", "override", "created_at", "version",
                      "rulebook_hash", "percent",
                      "request_seq", "reason", "evidence", "event_hash", "previous_event_hash", "key_id")


def announcement(scope: str, event: Mapping[str, Any]) -> Announcement:
    """The outbox event of a signed release event: its members a receiver acts on, and the
    event hash that lets it fetch the history and verify the event (`gate verify`)."""
    name = _ANNOUNCED[str(event["action"])]
    if event["action"] in ("canary", "activate") and event.get("approval_expires_at") is not None:
        name = "release.approval_requested"
    data = {member: event.get(member) for member in _ANNOUNCED_MEMBERS}
    data["approval_expires_at"] = event.get("approval_expires_at")
    return Announcement(name, {"scope": scope, **data})


def _require(principal: Principal, permissions: Permissions, permission: Permission) -> None:
    """The service's own check of a principal's right (whatever a page or route already hid)."""
    if not isinstance(principal, Principal):
        raise TypeError("a release or policy change is made by a Principal, never a name")
    require(permissions, permission, RELEASE_DENIED)




class ReleaseMoves:
    """One move of a rulebook's release by an authenticated principal, signed and chained."""

    def __init__(self, reader: ReleaseReader, signing: SigningSetup | LiveSigning, clock: Clock) -> None:
        """Built once by the composition root over the release's one `reader`."""
        self.reader = reader
        self.signing = signing
        self.clock = clock

    def _signer(self) -> ReceiptSigner | None:
        signer = self.signing.receipt_signer()
        if signer is None and self.signing.required:
            raise SigningUnavailable()  # SECURITY: no unsigned release or policy event where signing is required
        return signer

    def act(self, scope: str, principal: Principal, permissions: Permissions, rulebook_id: str, body: Any,
            idempotency_key: str | None = None) -> tuple[dict[str, Any], bool]:
        """Apply one action by an authenticated principal: (the signed event, newly created). The
        same idempotency key with the same body answers the same event; with another body it is 409."""
        if not isinstance(principal, Principal):
            raise TypeError("a release action is taken by a Principal, never a name")
        checked = self._checked_body(body)
        _require(principal, permissions, _ACTION_PERMISSION.get(checked["action"], "release"))
        self.reader.known(scope, rulebook_id)
        request_hash = sha256_hex({"actor": principal.actor, "body": checked})
        for _attempt in range(8):
            if idempotency_key is not None:
                known = self.reader.store.by_idempotency(scope, rulebook_id, idempotency_key)
                if known is not None:
                    if known["request_hash"] != request_hash:
                        raise GateError("RELEASE_IDEMPOTENCY_CONFLICT",
                                        "this idempotency key was already used with another release request")
                    return json.loads(known["event_json"]), False
            event = self._event(scope, principal, permissions, rulebook_id, checked)
            try:
                self.reader.store.append({"scope": scope, "rulebook_id": rulebook_id, "seq": event["seq"],
                                   "action": event["action"], "event_hash": event["event_hash"],
                                   "idempotency_key": idempotency_key, "request_hash": request_hash,
                                   "created_at": event["created_at"], "event_json": canonical_text(event)},
                                  announcement(scope, event))
            except ReleaseRace:
                continue  # another transition took this seq (or this key): read the new head
            self.reader.state(scope, rulebook_id, fresh=True)
            return {**event}, True  # the event as its shells serve it: a JSON object
        raise GateError("LEDGER_UNAVAILABLE", "release transitions raced too often; retry")

    def _event(self, scope: str, principal: Principal, permissions: Permissions, rulebook_id: str,
               checked: dict[str, Any]) -> ReleaseEvent:
        state = self.reader.state(scope, rulebook_id, fresh=True)
        governance = self.reader.governance(scope, fresh=True)
        policy = self.reader.policy_of(scope, governance)
        name = checked["action"]
        now = self.clock.now()
        version = self.reader.version(scope, rulebook_id, checked["version"]) if checked.get("version") is not None else None
        if name == "approve" and version is not None and checked.get("rulebook_hash") != version.rulebook_hash:
            raise GateError("RELEASE_APPROVAL_MISMATCH", "rulebook_hash is not the published hash of this version")
        expires = None
        if name in ("canary", "activate") and policy.require_approval:
            expires = iso_ms(_utc(now) + timedelta(seconds=policy.approval_ttl_seconds))
        # SECURITY: every halt of the release, not the newest page of its history: a halt 1,000
        # events back binds as much as the last one (issue 41 mutation finding).
        halted = halted_versions(self.reader.store.halt_events(scope, rulebook_id))
        checked = self._same_rules(scope, rulebook_id, state, checked, halted)
        override = self._halt_override(state, checked, permissions, halted)
        manifest_hash = self._dry_run_evidence(scope, rulebook_id, policy, checked, version, now)
        action = Action(name, principal.actor, iso_ms(now), version, checked.get("percent"),
                        checked.get("subject") if name == "canary" else None, checked.get("request_seq"), expires,
                        holder=principal.holder)
        inputs = EventInputs(scope_hash(scope), checked.get("reason"), manifest_hash, checked.get("evidence"),
                             principal, governance.seq, override)
        event, _after = build_event(state, action, inputs, self._signer())
        return event

    def _same_rules(self, scope: str, rulebook_id: str, state: ReleaseState, checked: dict[str, Any],
                    halted: frozenset[str]) -> dict[str, Any]:
        """`checked` with its evidence naming the halted version whose rules (`rules_hash`) the
        move makes serve under another label (issue 64), which the signed event keeps; a caller's
        own `same_rules_as` is never taken."""
        evidence = checked.get("evidence")
        kept = {k: v for k, v in evidence.items() if k != SAME_RULES} if isinstance(evidence, Mapping) else evidence
        checked = {**checked, "evidence": kept} if kept is not None else checked
        version = serving_version(checked, state)
        if version is None or version in halted or not halted:
            return checked
        served = self._rules_hash(scope, rulebook_id, version)
        same = next((name for name in sorted(halted) if self._rules_hash(scope, rulebook_id, name) == served), None)
        if served is None or same is None:
            return checked
        return {**checked, "evidence": {**(kept if isinstance(kept, Mapping) else {}), SAME_RULES: same}}

    def _rules_hash(self, scope: str, rulebook_id: str, version: str) -> str | None:
        snapshot = self.reader.snapshots.bound_snapshot(scope, rulebook_id, version)
        return rules_hash(json.loads(snapshot["body_json"])) if snapshot is not None else None

    def _halt_override(self, state: ReleaseState, checked: Mapping[str, Any], permissions: Permissions,
                       halted: frozenset[str]) -> str | None:
        """The halt rule (gate.releases.halts) for every move: a version its guardrail halted (or
        one with its rules) is made to serve (activated, a canary, rolled back to, requested or
        approved) only by an admin who says so and why; the override it records."""
        refusal = halt_refusal(checked, state, halted)
        if refusal is not None:
            raise refusal
        if checked.get("override") is None:
            return None
        require(permissions, "admin", RELEASE_DENIED)
        return OVERRIDE_HALT

    def _dry_run_evidence(self, scope: str, rulebook_id: str, policy: ReleasePolicy, checked: Mapping[str, Any],
                          version: Version | None, now: datetime) -> str | None:
        """The migration_hash the event records: a passed manifest's, checked in full, where the
        policy asks for one (or whenever one is passed); else the hash the caller stated, if any."""
        manifest = checked.get("migration_manifest")
        if manifest is None:
            if needs_dry_run(policy, checked["action"], checked.get("percent")):
                raise GateError("RELEASE_DRY_RUN_REQUIRED", f"this scope's policy requires a signed dry-run manifest "
                                f"of the version for {checked['action']}: pass migration_manifest")
            stated: str | None = checked.get("migration_manifest_hash")
            return stated
        if version is None or checked["action"] not in ("canary", "activate"):
            raise GateError("RELEASE_ACTION_INVALID", "migration_manifest goes with a canary or an activation")
        problems = manifest_problems(manifest, rulebook_id, version, self.signing.trust_anchors(), _utc(now),
                                     policy.dry_run_max_age_seconds)
        if not problems:  # a verified manifest: is it of this scope's history, recent enough? (issue 64)
            problems = self._coverage_problems(scope, manifest["dry_run"], _utc(now), policy.dry_run_max_age_seconds)
        if problems:
            raise GateError("RELEASE_DRY_RUN_REJECTED", problems[0], problems=problems)
        digest: str = manifest["migration_hash"]
        if checked.get("migration_manifest_hash") not in (None, digest):
            raise GateError("RELEASE_ACTION_INVALID", "migration_manifest_hash is not the passed manifest's")
        return digest

    def _coverage_problems(self, scope: str, dry_run: Mapping[str, Any], now: datetime,
                           max_age_seconds: int) -> list[str]:
        """A dry-run of another scope (or every scope) is refused; one that states the scope's chain
        head it read must cover a head this scope's chain had, left out nothing older than the bound."""
        wrong_scope = scope_problem(dry_run, scope)
        if wrong_scope is not None:
            return [wrong_scope]
        head = stated_head(dry_run)
        if head is None:
            return []
        current = self.reader.ledger.chain_head(str(head.get("chain_id")))
        stated = head.get("size")
        size = stated if isinstance(stated, int) and not isinstance(stated, bool) else -1
        if current is None or current["scope"] != scope or size < 0:
            current, links = None, []
        else:
            links = self.reader.ledger.chain_links_window(current["chain_id"], size, size + 1)
        covered = next((link["link_hash"] for link in links if link["chain_position"] == size), None)
        left_out = next((link for link in links if link["chain_position"] == size + 1), None)
        stored = self.reader.ledger.decision(scope, left_out["decision_id"]) if left_out is not None else None
        first_left_out = _utc(datetime.fromisoformat(stored.created_at.replace("Z", "+00:00"))) if stored else None
        problem = head_problem(head, current, covered, first_left_out, now, max_age_seconds)
        return [problem] if problem else []

    @staticmethod
    def _checked_body(body: Any) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise GateError("RELEASE_ACTION_INVALID", "the body must be a JSON object")
        unknown = sorted(set(body) - _BODY_MEMBERS - {"evidence"})
        if unknown:
            raise GateError("RELEASE_ACTION_INVALID", f"unknown member(s): {', '.join(unknown)}")
        problems = _body_problems(body)
        if problems:
            raise GateError("RELEASE_ACTION_INVALID", problems[0], problems=problems)
        return {k: v for k, v in body.items() if v is not None}



def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _body_problems(body: Mapping[str, Any]) -> list[str]:
    problems = []
    action = body.get("action")
    if not isinstance(action, str):
        problems.append("action is required: shadow, canary, activate, halt, rollback or approve")
    percent = body.get("percent")
    if percent is not None and (isinstance(percent, bool) or not isinstance(percent, (int, float))):
        problems.append("percent must be a number")
    for name, limit in (("reason", 500), ("version", 80)):
        value = body.get(name)
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= limit):
            problems.append(f"{name} must be a string of 1 to {limit} characters")
    subject = body.get("subject")
    if subject is not None and (not isinstance(subject, str) or not _SUBJECT.fullmatch(subject)):
        problems.append("subject must be a dotted path such as context.source_record_id")
    for name in ("migration_manifest_hash", "rulebook_hash"):
        value = body.get(name)
        if value is not None and (not isinstance(value, str) or not _HEX64.fullmatch(value)):
            problems.append(f"{name} must be 64 lowercase hex characters")
    seq = body.get("request_seq")
    if seq is not None and (type(seq) is not int or seq < 1):
        problems.append("request_seq must be a positive integer")
    if action == "approve" and (seq is None or body.get("version") is None or body.get("rulebook_hash") is None):
        problems.append("approve needs request_seq, and the requested version with its rulebook_hash")
    evidence = body.get("evidence")
    if evidence is not None and not isinstance(evidence, Mapping):
        problems.append("evidence must be an object")
    if body.get("migration_manifest") is not None and not isinstance(body.get("migration_manifest"), Mapping):
        problems.append("migration_manifest must be a dry-run's manifest (a JSON object)")
    if body.get("override") not in (None, OVERRIDE_HALT):
        problems.append(f"override, when given, is {OVERRIDE_HALT!r} (an admin making a version its guardrail "
                        "halted serve again, with a reason)")
    return problems
