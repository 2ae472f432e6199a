"""Migration: the author's draft against the version production runs (or, as a second view, the
stored history) over full history: the empirical
dry-run beside the exact semantic diff, one-click export of the manifest and report, promotion."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any, TypedDict, final

import param

from gate.errors import GateError
from gate.principals import Permission
from gate.releases.policy import needs_dry_run
from gate.rulebook import RulebookDocument
from gate.rulebook.analysis import DiffReportJSON
from gate.strict_json import JsonValue
from workbench.app.access import Rights
from workbench.app.state.authoring import AuthoringState
from workbench.app.state.releases import confirmation_lines, impact_text
from workbench.app.store import CURRENT, HISTORY, WorkbenchStore, require
from workbench.migration.baseline import compared_with
from workbench.migration.errors import DryRunError
from workbench.migration.run import DryRun


@final  # no other members: `"refused" in computed` tells the two apart
class Computed(TypedDict):
    """A dry-run and the semantic diff beside it, as `MigrationState.compute` returns them."""

    run: DryRun
    semantic: DiffReportJSON | None
    seconds: float


@final
class Refused(TypedDict):
    refused: str  # why the draft or the history was refused


class MigrationState(param.Parameterized):
    scope = param.String(default="")
    rulebook_id = param.String(default="")
    running = param.Boolean(default=False)
    result = param.Dict(default=None, allow_None=True, doc="a copy of the last DryRunResult")
    semantic = param.Dict(default=None, allow_None=True, doc="exact semantic diff, current → draft")
    exported = param.Dict(default=None, allow_None=True, doc="name → path of the written files")
    promoted = param.Dict(default=None, allow_None=True)
    seconds = param.Number(default=None, allow_None=True)
    message = param.String(default="")
    proposal = param.Dict(default=None, allow_None=True, doc="a release move awaiting confirmation")
    against: param.Selector[str] = param.Selector(default=CURRENT, objects=[CURRENT, HISTORY],
                             doc="what the dry-run compares the draft with: the version production runs "
                                 "(current) or the verdicts stored in history (history); workbench.migration.baseline")

    def __init__(self, store: WorkbenchStore, authoring: AuthoringState, export_root: Path, rights: Rights,
                 **params: Any) -> None:
        super().__init__(**params)  # type: ignore[no-untyped-call]  # param's Parameterized.__init__ is unannotated
        self.store = store
        self.rights = rights  # who acts, and what their roles permit in the scope (checked at each move)
        self.authoring = authoring
        self.export_root = Path(export_root)
        self._run: DryRun | None = None

    def _draft(self) -> RulebookDocument | None:
        draft = self.authoring.draft
        if draft is None:
            self.message = "the draft on the Authoring page has errors: fix them first"
        return draft

    def run(self) -> None:
        """Dry-run the draft over every historical decision of the rulebook in this scope, and
        diff it exactly against the scope's current version (`begin`, `compute`, `finish` in
        one go). Blocking."""
        draft = self.begin()
        if draft is not None:
            self.finish(self.compute(draft))

    def _refused(self, permission: Permission) -> bool:
        """True (and the message says so) when the session's roles do not grant `permission`."""
        try:
            require(self.rights.permissions_in(self.scope), permission)
        except GateError as exc:
            self.message = f"refused ({exc.code}): {exc}"
            return True
        return False

    def may(self, permission: Permission) -> bool:
        """Whether the session's roles in the scope grant `permission` (what the page shows)."""
        return self.rights.may(self.scope, permission)

    def begin(self) -> RulebookDocument | None:
        """Mark a dry-run as started; the draft to run, or None (the message says why)."""
        if self._refused("dry_run"):
            return None
        draft = self._draft()
        if draft is None:
            return None
        self.running, self.exported, self.promoted = True, None, None
        self.message = f"dry-running {draft['rulebook_id']} {draft['version']} over history…"
        return draft

    def compute(self, draft: RulebookDocument) -> Computed | Refused:
        """The dry-run and the semantic diff, or the refusal, without touching any parameter:
        pages run this in a worker thread and apply the result with `finish` on the server's
        event loop (a parameter written from another thread may not reach the browser)."""
        rulebook_id = self.rulebook_id or draft["rulebook_id"]
        started = time.perf_counter()
        try:
            run = self.store.migration.dry_run(self.scope, rulebook_id, draft, against=self.against)
            semantic = self.store.migration.semantic_diff(self.scope, rulebook_id, draft)
        except (DryRunError, GateError) as exc:
            return {"refused": str(exc)}
        return {"run": run, "semantic": semantic, "seconds": time.perf_counter() - started}

    def finish(self, computed: Computed | Refused | None) -> None:
        """Apply what `compute` returned (None: it raised; the running flag is cleared)."""
        try:
            if computed is None:
                self.message = "dry-run failed: see the server log"
            elif "refused" in computed:
                self._run, self.result, self.semantic = None, None, None
                self.message = f"dry-run refused: {computed['refused']}"
            else:
                run = computed["run"]
                self._run, self.semantic, self.seconds = run, computed["semantic"], computed["seconds"]
                self.result = copy.deepcopy(run.result)  # the page's own copy, as the run's result stays the run's
                self.message = (f"{self.result['decisions_evaluated']} decisions replayed, "
                                f"{self.result['decisions_changed']} change verdict ({self.seconds:.2f} s), "
                                f"{compared_with(self.result['baseline'])}")
        finally:
            self.running = False

    def export(self) -> None:
        """Write the signed `rulebook_migration_v1` manifest and the reports of the last run."""
        if self._refused("export"):
            return
        if self._run is None:
            self.message = "run a dry-run first"
            return
        out = self.export_root / f"{self._run.result['rulebook_id']}-{int(time.time() * 1000)}"
        try:
            self.exported = self.store.migration.export_migration(self._run, out)
        except DryRunError as refused:  # the rule of `gate dry-run`: signed, or not written
            self.exported = None
            self.message = f"export refused ({refused.code}): {refused.message}"
            return
        self.message = f"exported to {out}"

    def start_shadow(self) -> None:
        """Publish the draft and evaluate it in shadow beside live decides (docs/releases.md)."""
        self._release("shadow")

    def request_activation(self) -> None:
        """Ask for confirmation of publishing the draft and activating it (`confirmation_text`)."""
        draft = self._draft()
        if draft is None or self._refused("publish") or self._refused("release"):
            return
        self.proposal = {"action": "activate", "rulebook_id": draft["rulebook_id"], "version": draft["version"]}

    def confirmation_text(self) -> str:
        """Plain text (the page escapes it): scope, version, arm shares, impact headline."""
        proposal = self.proposal
        if not proposal:
            return ""
        rulebook_id, version = proposal["rulebook_id"], proposal["version"]
        try:
            state = self.store.release_status(self.scope, rulebook_id)
        except GateError:  # never published here yet: no release state
            state = {"state": None, "policy": self.store.release_policy(self.scope)}
        required = bool(state["policy"].get("require_approval"))
        return confirmation_lines(f"Publish and activate {rulebook_id} version {version} in scope {self.scope}?",
                                  state["state"], "activate", version, None,
                                  impact_text(self.result, rulebook_id, version), required)

    def confirm(self) -> None:
        """Make the confirmed move: publish the draft and activate it (or request activation)."""
        proposal, self.proposal = self.proposal, None
        draft = self.authoring.draft
        if not proposal or draft is None:
            return
        if (draft.get("rulebook_id"), draft.get("version")) != (proposal["rulebook_id"], proposal["version"]):
            self.message = "the draft changed since you asked: request activation again"
            return
        self._release("activate")

    def cancel(self) -> None:
        self.proposal = None
        self.message = "cancelled: nothing was published or requested"

    def _release(self, action: str) -> None:
        draft = self._draft()
        if draft is None or self._refused("publish") or self._refused("release"):
            return
        body: dict[str, JsonValue] = {"action": action, "version": draft["version"],
                                "reason": f"from the Migration page ({'shadow' if action == 'shadow' else 'activation'})"}
        manifest = self._exported_manifest()
        if manifest is not None:
            body["migration_manifest_hash"] = manifest.get("migration_hash")
            if needs_dry_run(self.store.releases.policy(self.scope), action, None):
                # The scope asks for the evidence itself (guarded activation, docs/releases.md):
                # the exported, signed manifest of this draft's dry-run, checked in full.
                body["migration_manifest"] = manifest
        permissions = self.rights.permissions_in(self.scope)
        try:
            outcome = self.store.promote(self.scope, draft, permissions)
            event = self.store.release_act(self.scope, draft["rulebook_id"], body, self.rights.principal, permissions)
        except GateError as exc:
            self.promoted = None
            self.message = f"release refused ({exc.code}): {exc}"
            return
        self.promoted = outcome["registry"]
        pending = event["state"]["pending"]
        if action == "activate" and pending and pending[-1]["request_seq"] == event["seq"]:
            self.message = (f"activation of {draft['rulebook_id']} version {draft['version']} requested (request "
                            f"{event['seq']}): waiting for a second identity's approval on the Releases page")
        elif action == "activate":
            self.message = f"{draft['rulebook_id']} version {draft['version']} is active (release event {event['seq']})"
        else:
            self.message = (f"{draft['rulebook_id']} version {draft['version']} is in shadow beside live decides "
                            f"(release event {event['seq']})")

    def _exported_manifest(self) -> dict[str, JsonValue] | None:
        """The exported `migration.json`, when this draft's dry-run was exported (and names a hash)."""
        path = (self.exported or {}).get("migration.json")
        if path is None:
            return None
        try:
            manifest = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return manifest if isinstance(manifest, dict) and isinstance(manifest.get("migration_hash"), str) else None
