"""Privacy, the use case (issue 67; docs/privacy.md): a scope's data map and masking rules, read
and changed through the one governed-change service (setting `privacy`), and the masking every
way out asks for: events (webhooks and the NATS stream), the dataset, the logs.

The key: `GATE_PRIVACY_KEY` (at least 32 characters) or, unset, the key file
`GATE_PRIVACY_KEY_FILE` (default `$GATE_HOME/privacy.key`, 32 random bytes in hex, written 0600
on first use). Each scope hashes under its own key derived from it (gate.privacy.masking.scope_key).
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypedDict

from gate.events.cloudevent import OutboxRow
from gate.governance.table import PRIVACY
from gate.ledger import Ledger
from gate.principals import Permissions, Principal
from gate.privacy.datamap import DATASET, EVENTS, Found, PrivacySettings, found_in
from gate.privacy.masking import Masker, scope_key
from gate.protocol.canonical import canonical_text
from gate.releases.governance import GovernanceEvent
from gate.services.governance import GovernanceService, SafeguardSettings
from gate.settings import SettingsError

KEY_BYTES = 32
CACHE_SECONDS = 1.0
MASKED_MEMBER = "maskedmembers"  # the CloudEvents extension a masked delivery carries (docs/privacy.md)
RECORD_MEMBER = "recordurl"  # and where its full record is read with a key


def load_key(key_text: str | None, key_file: Path) -> bytes:
    """The gate's privacy key: the configured text, else the key file (made on first use)."""
    if key_text:
        if len(key_text) < 32:
            raise SettingsError("GATE_PRIVACY_KEY must be at least 32 characters")
        return key_text.encode("utf-8")
    try:
        text = key_file.read_text("ascii").strip()
    except FileNotFoundError:
        key_file.parent.mkdir(parents=True, exist_ok=True)
        fresh = secrets.token_hex(KEY_BYTES)
        try:
            descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it first: read theirs
            return load_key(None, key_file)
        with os.fdopen(descriptor, "w", encoding="ascii") as handle:
            handle.write(fresh + "\n")
        return fresh.encode("ascii")
    if len(text) < 32:
        raise SettingsError(f"the privacy key file {key_file} holds fewer than 32 characters")
    return text.encode("ascii")


def key_from_env(env: Mapping[str, str] | None = None) -> bytes:
    """The privacy key as every shell finds it (GATE_PRIVACY_KEY, else GATE_PRIVACY_KEY_FILE, else
    $GATE_HOME/privacy.key): `gate serve` and `gate export` hash under the same one."""
    env = os.environ if env is None else env
    home = Path(env.get("GATE_HOME", "var")).resolve()
    return load_key(env.get("GATE_PRIVACY_KEY") or None, Path(env.get("GATE_PRIVACY_KEY_FILE") or home / "privacy.key"))


class PrivacyAnswer(TypedDict):
    privacy: Any
    pending: list[Any]
    governance_seq: int
    requested: bool
    event: GovernanceEvent | None


