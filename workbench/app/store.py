"""The workbench's data store: no UI, one instance shared by every session.

Every number the dashboard shows comes from here, and the store only calls what the API, the
CLI and the notebooks call: the analytics services (`workbench.services`: export, the reports of
every registry kind, the dry-run, the sweep, the live impact), built with the decision service by
the composition root (`workbench.services.root`), the exact analysis of `gate.rulebook.analysis`,
and the `gate` services (records, receipts, chain proofs, verification, promotion). It chooses
inputs (scope, policy, dataset) and caches results of expensive reads, nothing else.

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

import polars as pl

from gate import principals
from gate.chain.links import chain_id_for
from gate.clock import Clock, SystemClock
from gate.errors import GateError, RulebookInvalid, Signal
from gate.holds.events import hold_events_problems, verify_resolution
from gate.keys.config import SigningSetup
from gate.ledger import Ledger, stream
from gate.ledger.reports import MAX_SCOPES, benchmark_opt_ins
from gate.principals import Permission, Permissions, Principal
from gate.protocol.canonical import sha256_hex
from gate.protocol.evaluation import Check
from gate.reports.params import PARAMS, ReportParams, cohort_scopes
from gate.reports.registry import REPORTS, Cohort, ReportKind
from gate.rulebook import RulebookDocument, checked_rulebook, get_evaluator
from gate.rulebook.analysis import DiffReportJSON, semantic_diff
from gate.rulebook.shapes import JsonValue
from gate.services.chains import inclusion_for
from gate.services.events import SubscriptionView
from gate.services.holds import HoldStep
from gate.services.lifecycle import KINDS
from gate.services.verification import verify_stored_decision
from workbench.app.jsonpos import locate, position_of
from workbench.app.ruletable import reads
from workbench.cluster import cluster_setting
from workbench.dataset import rollups
from workbench.dataset.convert import facts_of
from workbench.dataset.export import Progress
from workbench.dataset.load import Frames, Opened, from_dataset, holds_from_dataset, open_dataset, scan_table
from workbench.dataset.location import DatasetError, open_location, read_manifest
from workbench.dataset.manifest import NewRows
from workbench.dataset.recent import recent_frames
from workbench.dataset.rollups import RollupView
from workbench.dataset.schema import DECISION_ANALYSIS_COLUMNS
from workbench.dataset.trust import DatasetTrust, Trust, Untrusted, reader_trust
from workbench.engines.common import latest_outcomes
from workbench.migration.errors import DryRunError
from workbench.migration.run import DryRun
from workbench.migration.sweep import FieldSpread, Sweep
from workbench.reports.holds import HoldReport
from workbench.reports.policy import PolicyReports, policy_reports_of
from workbench.reports.rules import RuleHistory, rule_history
from workbench.reports.timeseries import (
    monthly,
    monthly_from_rollups,
    version_changes,
    version_changes_from_rollups,
)
from workbench.services.impact import LiveSummary
from workbench.services.root import compose

DRAFT_PATH = "draft"
# What a dry-run compares the draft with (`WorkbenchStore.dry_run`): the version production runs, or the history.
CURRENT, HISTORY = "current", "history"
FRAME_CACHE_SIZE = 8  # (scopes, policy, limit) entries; each holds one policy's rows
# The hold report: beside the Overview's cards at its default parameters (`hold_report`), not in `reports`.
HOLDS = "holds"
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


class StoredResult(TypedDict):
    """What a stored decision's record says it decided, and under which rulebook version."""

    verdict: str | None
    application_verdict: str | None
    reason_code: str | None
    matched_rule_id: str | None
    rulebook_version: str | None


