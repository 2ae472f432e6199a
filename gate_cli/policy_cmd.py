"""`gate init-policies`, `gate plan`, `gate apply`: rulebooks kept in git (docs/policy-as-code.md).

    gate init-policies DIR                    write DIR/<scope>/<rulebook_id>.json from what each scope runs
    gate plan  --dir DIR [--dataset D] [--out O] [--format markdown|json] [--fail-on COND,...]
    gate apply --dir DIR [--dataset D] [--out O] [--format markdown|json] [--fail-on COND,...]

The layout and `release.toml` are read by `gate_cli.policy_repo`. For every rulebook file whose
content differs from the version its scope runs (`ReleaseService.running_rulebook`, the baseline
`gate dry-run --scope` uses), the plan runs the exact semantic diff, lint and the full-history
dry-run (`DryRunService.run`, the very call `gate dry-run` makes: its `decisions_changed` is
`gate dry-run`'s for the same draft and dataset), and signs the manifest into `--out`.

`gate apply` plans the same way, then publishes each changed version and makes the move its
scope's `release.toml` names, passing the signed manifest (so `require_dry_run` passes) and naming
the plan's manifest hash in the signed event's reason. It never bypasses governance: where the
scope's policy requires approval the move is a pending request a second principal approves
(`gate release approve`, the workbench). A move already made or already requested is not made
again, so re-running apply changes nothing.

The gate is the local ledger, acted on as the operator (`gate_cli.context.operator`), or, with
`--gate URL`, a remote gate (`gate_cli.policy_remote`).

Exit codes: 0 nothing changes, 2 something changes (plan) or was published/requested (apply),
1 an error (nothing published) or a `--fail-on` condition met (apply then publishes nothing).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gate.protocol.canonical import sha256_hex
from gate.releases.model import ReleaseStateJSON, VersionJSON
from gate.rulebook import RulebookDocument, checked_rulebook
from gate_cli.help import Subparsers
from gate_cli.policy_repo import (
    Applied,
    Change,
    FailOn,
    Plan,
    PolicyFile,
    PolicyLayoutInvalid,
    Release,
    Running,
    parse_fail_on,
    read_layout,
    release_toml,
)

if TYPE_CHECKING:
    from gate.keys.anchors import TrustAnchors
    from gate.ledger import Ledger
    from gate.services.releases import ReleaseService
    from gate.settings import Settings
    from workbench.migration.manifest import MigrationManifest

# The command line's one rule (gate_cli.context, docs/errors.md "Exit status"): a refusal raises to
# `gate_cli.main` (exit 2, its code printed once); a met `--fail-on` is a failed check (1); a plan
# that changes something, or an apply that did, reports it (3).
EXIT_UNCHANGED, EXIT_FAILED, EXIT_CHANGED = 0, 1, 3


class Gate(Protocol):
    """What plan and apply ask of a gate: the local ledger (`LocalGate`) or a remote one."""

    def scopes(self) -> frozenset[str]: ...
    def running(self, scope: str, rulebook_id: str, file: PolicyFile) -> Running | None: ...
    def published_hash(self, scope: str, rulebook_id: str, version: str) -> str | None: ...
    def state(self, scope: str, rulebook_id: str) -> ReleaseStateJSON | None: ...
    def publish(self, scope: str, rulebook: RulebookDocument) -> bool: ...
    def act(self, scope: str, rulebook_id: str, body: dict[str, Any]) -> dict[str, Any]: ...
    def close(self) -> None: ...


class LocalGate:
    """The local ledger (GATE_DATABASE_URL), acted on by the local operator through the same
    `ReleaseService` as `gate release`."""

    def __init__(self, settings: Settings) -> None:
        from gate.services.root import decision_services, signing_setup
        from gate_cli.context import open_ledger

        self.ledger: Ledger = open_ledger(settings)
        self.releases: ReleaseService = decision_services(
            self.ledger, signing_setup(settings), checkpoint_log=settings.checkpoint_log).release_service()

    def scopes(self) -> frozenset[str]:
        """Every scope with a recorded decision (`gate.ledger.stream.scopes`: its chain head)."""
        from gate.ledger import stream

        return frozenset(stream.scopes(self.ledger))

    def rulebook_ids(self, scope: str) -> list[str]:
        return list(self.ledger.rulebook_ids(scope))

    def running(self, scope: str, rulebook_id: str, file: PolicyFile | None = None) -> Running | None:
        found = self.releases.running_rulebook(scope, rulebook_id)  # a registered, so valid, snapshot
        return (checked_rulebook(found[0]), found[1]) if found is not None else None

    def published_hash(self, scope: str, rulebook_id: str, version: str) -> str | None:
        row = self.releases.snapshots.bound_snapshot(scope, rulebook_id, version)
        return str(row["rulebook_hash"]) if row is not None else None

    def state(self, scope: str, rulebook_id: str) -> ReleaseStateJSON | None:
        return self.releases.state(scope, rulebook_id, fresh=True).to_json()

    def publish(self, scope: str, rulebook: RulebookDocument) -> bool:
        _metadata, created = self.releases.snapshots.register_rulebook(scope, rulebook)
        return created

    def act(self, scope: str, rulebook_id: str, body: dict[str, Any]) -> dict[str, Any]:
        from gate_cli.context import OPERATOR_PERMISSIONS, operator

        event, _created = self.releases.act(scope, operator(), OPERATOR_PERMISSIONS, rulebook_id, body)
        return event

    def close(self) -> None:
        self.ledger.dispose()


# ---------------------------------------------------------------------------- the parser


def add_init_parser(sub: Subparsers) -> None:
    init = sub.add_parser("init-policies")
    init.add_argument("dir", help="the folder to write DIR/<scope>/<rulebook_id>.json and release.toml into "
                                  "(created; an existing file is never overwritten)")
    init.add_argument("--scope", action="append", default=None,
                      help="only this scope (repeatable; default: every scope with a rulebook)")
    init.set_defaults(func=cmd_init_policies)


def add_plan_parser(sub: Subparsers) -> None:
    _add_dir_parser(sub, "plan")


def add_apply_parser(sub: Subparsers) -> None:
    _add_dir_parser(sub, "apply")


def _add_dir_parser(sub: Subparsers, name: str) -> None:
    """`gate plan` and `gate apply`: the same arguments over a policies folder."""
    p = sub.add_parser(name)
    p.add_argument("--dir", required=True, help="the policies folder: DIR/<scope>/<rulebook_id>.json (required)")
    p.add_argument("--dataset", default=None, help="an exported, signed dataset folder to replay "
                                                   "(default: the live ledger, as gate dry-run)")
    p.add_argument("--allow-unsigned", action="store_true",
                   help="with --dataset: read a dataset whose manifest carries no signature (default: refused)")
    p.add_argument("--key-registry", default=None, metavar="FILE",
                   help="with --dataset: a saved key registry (GET /api/decision/receipt-keys) whose public keys "
                        "the dataset's signature may verify with (default: GATE_KEY_REGISTRY)")
    p.add_argument("--key-fingerprint", action="append", default=None, metavar="SHA256",
                   help="with --gate and --dataset: trust the key of this fingerprint the gate publishes at "
                        "/api/decision/receipt-keys (repeatable; a fingerprint it does not publish is refused; default: none)")
    p.add_argument("--out", default=None, help="folder for each change's signed dry-run "
                                               "(<scope>/<rulebook_id>/migration.json, report.md, …) and plan.json "
                                               "(default: GATE_HOME/plans/<time>)")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown",
                   help="markdown (a pull-request comment) or json (default: markdown)")
    p.add_argument("--fail-on", default=None, metavar="COND[,COND…]",
                   help="exit 1 when a change meets a condition NAME OP INTEGER, NAME one of decisions_changed, "
                        "lost_failures, failures_caught, successes_lost, review_load_change, lint_warnings, "
                        "unreplayable (for example lost_failures>0; default: none)")
    p.add_argument("--scope", default=None,
                   help="only DIR/<scope> (required with --gate: the credential's scope; default: every scope)")
    p.add_argument("--gate", default=None, metavar="URL",
                   help="a remote gate, acted on with GATE_API_KEY (and GATE_ID_TOKEN, a CI workload-identity "
                        "token, when set); default: the local ledger as the operator")
    p.set_defaults(func=cmd_plan if name == "plan" else cmd_apply, policy_command=name)


# ---------------------------------------------------------------------------- init-policies


def cmd_init_policies(args: argparse.Namespace) -> int:
    from gate_cli.context import load_settings

    root = Path(args.dir)
    gate = LocalGate(load_settings())
    written = []
    try:
        known = gate.scopes()
        for scope in args.scope or sorted(known):
            if scope not in known:
                raise PolicyLayoutInvalid(f"--scope {scope}: the gate knows no such scope")
            for rulebook_id in gate.rulebook_ids(scope):
                running = gate.running(scope, rulebook_id)
                if running is not None:
                    written += _write_rulebook(root / scope, running[0])
    finally:
        gate.close()
    for path in written:
        print(f"wrote {path}")
    if not written:
        print(f"gate init-policies: nothing written: no scope runs a rulebook, or {root} already holds them")
    return 0


def _write_rulebook(folder: Path, rulebook: RulebookDocument) -> list[Path]:
    """The rulebook's file (and the scope's release.toml) in `folder`; an existing file is kept."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    path = folder / f"{rulebook['rulebook_id']}.json"
    if not path.exists():
        path.write_text(json.dumps(rulebook, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    release = folder / "release.toml"
    if not release.exists():
        release.write_text(release_toml(Release()), encoding="utf-8")
        written.append(release)
    return written


# ---------------------------------------------------------------------------- plan


class Planner:
    """Plans each file against `gate`: the version it runs, the published versions, the dry-run."""

    def __init__(self, gate: Gate, args: argparse.Namespace, settings: Settings,
                 public: TrustAnchors | None = None) -> None:
        self.gate, self.args, self.settings = gate, args, settings
        self.public = public  # a remote gate's pinned public keys (the dataset's trust)
        self.out = Path(args.out) if args.out else settings.home / "plans" / _stamp()

    def unchanged(self, file: PolicyFile) -> Running | bool | None:
        """True when the scope runs exactly this file; else what it runs (None: nothing).
        PolicyLayoutInvalid when the file's version is published with other content."""
        published = self.gate.published_hash(file.scope, file.rulebook_id, file.version)
        if published is not None and published != file.rulebook_hash:
            raise PolicyLayoutInvalid(f"{file.path}: version {file.version!r} of {file.rulebook_id!r} is already "
                                      f"published in {file.scope!r} with other content (sha256 {published[:16]}…): "
                                      "give the changed rulebook a new version")
        running = self.gate.running(file.scope, file.rulebook_id, file)
        if running is not None and sha256_hex(running[0]) == file.rulebook_hash:
            return True
        return running

    def change(self, file: PolicyFile, running: Running | None) -> Change:
        """The semantic diff, lint and signed full-history dry-run of `file` against `running`."""
        from gate.rulebook.analysis import lint, semantic_diff

        diff = semantic_diff(running[0], file.rulebook).to_json() if running is not None else None
        report = lint(file.rulebook).to_json()
        manifest, out, note = self._dry_run(file, running)
        return Change(file, running, diff, report, manifest, out, note)

    def _dry_run(self, file: PolicyFile, running: Running | None
                 ) -> tuple[MigrationManifest | None, Path, str | None]:
        """`gate dry-run --scope S --rulebook-id ID --draft FILE [--dataset D]`: the same service call,
        the same baseline (what the scope runs), signed and written to OUT/<scope>/<rulebook_id>."""
        from gate.services.root import signing_setup
        from gate_cli.context import dataset_trust, ledger_at_hand
        from workbench.migration import DryRunError
        from workbench.services.root import compose

        setup = signing_setup(self.settings)
        out = self.out / file.scope / file.rulebook_id
        ledger = ledger_at_hand(self.settings)
        try:
            trust = (dataset_trust(self.settings, allow_unsigned=self.args.allow_unsigned, ledger=ledger,
                                   key_registry=self.args.key_registry, public=self.public)
                     if self.args.dataset is not None else None)
            dry_runs = compose(setup, ledger if self.args.dataset is None else None).dry_runs
            dry_runs.check_signing()
            out.mkdir(parents=True, exist_ok=True)
            try:
                run = dry_runs.run(file.rulebook, file.rulebook_id, scope=file.scope, dataset=self.args.dataset,
                                   trust=trust, baseline=running, flips_path=out / "flips.parquet")
            except DryRunError as error:
                if error.code not in ("HISTORY_EMPTY", "RULEBOOK_UNKNOWN"):  # a rulebook no decision ran yet
                    raise
                return None, out, f"no dry-run: {error.message}"
            return dry_runs.write(run, out), out, None
        finally:
            if ledger is not None:
                ledger.dispose()

    def plan(self, files: list[PolicyFile]) -> Plan:
        changes, unchanged = [], []
        for file in files:
            running = self.unchanged(file)
            if running is True:
                unchanged.append(file)
            else:
                changes.append(self.change(file, running if isinstance(running, tuple) else None))
        return Plan(changes, unchanged, self.out)


def _stamp() -> str:
    from gate_cli.context import now

    return now().replace(":", "").replace("-", "").replace(".", "")


def _open_gate(args: argparse.Namespace, settings: Settings) -> Gate:
    if args.gate is None:
        return LocalGate(settings)
    from gate_cli.policy_remote import RemoteGate

    if args.scope is None or args.dataset is None:
        raise PolicyLayoutInvalid("--gate needs --scope (the credential's scope) and --dataset (the history to "
                                  "replay: a signed export of that gate)")
    return RemoteGate(args.gate, Path(args.dir), args.scope)


def _pinned_keys(args: argparse.Namespace, gate: Gate) -> TrustAnchors | None:
    """`--key-fingerprint`: the remote gate's published keys of those fingerprints (public only)."""
    if not args.key_fingerprint:
        return None
    from gate_cli.policy_remote import RemoteGate

    if not isinstance(gate, RemoteGate) or args.dataset is None:
        raise PolicyLayoutInvalid("--key-fingerprint pins a key of the --gate's registry: give --gate and --dataset")
    return gate.receipt_keys(args.key_fingerprint)


def _gated(plan: Plan, conditions: tuple[FailOn, ...]) -> bool:
    """Marks each change with the conditions it meets; True when any is met."""
    for change in plan.changes:
        figures = change.figures()
        change.met = [str(c) for c in conditions if c.met(figures)]
    return any(change.met for change in plan.changes)


def _run(args: argparse.Namespace, apply: bool) -> int:
    from gate_cli.context import load_settings
    from gate_cli.policy_report import plan_markdown

    gate: Gate | None = None
    try:
        conditions = parse_fail_on(args.fail_on)  # refused before any work
        settings = load_settings()
        gate = _open_gate(args, settings)
        files = read_layout(Path(args.dir), gate.scopes(), only=args.scope)
        planner = Planner(gate, args, settings, _pinned_keys(args, gate))
        plan = planner.plan(files) if not apply else _apply_plan(planner, files)
        failed = _gated(plan, conditions)
        if apply and not failed:
            for change in plan.changes:
                change.applied = _apply(gate, change)
    finally:  # a refusal of the layout, the gate, the dry-run (DryRunError) or signing: gate_cli.main prints it
        if gate is not None:
            gate.close()
    plan.out.mkdir(parents=True, exist_ok=True)
    (plan.out / "plan.json").write_text(json.dumps(plan.to_json(), indent=2) + "\n", encoding="utf-8")
    print(json.dumps(plan.to_json(), indent=2) if args.format == "json" else plan_markdown(plan, apply, failed))
    if failed:
        return EXIT_FAILED
    if apply:
        return EXIT_CHANGED if any(change.applied for change in plan.changes) else EXIT_UNCHANGED
    return EXIT_CHANGED if plan.changes else EXIT_UNCHANGED


def cmd_plan(args: argparse.Namespace) -> int:
    return _run(args, apply=False)


def cmd_apply(args: argparse.Namespace) -> int:
    return _run(args, apply=True)


# ---------------------------------------------------------------------------- apply


def _done(state: ReleaseStateJSON | None, file: PolicyFile) -> str | None:
    """What of the release step is already done: "active", "shadow", "canary", or "requested (seq N)"
    when a pending request asks for exactly this move; None when it is still to make."""
    if state is None:
        return None
    release = file.release

    def same(member: VersionJSON | None) -> bool:
        return (member is not None and member.get("version") == file.version
                and member.get("rulebook_hash") == file.rulebook_hash)

    if release.strategy == "activate" and same(state.get("active")):
        return "active"
    if release.strategy == "shadow" and same(state.get("shadow")):
        return "shadow"
    canary = state.get("canary")
    if release.strategy == "canary" and canary is not None and same(canary) and canary["percent"] == release.percent:
        return "canary"
    for pending in state.get("pending", []):
        if pending["action"] == release.strategy and same(pending) and pending.get("percent") == release.percent:
            return f"requested (request {pending['request_seq']})"
    return None


def _apply_plan(planner: Planner, files: list[PolicyFile]) -> Plan:
    """The plan apply acts on: a file whose move is already made or requested is not planned again
    (re-running apply changes nothing, and replays no history)."""
    pending, done = [], {}
    for file in files:
        made = _done(planner.gate.state(file.scope, file.rulebook_id), file)
        if made is not None:
            planner.unchanged(file)  # still refused when its version is published with other content
            done[file.path] = made
        else:
            pending.append(file)
    plan = planner.plan(pending)
    return Plan(plan.changes, [f for f in files if f.path in done] + plan.unchanged, plan.out, done)


def _apply(gate: Gate, change: Change) -> Applied:
    """Publish the change's version and make its release move, citing the plan's signed manifest."""
    file, release = change.file, change.file.release
    created = gate.publish(file.scope, file.rulebook)
    manifest_hash = change.manifest.get("migration_hash") if change.manifest else None
    cite = f"plan {manifest_hash}" if manifest_hash else "plan without a dry-run (no recorded decisions)"
    reason = f"{release.reason} (gate apply, {cite})" if release.reason else f"gate apply, {cite}"
    body: dict[str, Any] = {"action": release.strategy, "version": file.version, "reason": reason[:500]}
    if release.strategy == "canary":
        body["percent"] = release.percent
        if release.subject is not None:
            body["subject"] = release.subject
    if change.manifest is not None:
        if release.strategy in ("canary", "activate"):
            body["migration_manifest"] = change.manifest  # checked in full by the gate
        else:
            body["migration_manifest_hash"] = manifest_hash
    event = gate.act(file.scope, file.rulebook_id, body)
    requested = event.get("approval_expires_at") is not None  # a request a second principal approves
    return {"published": created, "event_seq": event["seq"], "event_hash": event["event_hash"],
            "action": event["action"], "result": "requested" if requested else "applied",
            "actor": event.get("actor")}
