"""The scope's bound rulebook snapshots: the immutable (id, version) → content bindings a decide
binds on first use and a release moves between.

`RulebookSnapshots` is shared by the decide (`DecisionService`) and the releases (`ReleaseService`),
so neither needs the other to read or bind a version: a binding is written with the decide that
first uses it, or on its own by a promotion (`register_rulebook`).
"""

from __future__ import annotations

import json
from typing import Any

from gate import vocabulary as C
from gate.chain.links import scope_hash
from gate.clock import Clock, iso_ms
from gate.errors import GateError, RulebookVersionConflict, SnapshotRace
from gate.keys.config import LiveSigning, SigningSetup
from gate.ledger import Ledger, SnapshotRow, StoredSnapshot
from gate.protocol.attestation import registry_entry, sign_registry_entry
from gate.protocol.canonical import canonical_text, sha256_hex
from gate.rulebook import RulebookDocument, get_evaluator, schema_hash
from gate.strict_json import JsonValue

CACHE_SIZE = 4096  # bound snapshots kept in-process (bindings are immutable: a hit is never stale)


class RulebookSnapshots:
    """Read, bind and promote a scope's rulebook snapshots."""

    def __init__(self, ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock) -> None:
        self.ledger = ledger
        self.signing = signing
        self.clock = clock
        self._cache: dict[tuple[str, str, str], StoredSnapshot] = {}

    def registry_for(
        self, scope: str, rulebook: RulebookDocument, rulebook_hash: str, now: str,
        adapter_dependency: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], SnapshotRow | None]:
        """The scope's registry entry for this rulebook, and a snapshot row when it is new.

        The first binding of (id, version) also pins its facts source: the trusted adapter
        dependency of an adapter-mode decide, or none. Using the pair later with another (or
        without / with a first) adapter dependency is `RULEBOOK_VERSION_CONFLICT`
        (compatibility rule 3: an adapter change needs a new rulebook version)."""
        rulebook_id, version = rulebook["rulebook_id"], rulebook["version"]
        stored = self.bound_snapshot(scope, rulebook_id, version)
        if stored is not None:
            if stored["rulebook_hash"] != rulebook_hash:
                raise RulebookVersionConflict(rulebook_id, version, stored["rulebook_hash"], rulebook_hash)
            registry: dict[str, Any] = json.loads(stored["registry_json"])
            bound = registry.get("trusted_adapter_dependency")
            if (bound or None) != (adapter_dependency or None):
                raise RulebookVersionConflict(rulebook_id, version, stored["rulebook_hash"], rulebook_hash,
                                              registered_dependency=bound, supplied_dependency=adapter_dependency)
            return registry, None
        registry = sign_registry_entry(
            registry_entry(
                rulebook_id=rulebook_id,
                version=version,
                rulebook_hash=rulebook_hash,
                scope_hash=scope_hash(scope),
                registered_at=now,
                adapter_dependency=adapter_dependency,
            ),
            self.signing.attestation_key(),
        )
        snapshot_row: SnapshotRow = {
            "scope": scope,
            "rulebook_id": rulebook_id,
            "version": version,
            "rulebook_hash": rulebook_hash,
            "evaluator_version": C.EVALUATOR_VERSION,
            "schema_hash": schema_hash(),
            "registered_at": now,
            "body_json": canonical_text(rulebook),
            "registry_json": canonical_text(registry),
        }
        return registry, snapshot_row

    def bound_snapshot(self, scope: str, rulebook_id: str, version: str) -> StoredSnapshot | None:
        """The bound snapshot for (scope, id, version). Bindings are immutable once stored
        (compatibility rule 2), so a found binding is cached in-process; absence is not."""
        cache_key = (scope, rulebook_id, version)
        stored = self._cache.get(cache_key)
        if stored is None:
            stored = self.ledger.rulebook_snapshot(scope, rulebook_id=rulebook_id, version=version)
            if stored is not None:
                if len(self._cache) >= CACHE_SIZE:
                    self._cache.clear()
                self._cache[cache_key] = stored
        return stored

    def register_rulebook(self, scope: str, rulebook: object) -> tuple[dict[str, JsonValue], bool]:
        """Promote a rulebook: bind it in `scope` as an immutable snapshot, which makes it the
        scope's current version of its id. Returns (registry entry, newly bound).

        It validates first (`RULEBOOK_INVALID`, nothing bound); a version already bound to
        another hash is `RULEBOOK_VERSION_CONFLICT` (compatibility rule 2: publish a new
        version); the same content again is a no-op. History is never edited.
        """
        rulebook_hash = sha256_hex(rulebook) if isinstance(rulebook, dict) else ""
        document = get_evaluator(rulebook, rulebook_hash).document  # raises RULEBOOK_INVALID for anything invalid
        registry, snapshot_row = self.registry_for(scope, document, rulebook_hash, iso_ms(self.clock.now()))
        if snapshot_row is None:
            return registry, False
        try:
            created = self.ledger.register_snapshot(snapshot_row)
        except SnapshotRace:  # a concurrent promotion of the same content won
            created = False
        if not created:
            stored = self.ledger.rulebook_snapshot(scope, rulebook_id=document["rulebook_id"],
                                                   version=document["version"])
            if stored is None:  # pragma: no cover - the snapshot is bound: by this call or a concurrent one
                raise GateError("LEDGER_UNAVAILABLE", "the bound rulebook snapshot could not be read")
            bound: dict[str, JsonValue] = json.loads(stored["registry_json"])
            return bound, False
        return registry, True


__all__ = ["RulebookSnapshots"]