class StoredEvaluation(TypedDict):
    """A stored decision's facts and its stored result (`Store.stored_evaluation`)."""

    decision_id: str
    facts: dict[str, Any]  # the caller's facts, as the rulebook saw them
    stored: StoredResult


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

    # ------------------------------------------------------------------ policy reports

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

    def reports(self, scope: str, policy_id: str, *, limit: int = 1000) -> dict[str, Mapping[str, Any]]:
        """Every report kind of the registry (`gate.reports.registry.REPORTS`) but the hold
        report (`hold_report`), built by the report service the API and `gate report` call (same
        engines, envelopes and hashes, same cohort rule) over the dataset instead of the live
        ledger, at the page's `limit`: kind → sealed report, in the registry's order. A kind added
        to the registry is among them. Cached by manifest and cohort."""
        opted_in = benchmark_opt_ins(self.ledger)
        manifest_key = self._manifest_key()
        cohort_of = tuple(cohort_scopes(opted_in, scope, MAX_SCOPES))
        key = (manifest_key, "reports", scope, policy_id, limit, cohort_of, frozenset(opted_in))
        reports: dict[str, Mapping[str, Any]] = self._remembered(
            key, lambda: self._reports(scope, policy_id, limit, opted_in, cohort_of, manifest_key))
        return reports

    def policy_reports(self, scope: str, policy_id: str, *, limit: int = 1000) -> PolicyReports:
        """The four policy reports of the Overview's cards (`reports`, those kinds)."""
        return policy_reports_of(self.reports(scope, policy_id, limit=limit))

    def _reports(self, scope: str, policy_id: str, limit: int, opted_in: set[str],
                 cohort_of: tuple[str, ...], manifest_key: str | None) -> dict[str, Mapping[str, Any]]:
        params = ReportParams(limit=limit)
        kinds = [kind for name, kind in REPORTS.items() if name != HOLDS]

        def frames_of(kind: ReportKind) -> Frames:
            if kind.reads_holds:
                return holds_from_dataset(self.dataset_dir, scopes=[scope], policy_id=policy_id,
                                          policy_version=kind.loaded_version(params), trust=self.trust())
            return self._frames((scope, *cohort_of) if kind.cohort else (scope,), policy_id, limit, manifest_key)

        service = self.services.reports
        built: dict[str, Mapping[str, Any]] = {}
        # The anomaly report first: the effectiveness report's health reads it (the same report).
        for kind in sorted(kinds, key=lambda kind: kind.name != "anomalies"):
            cohort = Cohort(own_scope=scope, opted_in=opted_in) if kind.cohort else Cohort()
            built[kind.name] = service.build(kind, frames_of(kind), policy_id, params, cohort,
                                             anomalies=built.get("anomalies"))
        return {kind.name: built[kind.name] for kind in kinds}

    def hold_report(self, scope: str, policy_id: str) -> HoldReport:
        """The policy's hold report (the registry's kind `holds`, at its default parameters) over
        the dataset, exactly as `gate report holds --dataset` builds it (the report service): the
        queues' health beside the policy's on the Overview. Cached by manifest like the other reports."""
        manifest_key = self._manifest_key()
        kind, params = REPORTS[HOLDS], ReportParams()

        def compute() -> dict[str, Any]:
            frames = holds_from_dataset(self.dataset_dir, scopes=[scope], policy_id=policy_id, trust=self.trust())
            return dict(self.services.reports.build(kind, frames, policy_id, params))
        report: HoldReport = self._remembered((manifest_key, "holds", scope, policy_id), compute)
        return report

    def every_anomaly(self, scope: str, policy_id: str, *, limit: int = 1000) -> list[Any]:
        """Every finding of the policy's anomaly report, strongest first (the report lists the first
        `max_items` and counts them all): the same report with `max_items` at its bound."""
        manifest_key = self._manifest_key()
        bound = int(PARAMS["max_items"].high)

        def compute() -> list[Any]:
            frames = self._frames((scope,), policy_id, limit, manifest_key)
            report = self.services.reports.build(REPORTS["anomalies"], frames, policy_id,
                                                 ReportParams(limit=limit, max_items=bound))
            return list(report["anomalies"])
        found: list[Any] = self._remembered((manifest_key, "anomalies", scope, policy_id, limit), compute)
        return found

    def monthly_series(self, scope: str, policy_id: str) -> pl.DataFrame:
        """Volume by verdict and effectiveness, month by month (`workbench.reports.timeseries`): from the
        dataset's rollups when they are current, else from the rows."""
        return self._whole_history("monthly", scope, policy_id, monthly_from_rollups,
                                   lambda frames: monthly(frames, policy_id))

    def version_changes(self, scope: str, policy_id: str) -> pl.DataFrame:
        """Each version of the policy with the month of its first decision (`workbench.reports.timeseries`):
        from the dataset's rollups when they are current, else from the rows."""
        return self._whole_history("versions", scope, policy_id, version_changes_from_rollups, version_changes)

    def _whole_history(self, name: str, scope: str, policy_id: str,
                       from_rollups: Callable[[RollupView | None], pl.DataFrame | None],
                       from_rows: Callable[[Frames], pl.DataFrame]) -> pl.DataFrame:
        """A whole-history figure of one scope and policy, cached by manifest: `from_rollups` of
        the dataset's rollups when they are current (never for `reference`), else `from_rows`."""
        manifest_key = self._manifest_key()

        def compute() -> pl.DataFrame:
            if not self.reference:
                opened = self.opened()
                manifest = None if opened is None else opened.manifest
                view = None if manifest is None else RollupView.of(
                    self.dataset_dir, manifest, policy_id=policy_id, policy_version=None, scopes=[scope])
                figure = from_rollups(view)
                if figure is not None:
                    return figure
            return from_rows(self._frames((scope,), policy_id, None, manifest_key))

        figure: pl.DataFrame = self._remembered((manifest_key, name, scope, policy_id), compute)
        return figure

    # ------------------------------------------------------------------ decision lists

    def decision_page(self, scope: str, *, policy_id: str | None = None, verdict: str | None = None,
                      rule: str | None = None, id_prefix: str | None = None, offset: int = 0,
                      limit: int = 25) -> tuple[pl.DataFrame, int]:
        """One page of a scope's decisions from the dataset, newest first, each with its latest
        outcome status; and the number of decisions the filters match."""
        opened = self.opened()
        manifest = None if opened is None else opened.manifest
        decisions = scan_table(self.dataset_dir, "decisions", [scope], manifest)
        if policy_id:
            decisions = decisions.filter(pl.col("policy_id") == policy_id)
        if verdict:
            decisions = decisions.filter(pl.col("verdict") == verdict)
        if rule:
            decisions = decisions.filter(pl.col("matched_rule_id") == rule)
        if id_prefix:
            decisions = decisions.filter(pl.col("decision_id").str.starts_with(id_prefix))
        total = decisions.select(pl.len()).collect().item()
        newest_first = (["created_at", "decision_id"], True)
        # A join does not keep the left frame's order (Polars' default): sort the page again after it.
        page = (decisions.sort(newest_first[0], descending=newest_first[1]).slice(offset, limit)
                .join(latest_outcomes(scan_table(self.dataset_dir, "outcomes", [scope], manifest)),
                      on="decision_id", how="left")
                .sort(newest_first[0], descending=newest_first[1])
                .select("decision_id", "created_at", "policy_id", "policy_version", "verdict",
                        "matched_rule_id", "reason_code", pl.col("status").alias("latest_outcome"))
                .collect())
        return page, total

    # ------------------------------------------------------------------ one decision

    def decision_detail(self, scope: str, decision_id: str) -> dict[str, Any] | None:
        """The stored record with its receipts, its chain inclusion proof and a fresh
        verification, or None when the decision is not in `scope`."""
        stored = self.ledger.decision(scope, decision_id)
        if stored is None:
            return None
        record = json.loads(stored.record_json)
        request = json.loads(stored.request_json)
        receipts = {}
        for name, kind in KINDS.items():
            items, total = self.lifecycle.all_for(kind, decision_id, 100)
            receipts[name] = {"items": items, "total": total}
        proof = inclusion_for(self.audit, scope, chain_id_for(scope), decision_id, None)
        return {
            "record": record,
            "request": request,
            "facts": facts_of(request, record) or {},
            "receipts": receipts,
            "inclusion": proof,
            "verification": verify_stored_decision(self.ledger, self.lifecycle, self.signing, stored),
        }

    def verify(self, scope: str, decision_id: str) -> dict[str, Any] | None:
        """A fresh hosted verification (the API's `GET /api/decision/{id}/verify` body)."""
        stored = self.ledger.decision(scope, decision_id)
        if stored is None:
            return None
        return verify_stored_decision(self.ledger, self.lifecycle, self.signing, stored)

    def stored_evaluation(self, scope: str, decision_id: str) -> StoredEvaluation | None:
        """A stored decision's facts (what its rulebook saw) and its stored result, or None
        when the decision is not in `scope`."""
        stored = self.ledger.decision(scope, decision_id)
        if stored is None:
            return None
        record = json.loads(stored.record_json)
        facts = facts_of(json.loads(stored.request_json), record)
        return {
            "decision_id": decision_id,
            "facts": facts if facts is not None else {},
            "stored": {"verdict": record.get("verdict"), "application_verdict": record.get("application_verdict"),
                       "reason_code": record.get("reason_code"), "matched_rule_id": record.get("matched_rule_id"),
                       "rulebook_version": (record.get("rulebook") or {}).get("version")},
        }

    # ------------------------------------------------------------------ migrations

    def dry_run(self, scope: str, rulebook_id: str, draft: RulebookDocument, *, on_cluster: bool = True,
                against: str = CURRENT) -> DryRun:
        """The dry-run of `gate dry-run` (the same service) over this scope's history in the
        dataset, on the workbench's cluster when it has one and `on_cluster`. `against`: CURRENT
        compares the draft with what production runs in the scope (`ReleaseService.running_rulebook`,
        replayed over the same history; the history where the scope has no version), HISTORY with
        the verdicts stored when each decision was made (workbench.migration.baseline). Raises
        DryRunError for a bad draft, an unknown rulebook or empty history, or an unreachable cluster."""
        if against not in (CURRENT, HISTORY):
            raise DryRunError("USAGE", f"compare with {CURRENT!r} or {HISTORY!r}, not {against!r}")
        dry_runs = self.services.dry_runs
        baseline = dry_runs.production(scope, rulebook_id) if against == CURRENT else None
        # The dataset is read only as trusted (signed by a key this gate trusts, or unsigned by opt-in).
        return dry_runs.run(draft, rulebook_id, scope=scope, dataset=self.dataset_dir, trust=self._run_trust(),
                            cluster=self.cluster if on_cluster and self.cluster else None, baseline=baseline)

    def _run_trust(self) -> Trust:
        """`trust` for a dry-run or a sweep: DryRunError USAGE when it cannot be established."""
        try:
            return self.trust()
        except Untrusted as error:
            raise DryRunError("USAGE", str(error)) from None

    def impact_summary(self, scope: str, rulebook_id: str, draft: RulebookDocument) -> LiveSummary:
        """The live impact (`workbench.services.impact`): the dry-run's summary of the draft against
        what production runs, over full history in this process (the same figures as the Migration
        page and `gate dry-run`), beside the Authoring page's editor. Raises DryRunError like `dry_run`."""
        return self.services.impact.summary(scope, rulebook_id, draft, dataset=self.dataset_dir,
                                            trust=self._run_trust())

    def sweep(self, scope: str, rulebook_id: str, draft: RulebookDocument, leaf: tuple[str, str, int],
              thresholds: list[float]) -> Sweep:
        """`gate sweep`'s service over this scope's history in the dataset, compared with what
        production runs there, as the live impact (DryRunError)."""
        trust = self._run_trust()
        return self.services.sweeps.sweep(draft, rulebook_id, leaf, thresholds, scope=scope, dataset=self.dataset_dir,
                                          trust=trust, baseline=self.services.dry_runs.production(scope, rulebook_id))

    def field_spread(self, scope: str, rulebook_id: str, field: str) -> FieldSpread:
        """How one fact is spread over the rulebook's history in this scope (`sweep.field_spread`:
        what a sweep's default range is drawn from), cached by manifest (DryRunError)."""
        trust = self._run_trust()
        spread: FieldSpread = self._remembered(
            (self._manifest_key(), "spread", scope, rulebook_id, field),
            lambda: self.services.sweeps.field_spread(rulebook_id, field, scope=scope, dataset=self.dataset_dir,
                                                      trust=trust))
        return spread

    def rule_history(self, scope: str, policy_id: str) -> list[RuleHistory]:
        """Each stored matched rule of the policy over its whole history in the scope: decisions,
        share and success rate with its interval (`workbench.reports.rules`), cached by manifest."""
        manifest_key = self._manifest_key()

        def compute() -> list[RuleHistory]:
            frames = from_dataset(self.dataset_dir, scopes=[scope], policy_id=policy_id, trust=self.trust())
            return rule_history(frames.decisions, frames.outcomes)

        rows: list[RuleHistory] = self._remembered((manifest_key, "rules", scope, policy_id), compute)
        return copy.deepcopy(rows)

    def semantic_diff(self, scope: str, rulebook_id: str, draft: RulebookDocument) -> DiffReportJSON | None:
        """The exact diff from the scope's current version to the draft (None without one)."""
        current = self.current_rulebook(scope, rulebook_id)
        return semantic_diff(checked_rulebook(current), draft).to_json() if current is not None else None

    def export_migration(self, run: DryRun, out: Path) -> dict[str, str]:
        """Sign (with the receipt key) and write the manifest and the reports; name → path. The
        dry-run service's rule, as `gate dry-run` writes (`workbench.signing.result_signer`):
        SigningRefused, nothing written, without a key while signing is required or over a stale
        dataset (unless `allow_stale`)."""
        self.services.dry_runs.write(run, out, allow_stale=self.allow_stale)
        return {name: str(Path(out) / name) for name in ("migration.json", "report.md", "report.html")}

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

    def release_act(self, scope: str, rulebook_id: str, body: Mapping[str, object], principal: Principal,
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
                        body: Mapping[str, object]) -> tuple[SubscriptionView, str]:
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

    # ------------------------------------------------------------------ held actions (docs/holds.md)

    def hold_page(self, scope: str, *, state: str = "open", queue: str | None = None, offset: int = 0,
                  limit: int = 25, filters: Mapping[str, str | None] | None = None,
                  reader: str | None = None) -> dict[str, Any]:
        """One page of the scope's holds in `state`, the most urgent first, then the least time left
        (`HoldService.list`, the API's `GET /api/holds`: `filters` assignee, priority, policy and
        search, `reader` the principal `mine` means), with the count per state and the names of
        the scope's queues. GateError REQUEST_INVALID for an unknown state or filter value."""
        page = self.holds.list(scope, state=state, queue=queue or None, limit=limit, offset=offset,
                               filters=filters, reader=reader)
        return {**page, "queues": [queue.name for queue in self.holds.policy(scope).queues]}

    def hold_version(self, scope: str) -> tuple[int, int]:
        """What moves whenever the scope's holds do (`HoldService.version`): the Inbox's poll."""
        return self.holds.version(scope)

    def hold_detail(self, scope: str, decision_id: str, *, similar: bool = True) -> dict[str, Any] | None:
        """One hold as a reviewer weighs it, or None when `scope` has no hold for the decision:
        the hold and its signed events, the rule that held it, a fresh verification of the stored
        record (the Decisions page's), the offline check of its hold events and, once closed, of
        its resolution (with this gate's trust anchors), and the closed holds most like it with
        their latest outcome (`HoldService.similar`; None without `similar`: `similar_holds` reads
        them, the slowest part, after). Reading never changes the hold."""
        stored = self.ledger.decision(scope, decision_id)
        if stored is None:
            return None
        try:
            shown = self.holds.show(scope, decision_id)
        except GateError as exc:
            if exc.code == "HOLD_NOT_FOUND":
                return None
            raise
        record = json.loads(stored.record_json)
        anchors = self.signing.trust_anchors()
        events = shown.pop("events")
        closing = next((event for event in reversed(events) if event.get("outcome") is not None), None)
        problems = hold_events_problems(record, events, anchors)
        return {
            "hold": shown,
            "events": events,
            "rule": self._held_by(scope, record),
            "verification": verify_stored_decision(self.ledger, self.lifecycle, self.signing, stored),
            "hold_events": {"verified": not problems, "count": len(events), "problems": problems},
            "resolution": verify_resolution(record, closing, anchors).to_json() if closing is not None else None,
            "similar": self.similar_holds(scope, decision_id) if similar else None,
        }

    def similar_holds(self, scope: str, decision_id: str) -> list[dict[str, Any]]:
        """The closed holds most like this one, with their latest outcome (`HoldService.similar`)."""
        return [{**hold, "latest_outcome": self._latest_outcome(hold["decision_id"])}
                for hold in self.holds.similar(scope, decision_id)]

    def _held_by(self, scope: str, record: dict[str, Any]) -> dict[str, Any]:
        """The rule that held the record, as its bound rulebook states it (its condition in words)."""
        bound = record.get("rulebook") or {}
        rule_id = record.get("matched_rule_id")
        snapshot = (self.service.bound_snapshot(scope, str(bound.get("id")), str(bound.get("version")))
                    if bound.get("id") and bound.get("version") else None)
        rules = json.loads(snapshot["body_json"]).get("rules", []) if snapshot else []
        rule = next((r for r in rules if isinstance(r, dict) and r.get("rule_id") == rule_id), None)
        return {"rule_id": rule_id, "reason_code": record.get("reason_code"), "action": record.get("action"),
                "verdict": record.get("verdict"), "policy_id": record.get("policy_id"),
                "policy_version": record.get("policy_version"),
                "condition": reads(rule.get("condition")) if rule is not None else None}

    def _latest_outcome(self, decision_id: str) -> str | None:
        """The status of the decision's newest outcome record (None before one is reported)."""
        items, _total = self.lifecycle.all_for(KINDS["outcome"], decision_id, 1)
        return str(items[0].get("outcome_status")) if items else None

    def hold_act(self, scope: str, principal: Principal, permissions: Permissions, decision_id: str,
                 action: str, body: Mapping[str, object] | None = None) -> HoldStep:
        """One step on a hold by the session's `principal` with its `permissions` in `scope`:
        `resolve` (body: decision, reason_code, note), `claim`, `release`, `reassign` (body:
        queue, note) or `escalate`. Each is a signed hold event written by `HoldService`, which
        refuses what the permissions do not cover (HOLD_PERMISSION_DENIED without `resolve`),
        a requester under four eyes, another reviewer's claim, a closed hold; GateError."""
        if action == "resolve":
            return self.holds.resolve(scope, principal, permissions, decision_id, body)
        if action in ("claim", "release"):
            return self.holds.claim(scope, principal, permissions, decision_id, release=action == "release")
        if action == "reassign":
            return self.holds.reassign(scope, principal, permissions, decision_id, body)
        if action == "escalate":
            return self.holds.escalate(scope, principal, permissions, decision_id)
        raise GateError("REQUEST_INVALID", f"unknown hold action {action!r}")

    def release_policy(self, scope: str) -> dict[str, Any]:
        return self.releases.policy(scope).to_json()

    def published_versions(self, scope: str, rulebook_id: str) -> list[str]:
        """The versions of a rulebook published in the scope, newest first (the pages' pickers)."""
        return self.ledger.rulebook_versions(scope, rulebook_id)

    def release_ids(self, scope: str) -> list[str]:
        """The scope's rulebook ids that have a published version."""
        return self.ledger.rulebook_ids(scope)


__all__ = ["DraftCheck", "GateError", "WorkbenchStore", "check_draft", "evaluate", "require"]
