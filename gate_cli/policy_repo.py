"""The policy-as-code layout a repository keeps (docs/policy-as-code.md), read strictly.

    DIR/<scope>/<rulebook_id>.json   a Rulebook v1, one version per file: the file's `version`
                                      is the version it publishes
    DIR/<scope>/release.toml         optional: how a change of that scope goes out

`release.toml` holds exactly these keys (any other is refused):

    strategy = "activate"            # shadow | canary | activate (default: activate)
    percent  = 10                    # canary only, required there: 0 < percent < 100, two decimals
    subject  = "context.source_record_id"   # canary only, optional: the request path that picks the arm
    reason   = "..."                 # optional: recorded in the signed release event

`--fail-on` conditions (`gate plan`, `gate apply`) are `NAME OP INTEGER`, comma-separated, at most
eight: NAME one of `FAIL_ON_FIGURES`, OP one of `> >= < <= == !=`. Everything here is pure: it
reads files, never the ledger nor a gate.
"""

from __future__ import annotations

import operator
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from gate.errors import CodedError, RulebookInvalid
from gate.protocol.canonical import CanonicalJSONError, parse_strict, sha256_hex
from gate.rulebook import RulebookDocument, checked_rulebook
from gate.strict_json import JsonValue

if TYPE_CHECKING:  # the dry-run (Polars) is imported only when a plan runs one
    from gate.rulebook.analysis import DiffReportJSON, LintReportJSON
    from workbench.migration.manifest import MigrationManifest

__all__ = ["FAIL_ON_FIGURES", "FailOn", "PolicyFile", "PolicyLayoutInvalid", "Release", "parse_fail_on",
           "read_layout"]

RELEASE_FILE = "release.toml"
STRATEGIES = ("shadow", "canary", "activate")
_RELEASE_KEYS = frozenset({"strategy", "percent", "subject", "reason"})
# A scope folder's name and a rulebook file's stem: what a scope and a rulebook id may be on disk.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,119}$")
_SUBJECT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63}){0,7}$")
MAX_FILES = 500
MAX_FILE_BYTES = 1_000_000


class PolicyLayoutInvalid(CodedError):
    """The policies folder, one of its files, or a `--fail-on` condition is not what the layout
    allows: nothing is planned, published or released (exit status 1)."""

    CODE = "POLICY_LAYOUT_INVALID"


class ReleaseJSON(TypedDict):
    strategy: str
    percent: float | None
    subject: str | None
    reason: str | None


