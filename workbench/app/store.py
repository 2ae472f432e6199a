"""The workbench's data store: no UI, one instance shared by every session.

Every number the dashboard shows comes from here, and the store only calls what the API, the
CLI and the notebooks call: the analytics services (`workbench.services`: export, the reports of
every registry kind, the dry-run, the sweep, the live impact), built with the decision service by
the composition root (`workbench.services.root`), the exact analysis of `gate.rulebook.analysis`,
and the `gate` services (records, receipts, chain proofs, verification, promotion). It chooses
inputs (scope, policy, dataset) and caches results of expensive reads, nothing else.

What each page reads is a part of its own (`workbench.app.stores`: the Overview's figures
`overview`, the Decisions page's reads `decisions`, the Migration page's runs `migration`, the
Inbox's held actions `desk`), given this store; the store keeps what they share (the services, the
dataset's trust, the frame and figure caches) and a page state calls its part through it
(`store.overview.reports(...)`).

Reads are scoped: every method takes the scope it reads, and the session only passes scopes
its user was granted (`workbench.app.access`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

from gate import principals
from gate.clock import Clock, SystemClock
from gate.errors import GateError, RulebookInvalid, Signal
from gate.keys.config import SigningSetup
from gate.ledger import Ledger, stream
from gate.principals import Permission, Permissions, Principal
from gate.protocol.canonical import sha256_hex
from gate.protocol.evaluation import Check
from gate.rulebook import RulebookDocument, checked_rulebook, get_evaluator
from gate.services.events import SubscriptionView
from gate.strict_json import JsonValue
from workbench.app.jsonpos import locate, position_of
from workbench.app.stores.decisions import DecisionReads, StoredEvaluation
from workbench.app.stores.holds import HoldDesk
from workbench.app.stores.migration import CURRENT, HISTORY, MigrationRuns
from workbench.app.stores.overview import OverviewFigures
from workbench.cluster import cluster_setting
from workbench.dataset import rollups
from workbench.dataset.export import Progress
from workbench.dataset.load import Frames, Opened, from_dataset, open_dataset
from workbench.dataset.location import DatasetError, open_location, read_manifest
from workbench.dataset.manifest import NewRows
from workbench.dataset.recent import recent_frames
from workbench.dataset.schema import DECISION_ANALYSIS_COLUMNS
from workbench.dataset.trust import DatasetTrust, Trust, Untrusted, reader_trust
from workbench.services.root import compose

DRAFT_PATH = "draft"
FRAME_CACHE_SIZE = 8  # (scopes, policy, limit) entries; each holds one policy's rows
FIGURE_CACHE_SIZE = 64  # (dataset, scope, policy, limit, cohort) entries of finished figures, a few KiB each


class DraftEvaluation(TypedDict):
    """The scalar evaluator's result for some facts (`evaluate`), as the Authoring page shows it."""

    verdict: str
    application_verdict: str
    reason_code: str
    matched_rule_id: str | None
    action: str
    status: str
    missing_fields: list[str]
    invalid_fields: list[str]
    checks: list[Check]


class DatasetUnusable(TypedDict):
    ok: Literal[False]
    message: str


class DatasetUsable(TypedDict):
    """`Store.dataset_status` of a dataset that can be read: when it was cut, its rows per table
    and its trust status."""

    ok: Literal[True]
    updated_at: str | None
    rows: dict[str, int]
    synthetic: bool
    source: DatasetTrust


class Refreshed(TypedDict):
    """What a refresh of the dataset did (`Store.refresh_dataset`): the run (None: nothing new),
    its rows per table, their sum, and the export's warnings."""

    run: int | None
    new_rows: NewRows
    added: int
    warnings: list[str]


class PlacedError(TypedDict):
    """A draft's error (the validator's `{field, code, message}`) with where it was typed (0-based)."""

    field: str
    code: str
    message: str
    line: int
    column: int