class PrivacyService:
    """A scope's privacy settings in force (cached `CACHE_SECONDS`) and the maskers they make."""

    def __init__(self, ledger: Ledger, settings: SafeguardSettings, key: bytes | Callable[[], bytes],
                 cache_seconds: float = CACHE_SECONDS) -> None:
        self.ledger, self.safeguards = ledger, settings
        # The key, or how to read it: read when a scope first hashes (a gate, or an export, whose
        # scopes declare nothing never reads nor makes the key file).
        self._key: bytes | None = key if isinstance(key, bytes) else None
        self._key_source = key if callable(key) else None
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, PrivacySettings]] = {}
        self._lock = threading.Lock()

    @property
    def key(self) -> bytes:
        """The gate's privacy key (read once, on first use)."""
        if self._key is None:
            if self._key_source is None:
                raise TypeError("a PrivacyService needs a key or a key source")
            self._key = self._key_source()
        return self._key

    def settings(self, scope: str) -> PrivacySettings:
        now = time.monotonic()
        cached = self._cache.get(scope)
        if cached is not None and cached[0] > now:
            return cached[1]
        value: PrivacySettings = self.safeguards.value(scope, PRIVACY)
        with self._lock:
            if len(self._cache) >= 4096:
                self._cache.clear()
            self._cache[scope] = (now + self.cache_seconds, value)
        return value

    def masker(self, scope: str, destination: str, request: Any) -> Masker:
        """The destination's masker for one decide body of `scope`."""
        settings = self.settings(scope)
        found: Found = found_in(settings.data_map, request)
        return Masker(settings.rule(destination), self._scope_key(scope, found), found)

    def _scope_key(self, scope: str, found: Found) -> bytes:
        """The scope's key, read only when there is something to hash (nothing found: none)."""
        return scope_key(self.key, scope) if found else b""

    def decision_masker(self, scope: str, decision_id: str, destination: str) -> Masker:
        """The destination's masker for a stored decision's request (an empty one when the
        scope declares nothing, or the decision is not the scope's)."""
        settings = self.settings(scope)
        request = None
        if settings.data_map.declared():
            stored = self.ledger.decision(scope, decision_id)
            request = json.loads(stored.request_json) if stored is not None else None
        found = found_in(settings.data_map, request)
        return Masker(settings.rule(destination), self._scope_key(scope, found), found)

    # ---------------------------------------------------------------- the governed setting

    def _governance(self) -> GovernanceService:
        if not isinstance(self.safeguards, GovernanceService):
            raise TypeError("the privacy settings are changed through a GovernanceService")
        return self.safeguards

    def put(self, scope: str, principal: Principal, permissions: Permissions, body: Any,
            reason: str | None = None) -> PrivacyAnswer:
        """State the whole value (admin): one signed governance event; a weakening while the
        scope requires approvals is a request a second, distinct holder approves."""
        event, _state = self._governance().change(scope, PRIVACY, principal, permissions,
                                                  lambda _before: PrivacySettings.from_json(body), reason)
        return self._answer(scope, event)

    def approve(self, scope: str, principal: Principal, permissions: Permissions, request_seq: Any,
                reason: str | None = None) -> PrivacyAnswer:
        event, _state = self._governance().approve(scope, PRIVACY, principal, permissions, request_seq, reason)
        return self._answer(scope, event)

    def document(self, scope: str) -> PrivacyAnswer:
        return self._answer(scope, None)

    def _answer(self, scope: str, event: GovernanceEvent | None) -> PrivacyAnswer:
        self._cache.pop(scope, None)
        document = self._governance().document(scope, PRIVACY)
        return {"privacy": document["policy"], "pending": document["pending"],
                "governance_seq": document["governance_seq"],
                "requested": event is not None and event["action"] == "policy_request", "event": event}

    # ---------------------------------------------------------------- events out

    def event_body(self, row: OutboxRow) -> bytes:
        """What a webhook or the stream sends for one outbox row: its stored text, or, when the
        event names a decision whose request holds members the `events` rule masks, the event
        masked, with `maskedmembers` (JSON Pointers into the event) and `recordurl` added to its
        envelope. The outbox row, and the record the caller got, are never changed."""
        text: str = row["event_json"]
        settings = self.settings(row["scope"])
        if not settings.data_map.declared():
            return text.encode("utf-8")
        event = json.loads(text)
        data = event.get("data")
        decision_id = data.get("decision_id") if isinstance(data, Mapping) else None
        if not isinstance(decision_id, str):
            return text.encode("utf-8")
        stored = self.ledger.decision(row["scope"], decision_id)
        request = json.loads(stored.request_json) if stored is not None else None
        masker = Masker(settings.rule(EVENTS), scope_key(self.key, row["scope"]),
                        found_in(settings.data_map, request))
        if not masker.active:
            return text.encode("utf-8")
        masked, pointers = masker.mask_document(event)
        if not pointers:
            return text.encode("utf-8")
        masked[MASKED_MEMBER] = canonical_text(sorted(set(pointers)))
        masked[RECORD_MEMBER] = f"/api/decision/{decision_id}"
        return canonical_text(masked).encode("utf-8")

    # ---------------------------------------------------------------- a hold's answer (MCP)

    def hold_answer(self, scope: str, answer: Mapping[str, Any], destination: str) -> dict[str, Any]:
        """A hold's answer (`HoldService.resolution`) as `destination` may show it: the hold's facts
        masked at their declared paths and by value, the rest of the hold by value, and
        `masked` naming the members (JSON Pointers into the answer). The signed `resolution` is
        left whole: it must verify, and it holds the reviewer's vote, not the request's facts."""
        settings = self.settings(scope)
        hold = answer.get("hold")
        if not settings.data_map.declared() or not isinstance(hold, Mapping):
            return dict(answer)
        masker = self.decision_masker(scope, str(answer.get("decision_id")), destination)
        if not masker.active:
            return dict(answer)
        facts, pointers = masker.mask_facts(hold.get("facts") or {})
        rest, others = masker.mask_document({k: v for k, v in hold.items() if k != "facts"}, ("hold",))
        masked = sorted({"/hold/facts" + p for p in pointers} | set(others))
        return {**answer, "hold": {**rest, "facts": facts}, "masked": masked}

    # ---------------------------------------------------------------- the dataset

    def dataset_row(self, scope: str, row: Mapping[str, Any]) -> Mapping[str, Any]:
        """A ledger decision row as the dataset may hold it: its request masked at the declared
        paths and by value, its record by value, by the scope's `dataset` rule (default: hashed,
        so analytics still group and join). The hashes and chain columns are the ledger's."""
        settings = self.settings(scope)
        if not settings.data_map.declared() or not row.get("request_json"):
            return row
        request = json.loads(row["request_json"])
        masker = Masker(settings.rule(DATASET), scope_key(self.key, scope), found_in(settings.data_map, request))
        if not masker.active:
            return row
        masked_request, _ = masker.mask_request(request)
        masked_record, _ = masker.mask_document(json.loads(row["record_json"]))
        return {**row, "request_json": canonical_text(masked_request), "record_json": canonical_text(masked_record)}