@dataclass(frozen=True, slots=True)
class Release:
    """How a scope's changes go out (its `release.toml`, or activate where it has none)."""

    strategy: str = "activate"
    percent: float | None = None
    subject: str | None = None
    reason: str | None = None

    def to_json(self) -> ReleaseJSON:
        return {"strategy": self.strategy, "percent": self.percent, "subject": self.subject, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class PolicyFile:
    """One rulebook file of the layout: where it is, its scope, its body and the body's hash."""

    path: Path
    scope: str
    rulebook: RulebookDocument
    rulebook_hash: str
    release: Release

    @property
    def rulebook_id(self) -> str:
        return self.rulebook["rulebook_id"]

    @property
    def version(self) -> str:
        return self.rulebook["version"]


def read_layout(root: Path, scopes: frozenset[str] | None = None, only: str | None = None) -> list[PolicyFile]:
    """Every rulebook file under `root`, sorted by scope then rulebook id; PolicyLayoutInvalid for a
    folder that is missing, a file or folder the layout does not name, a file that is not a valid
    Rulebook v1, a file named other than its `rulebook_id`, or a bad `release.toml`. `scopes`, when
    given, are the scopes the gate knows: a folder naming another is refused. `only`: that scope's
    folder alone is read (it must exist)."""
    if only is not None and not (root / only).is_dir():
        raise PolicyLayoutInvalid(f"--scope {only}: {root / only} is not a folder")
    if not root.is_dir():
        raise PolicyLayoutInvalid(f"{root} is not a folder (the layout is DIR/<scope>/<rulebook_id>.json)")
    files: list[PolicyFile] = []
    for folder in sorted(root.iterdir()):
        if folder.name.startswith("."):
            continue  # .git, editor files: not part of the layout
        if only is not None and folder.name != only:
            continue
        if not folder.is_dir() or not _NAME.fullmatch(folder.name):
            raise PolicyLayoutInvalid(f"{folder}: only scope folders belong in {root} (DIR/<scope>/<rulebook_id>.json)")
        if scopes is not None and folder.name not in scopes:
            raise PolicyLayoutInvalid(f"{folder}: the gate knows no scope {folder.name!r} (known: "
                                      f"{', '.join(sorted(scopes)) or 'none'})")
        release = read_release(folder / RELEASE_FILE)
        for path in sorted(folder.iterdir()):
            if path.name == RELEASE_FILE or path.name.startswith("."):
                continue
            if path.suffix != ".json" or not path.is_file():
                raise PolicyLayoutInvalid(f"{path}: a scope folder holds <rulebook_id>.json files and {RELEASE_FILE}")
            files.append(_policy_file(path, folder.name, release))
            if len(files) > MAX_FILES:
                raise PolicyLayoutInvalid(f"{root} holds more than {MAX_FILES} rulebook files")
    return files


def _policy_file(path: Path, scope: str, release: Release) -> PolicyFile:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise PolicyLayoutInvalid(f"cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise PolicyLayoutInvalid(f"{path} is larger than {MAX_FILE_BYTES:,} bytes")
    try:
        body = parse_strict(data)
    except CanonicalJSONError as exc:
        raise PolicyLayoutInvalid(f"{path} is not valid JSON: {exc.message}") from None
    try:
        rulebook = checked_rulebook(body)
    except RulebookInvalid as exc:
        first = exc.errors[0]
        raise PolicyLayoutInvalid(f"{path} is not a valid Rulebook v1: {first['field']}: {first['code']}: "
                                  f"{first['message']}", errors=exc.errors) from None
    if path.stem != rulebook["rulebook_id"]:
        raise PolicyLayoutInvalid(f"{path}: the file of rulebook {rulebook['rulebook_id']!r} is named "
                                  f"{rulebook['rulebook_id']}.json")
    return PolicyFile(path, scope, rulebook, sha256_hex(rulebook), release)


def read_release(path: Path) -> Release:
    """The scope's `release.toml` (the module docstring), or activate where there is none."""
    if not path.exists():
        return Release()
    try:
        body = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PolicyLayoutInvalid(f"{path}: {exc}") from None
    unknown = sorted(set(body) - _RELEASE_KEYS)
    if unknown:
        raise PolicyLayoutInvalid(f"{path}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(_RELEASE_KEYS))})")
    strategy = body.get("strategy", "activate")
    if strategy not in STRATEGIES:
        raise PolicyLayoutInvalid(f"{path}: strategy must be one of {', '.join(STRATEGIES)}")
    percent, subject, reason = body.get("percent"), body.get("subject"), body.get("reason")
    if strategy == "canary":
        if isinstance(percent, bool) or not isinstance(percent, int | float) or not 0 < percent < 100 \
                or round(percent * 100) != percent * 100:
            raise PolicyLayoutInvalid(f"{path}: a canary needs percent, above 0 and below 100, at most two decimals")
        if subject is not None and (not isinstance(subject, str) or not _SUBJECT.fullmatch(subject)):
            raise PolicyLayoutInvalid(f"{path}: subject must be a dotted request path such as context.source_record_id")
    elif percent is not None or subject is not None:
        raise PolicyLayoutInvalid(f"{path}: percent and subject go with strategy = \"canary\"")
    if reason is not None and (not isinstance(reason, str) or not 0 < len(reason) <= 500):
        raise PolicyLayoutInvalid(f"{path}: reason must be text of 1 to 500 characters")
    return Release(strategy, float(percent) if percent is not None else None, subject, reason)


def release_toml(release: Release) -> str:
    """The text `gate init-policies` writes for a scope: the strategy, and the others as comments."""
    return "\n".join([
        "# How a change of this scope's rulebooks goes out (gate apply; docs/policy-as-code.md).",
        "# strategy: shadow | canary | activate. A canary also takes percent (0 < P < 100) and subject.",
        f"strategy = \"{release.strategy}\"",
        "# percent = 10",
        "# subject = \"context.source_record_id\"",
        "# reason = \"why this goes out\"",
        "",
    ])


# ---------------------------------------------------------------------------- --fail-on

# The figures of one change a condition can name (gate_cli.policy_cmd.figures computes them).
FAIL_ON_FIGURES = ("decisions_changed", "lost_failures", "failures_caught", "successes_lost",
                   "review_load_change", "lint_warnings", "unreplayable")
_OPERATORS: Mapping[str, Callable[[Any, Any], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt}
_CONDITION = re.compile(r"^\s*([a-z_]{1,40})\s*(>=|<=|==|!=|>|<)\s*(-?\d{1,12})\s*$")
MAX_CONDITIONS = 8


@dataclass(frozen=True, slots=True)
class FailOn:
    """One `--fail-on` condition: met by a change whose figure compares so with the bound."""

    figure: str
    op: str
    bound: int

    def met(self, figures: Mapping[str, int]) -> bool:
        return _OPERATORS[self.op](figures[self.figure], self.bound)

    def __str__(self) -> str:
        return f"{self.figure}{self.op}{self.bound}"


def parse_fail_on(text: str | None) -> tuple[FailOn, ...]:
    """The conditions of `--fail-on` (the module docstring), or PolicyLayoutInvalid naming the bad one."""
    if text is None:
        return ()
    parts = text.split(",")
    if len(parts) > MAX_CONDITIONS:
        raise PolicyLayoutInvalid(f"--fail-on: at most {MAX_CONDITIONS} conditions")
    conditions = []
    for part in parts:
        match = _CONDITION.fullmatch(part)
        if match is None or match.group(1) not in FAIL_ON_FIGURES:
            raise PolicyLayoutInvalid(f"--fail-on: {part.strip()!r} is not NAME OP INTEGER with NAME one of "
                                      f"{', '.join(FAIL_ON_FIGURES)} and OP one of > >= < <= == !=")
        conditions.append(FailOn(match.group(1), match.group(2), int(match.group(3))))
    return tuple(conditions)


# ---------------------------------------------------------------------------- a plan

Running = tuple[RulebookDocument, str]  # (the body a scope runs, where that comes from)


class Applied(TypedDict):
    """What `gate apply` did with one change: the version published (or already), the release
    event made, and whether it applied or waits for a second principal (`requested`)."""

    published: bool
    event_seq: int
    event_hash: str
    action: str
    result: str
    actor: str | None


@dataclass
class Change:
    """One rulebook file that differs from what its scope runs, with everything the plan found."""

    file: PolicyFile
    running: Running | None
    diff: DiffReportJSON | None
    lint: LintReportJSON
    manifest: MigrationManifest | None  # the dry-run's, as written
    out: Path | None
    note: str | None = None
    applied: Applied | None = None
    met: list[str] = field(default_factory=list)

    def figures(self) -> dict[str, int]:
        """The figures `--fail-on` names (gate_cli.policy_repo.FAIL_ON_FIGURES), from the signed manifest."""
        d = self.manifest["dry_run"] if self.manifest is not None else None
        lint_warnings = int(self.lint["counts"]["warning"])
        if d is None:
            return {"decisions_changed": 0, "lost_failures": 0, "failures_caught": 0, "successes_lost": 0,
                    "review_load_change": 0, "lint_warnings": lint_warnings, "unreplayable": 0}
        from workbench.migration.impact import measured

        impact = measured(d["impact"])
        # A known failure the draft now approves and the baseline did not: a failure it lets through.
        lost = sum(cell["failure"] for cell in d["outcomes"]["by_transition"]
                   if cell["to"] == "yes" and cell["from"] != "yes")
        return {"decisions_changed": d["decisions_changed"], "lost_failures": lost,
                "failures_caught": impact["failures_caught"]["count"],
                "successes_lost": impact["successes_lost"]["count"],
                "review_load_change": impact["review_load_change"]["count"],
                "lint_warnings": lint_warnings, "unreplayable": d["decisions_unreplayable"]}

    def to_json(self) -> dict[str, Any]:
        d = self.manifest["dry_run"] if self.manifest is not None else None
        from_version = self.running[0]["version"] if self.running else None
        return {
            "scope": self.file.scope, "rulebook_id": self.file.rulebook_id, "file": str(self.file.path),
            "from_version": from_version,
            "from_rulebook_hash": sha256_hex(self.running[0]) if self.running else None,
            "baseline": self.running[1] if self.running else "history (no version runs in the scope)",
            "to_version": self.file.version, "to_rulebook_hash": self.file.rulebook_hash,
            "decisions_changed": d["decisions_changed"] if d else 0,
            "flips": [t for t in d["transitions"] if t["from"] != t["to"] and t["count"]] if d else [],
            "figures": self.figures(),
            "impact": d["impact"] if d else None,
            "review_load": {k: d["review_load"][k] for k in ("before", "after", "per_month_before", "per_month_after")}
            if d else None,
            "semantic_diff": self.diff, "lint": self.lint,
            "manifest_hash": self.manifest.get("migration_hash") if self.manifest else None,
            "manifest": str(self.out / "migration.json") if self.out and self.manifest else None,
            "release": self.file.release.to_json(), "note": self.note,
            "fail_on_met": self.met, "applied": self.applied,
        }


@dataclass
class Plan:
    changes: list[Change]
    unchanged: list[PolicyFile]
    out: Path
    done: dict[Path, str] = field(default_factory=dict)  # apply: a file's move already made or requested

    def to_json(self) -> dict[str, JsonValue]:
        return {"changes": [c.to_json() for c in self.changes],
                "unchanged": [{"scope": f.scope, "rulebook_id": f.rulebook_id, "version": f.version,
                               "release": self.done.get(f.path)} for f in self.unchanged], "out": str(self.out)}