@dataclass(frozen=True)
class DraftCheck:
    """A draft rulebook as the author typed it: parsed and validated, errors with positions."""

    rulebook: JsonValue  # the draft as parsed, any JSON value (None when it is not JSON)
    errors: tuple[PlacedError, ...]
    document: RulebookDocument | None = None  # the rulebook, typed, when it is valid

    @property
    def valid(self) -> bool:
        return self.rulebook is not None and not self.errors

    @property
    def rulebook_hash(self) -> str | None:
        return sha256_hex(self.rulebook) if self.valid else None


def check_draft(text: str) -> DraftCheck:
    """Parse and validate a draft; every error names its exact path and where it was typed."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return DraftCheck(None, ({"field": DRAFT_PATH, "code": "invalid_json", "message": exc.msg,
                                  "line": exc.lineno - 1, "column": exc.colno - 1},))
    try:
        return DraftCheck(value, (), checked_rulebook(value, base_path=DRAFT_PATH))
    except RulebookInvalid as exc:
        errors = exc.errors
    positions = locate(text, DRAFT_PATH)
    placed: list[PlacedError] = []
    for error in errors:
        line, column = position_of(positions, error["field"])
        placed.append({"field": error["field"], "code": error["code"], "message": error["message"],
                       "line": line, "column": column})
    return DraftCheck(value, tuple(placed))


def evaluate(rulebook: RulebookDocument, facts: Any) -> DraftEvaluation:
    """The scalar evaluator's verdict for `facts` (the same evaluator `/api/decide` runs)."""
    evaluation = get_evaluator(rulebook, sha256_hex(rulebook)).evaluate(facts)
    return {
        "verdict": evaluation.decision,
        "application_verdict": evaluation.application_verdict,
        "reason_code": evaluation.reason_code,
        "matched_rule_id": evaluation.matched_rule_id,
        "action": evaluation.action,
        "status": evaluation.status,
        "missing_fields": list(evaluation.missing_fields),
        "invalid_fields": list(evaluation.invalid_fields),
        "checks": [check.copy() for check in evaluation.checks],
    }


def require(permissions: Permissions, permission: Permission) -> None:
    """Refuse (GateError WORKBENCH_PERMISSION_DENIED) unless `permission` is among the session's
    permissions in the scope (`workbench.app.access.Access.permissions_in`): gate.principals.require."""
    principals.require(permissions, permission, "WORKBENCH_PERMISSION_DENIED")


class RefreshRunning(Signal):
    """A refresh of the dataset was asked while one runs (the page says so; nothing is written)."""


class WorkbenchStore:
    """Shared by all sessions; thread-safe because every call reads through the ledger's own
    connections and the services hold no per-request state."""

    def __init__(self, ledger: Ledger, signing: SigningSetup, dataset_dir: Path, *,
                 exports_dir: Path | None = None, clock: Clock | None = None, reference: bool = False,
                 cluster: str | None = None, home: Path | None = None, allow_unsigned: bool = False,
                 allow_stale: bool = False, webhook_allow_hosts: tuple[str, ...] = (),
                 checkpoint_log: Path | None = None) -> None:
        self.ledger = ledger
        self.signing = signing
        self.dataset_dir = Path(dataset_dir)
        # Exported migration manifests and reports, one folder per export (kept for reviewers).
        self.exports_dir = Path(exports_dir) if exports_dir else self.dataset_dir.parent / "migration-reports"
        self.clock = clock or SystemClock()
        # The composition root's services (`workbench.services.root`): the decision service with
        # the one ReleaseService (docs/releases.md), the analytics services the CLI and the API call,
        # and beside them the API's own services: the receipts, the audit chains, the events out
        # (docs/events.md; with the operator's allowance of hosts inside, GATE_WEBHOOK_ALLOW_HOSTS;
        # the gate's dispatchers send what the page queues) and the held actions (docs/holds.md: the
        # Inbox's steps are the same signed hold events, refused for the same reasons; the API's
        # serving processes sweep deadlines). The release, governance, hold and audit chains
        # checkpoint into the gate's witnessed log, as the API's do (`GATE_CHECKPOINT_LOG`, issue 52):
        # a release moved here is witnessed like one moved there.
        self.services = compose(signing, ledger, clock=self.clock, checkpoint_log=checkpoint_log,
                                allow_hosts=webhook_allow_hosts)
        core = self.services.live()
        self.service, self.releases = core.decisions, core.release_service()
        self.lifecycle, self.audit, self.events, self.holds = core.lifecycle, core.audit, core.events, core.holds
        self._frame_cache: dict[tuple[Any, ...], Frames] = {}
        self._cache_lock = threading.Lock()
        # The Overview's finished figures (report envelopes, monthly course), keyed by the
        # manifest's hash so a refreshed dataset is read again; least recently used dropped.
        self._figures: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._figures_lock = threading.Lock()
        self._refresh_lock = threading.Lock()  # one refresh at a time, over every session
        # `reference`: every figure from the rows, nothing cached but the frames (the path the
        # fast one is held equal to by tests and timed against by bench_workbench).
        self.reference = reference
        # A Dask cluster for the full-history dry-run (`gate workbench --cluster`, else GATE_CLUSTER;
        # workbench.cluster): 'local' starts two worker processes for each run. The live impact
        # and the reports (read from the rollups) stay in this process.
        self.cluster = cluster if cluster is not None else cluster_setting()
        # How the dataset is trusted (`trust`): the newest manifest seen is kept under `home`
        # (GATE_HOME; default the dataset's parent folder); `allow_unsigned` reads an unsigned
        # dataset (`gate workbench --allow-unsigned`), every page then saying so; `allow_stale`
        # lets the Migration page sign a result over a stale dataset (`--allow-stale`).
        self.home = Path(home) if home is not None else self.dataset_dir.parent
        self.allow_unsigned, self.allow_stale = allow_unsigned, allow_stale
        # One part per page (`workbench.app.stores`), each over this store.
        self.overview = OverviewFigures(self)
        self.decisions = DecisionReads(self)
        self.migration = MigrationRuns(self)
        self.desk = HoldDesk(self)

    # ------------------------------------------------------------------ scopes and policies

    def scopes(self) -> list[str]:
        return stream.scopes(self.ledger)

    def policies(self, scope: str) -> list[str]:
        return self.ledger.rulebook_ids(scope)

    def current_rulebook(self, scope: str, rulebook_id: str) -> dict[str, Any] | None:
        """The scope's current version of a rulebook, as bound: the active release version when the
        rulebook has one (what production runs), else the newest registered version."""
        active = self.releases.state(scope, rulebook_id).active
        row = (self.service.bound_snapshot(scope, rulebook_id, active.version) if active is not None
               else self.ledger.latest_rulebook_snapshot(scope, rulebook_id))
        return json.loads(row["body_json"]) if row else None

    # ------------------------------------------------------------------ the dataset

    def trust(self) -> Trust:
        """How the dataset is trusted now: this gate's keys, the opt-in, the newest manifest seen,
        and the live ledger's chain heads (`workbench.dataset.trust.reader_trust`)."""
        return reader_trust(self.home, self.signing.trust_anchors(), allow_unsigned=self.allow_unsigned,
                            ledger=self.ledger)

    def opened(self) -> Opened | None:
        """The dataset as a reader may use it (`open_dataset` under `trust`), None without a
        manifest; DatasetError (one line) when it may not be read."""
        try:
            if read_manifest(open_location(str(self.dataset_dir)), required=False) is None:
                return None
            return open_dataset(self.dataset_dir, self.trust())
        except Untrusted as exc:  # a bad GATE_DATASET_STALE_AFTER
            raise DatasetError(str(exc)) from None

    def dataset_status(self) -> DatasetUsable | DatasetUnusable:
        """What the dataset holds (from its manifest) and how far it is trusted, or why it cannot be read."""
        try:
            opened = self.opened()
        except DatasetError as exc:
            return {"ok": False, "message": f"the dataset cannot be used: {exc}"}
        if opened is None:
            return {"ok": False, "message": f"no dataset at {self.dataset_dir} yet: refresh it"}
        manifest = opened.manifest
        rows = {name: table.get("rows", 0) for name, table in manifest.get("tables", {}).items()}
        return {"ok": True, "updated_at": manifest.get("updated_at"), "rows": rows,
                "synthetic": manifest.get("synthetic", False), "source": opened.source}

    def refresh_dataset(self, progress: Progress | None = None) -> Refreshed:
        """Export what is new in the ledger into the dataset (the export service of `gate export`,
        with its one signing rule: `SigningRefused`, nothing written, without a key while signing
        is required); `progress(done, total)` is called as rows are written. One refresh runs at a
        time: another asked meanwhile is refused at once (`RefreshRunning`), nothing written."""
        if not self._refresh_lock.acquire(blocking=False):
            raise RefreshRunning("a refresh of the dataset is already running: wait for it to finish")
        try:
            result = self.services.exports.begin().run(self.ledger, str(self.dataset_dir), progress=progress)
        finally:
            self._refresh_lock.release()
        with self._figures_lock:  # keyed by the old manifest: never read again, free them now
            self._figures.clear()
        with self._cache_lock:
            self._frame_cache.clear()
        added = sum(count for count in result.new_rows.values() if isinstance(count, int)) \
            + sum(result.new_rows["facts"].values())  # facts: per rulebook
        return {"run": result.run, "new_rows": result.new_rows, "added": added, "warnings": result.warnings}

    # ------------------------------------------------------------------ what the parts share

    def _manifest_key(self) -> str | None:
        """sha256 of the dataset's manifest and trust status as read now (None without one): what
        every cached figure and frame is keyed by, so a refresh (a new manifest) or a dataset
        turned stale is never answered from the cache. DatasetError when it may not be read."""
        opened = self.opened()
        if opened is None:
            return None
        keyed = {"manifest": opened.manifest, "source": opened.source}
        return hashlib.sha256(json.dumps(keyed, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    def _frames(self, scopes: tuple[str, ...], policy_id: str, limit: int | None,
                manifest_key: str | None = None) -> Frames:
        """The dataset's decisions and outcomes of `scopes` and one policy, read once and held in
        memory for the next interactions (a small LRU keyed by the manifest's hash, so a
        refreshed dataset is read again). With a limit, only the rows of the newest decisions
        are read (`workbench.dataset.recent`); `reference` reads them through the lazy plan."""
        key = (scopes, policy_id, limit, manifest_key or self._manifest_key())
        with self._cache_lock:
            frames = self._frame_cache.pop(key, None)
            if frames is None:
                frames = self._read_frames(scopes, policy_id, limit)
            self._frame_cache[key] = frames
            while len(self._frame_cache) > FRAME_CACHE_SIZE:
                self._frame_cache.pop(next(iter(self._frame_cache)))
        return frames

    def _read_frames(self, scopes: tuple[str, ...], policy_id: str, limit: int | None) -> Frames:
        if limit is not None and not self.reference:
            return recent_frames(self.dataset_dir, scopes=list(scopes), policy_id=policy_id, limit=limit,
                                 trust=self.trust(), decision_columns=DECISION_ANALYSIS_COLUMNS,
                                 outcome_columns=rollups.OUTCOME_COLUMNS,
                                 facts_column=rollups.fact_moment_column)
        lazy = from_dataset(self.dataset_dir, scopes=list(scopes), policy_id=policy_id, limit=limit, trust=self.trust())
        # With rollups the reports never read the facts: they are not read into memory.
        facts = lazy.facts if lazy.facts is None or lazy.rollup is not None else lazy.facts.collect().lazy()
        return Frames(lazy.decisions.collect().lazy(), lazy.outcomes.collect().lazy(), facts, lazy.rollup,
                      lazy.source)

    def _remembered(self, key: tuple[Any, ...], compute: Callable[[], Any]) -> Any:
        """A finished figure from the bounded cache, or `compute()` stored under `key`; the
        caller gets its own copy (sessions may not change each other's figures)."""
        if self.reference or key[0] is None:
            return compute()
        with self._figures_lock:
            found = self._figures.get(key)
            if found is not None:
                self._figures.move_to_end(key)
        if found is None:
            found = compute()
            with self._figures_lock:
                self._figures[key] = found
                while len(self._figures) > FIGURE_CACHE_SIZE:
                    self._figures.popitem(last=False)
        return copy.deepcopy(found) if isinstance(found, dict) else found

    # ------------------------------------------------------------------ promotion

    def promote(self, scope: str, draft: RulebookDocument, permissions: Permissions) -> dict[str, Any]:
        """Publish the draft as an immutable version of the scope (service layer; never edits
        history). Raises GateError (WORKBENCH_PERMISSION_DENIED without `publish`,
        RULEBOOK_INVALID, RULEBOOK_VERSION_CONFLICT)."""
        require(permissions, "publish")
        registry, created = self.service.register_rulebook(scope, draft)
        return {"registry": registry, "created": created}

    # ------------------------------------------------------------------ releases (docs/releases.md)

    def release_status(self, scope: str, rulebook_id: str) -> dict[str, Any]:
        """State, policy, live comparison and history of a release (runs its guardrails)."""
        return self.releases.status(scope, rulebook_id)

    def release_act(self, scope: str, rulebook_id: str, body: Mapping[str, JsonValue], principal: Principal,
                    permissions: Permissions) -> dict[str, Any]:
        """One transition by the session's `principal` with its `permissions` in `scope` (a signed
        event; the service refuses an action the permissions do not cover, and an approval by the
        principal that made the request). Raises GateError with the API's codes."""
        event, _created = self.releases.act(scope, principal, permissions, rulebook_id, body)
        return event

    def event_deliveries(self, scope: str, permissions: Permissions) -> list[dict[str, Any]]:
        """Each webhook subscription of `scope` with its deliveries (`EventService.deliveries`),
        for a session holding `admin` there (GateError otherwise, like the API's routes)."""
        require(permissions, "admin")
        return [self.events.deliveries(scope, sub["subscription_id"]) for sub in self.events.listed(scope)]

    def event_subscribe(self, scope: str, principal: Principal, permissions: Permissions,
                        body: Mapping[str, JsonValue]) -> tuple[SubscriptionView, str]:
        """A new subscription made by the session's principal (its secret, shown this once); while
        the scope requires approvals a new endpoint is `pending` until a second holder approves it."""
        require(permissions, "admin")
        view, secret, _event = self.events.subscribe_governed(scope, principal, permissions, body)
        return view, secret

    def event_replay(self, scope: str, permissions: Permissions, subscription_id: str, seq: int) -> int:
        require(permissions, "admin")
        return self.events.replay(scope, subscription_id, {"seq": seq})

    def event_subscription_status(self, scope: str, permissions: Permissions, subscription_id: str,
                                  status: str) -> SubscriptionView:
        require(permissions, "admin")
        return self.events.set_status(scope, subscription_id, status)

    # ------------------------------------------------------------------ published versions (the pages' pickers)

    def release_policy(self, scope: str) -> dict[str, Any]:
        return self.releases.policy(scope).to_json()

    def published_versions(self, scope: str, rulebook_id: str) -> list[str]:
        """The versions of a rulebook published in the scope, newest first (the pages' pickers)."""
        return self.ledger.rulebook_versions(scope, rulebook_id)

    def release_ids(self, scope: str) -> list[str]:
        """The scope's rulebook ids that have a published version."""
        return self.ledger.rulebook_ids(scope)


__all__ = ["CURRENT", "HISTORY", "DraftCheck", "GateError", "StoredEvaluation", "WorkbenchStore", "check_draft",
           "evaluate", "require"]
