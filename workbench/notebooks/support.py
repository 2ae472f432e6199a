"""What the notebooks under `notebooks/` share: where the dataset and the rulebooks are, and the
few table-shaped views of engine output that their plots and investigations read.

Paths never depend on the kernel's working folder (Jupyter starts a kernel in the notebook's
folder, `scripts/notebooks` in `var/notebooks/`). In order:

* `GATE_DATASET`: the Parquet dataset (a folder, or a URL `workbench.dataset.load` reads);
* else `$GATE_HOME/dataset`, `GATE_HOME` defaulting to `var` as for every `gate` command;
* `GATE_RULEBOOKS`: the sample rulebooks, default the ones the `gate` package ships
  (`gate/data/rulebooks`, found through `gate.resources`, so also from an installed wheel).

The dataset is read only as the CLI reads it (`dataset_trust`): its manifest signed by a key of
the gate's keyring in `GATE_HOME` (or GATE_SIGNING_KEY_FILE, GATE_RECEIPT_HMAC_SECRET), or, with
`GATE_ALLOW_UNSIGNED=1`, unsigned (a synthetic dataset), every report then saying so.

A relative value is taken from the project root: the folder with this project's
`pyproject.toml`, found by walking up from this module (the checkout the kernel imports). Where
the kernel imports an installed wheel (no checkout above it), the root is the working folder,
as `GATE_HOME=var` is for every `gate` command there.
`scripts/demo` fills `var/dataset`; `gate export --out DIR` writes one from any ledger.

Every figure the notebooks show comes from the engines, through the functions the API and
the workbench call (`workbench.reports.policy`); the helpers here only select frames for them
and lay their reports out as rows.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from gate.errors import CodedError
from gate.resources import data_path
from workbench.dataset.load import Frames
from workbench.dataset.trust import Trust, reader_trust
from workbench.engines.common import latest_outcomes
from workbench.reports.policy import CLASSES, ReportParams, effectiveness_report

PROJECT_NAME = 'name = "decision-gate"'
MANIFEST = "manifest.json"
FACT_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")


class NotebookSetupError(CodedError):
    """The notebooks cannot run here: no dataset where the paths point (the message says how
    to make one)."""

    CODE = "NOTEBOOK_SETUP_FAILED"


@dataclass(frozen=True)
class NotebookPaths:
    root: Path
    home: Path
    dataset: str
    rulebooks: Path
    output: Path
    dataset_origin: str = "var/dataset under the project root"


def project_root(start: Path | None = None) -> Path:
    """The nearest folder at or above `start` (default: this module's folder) holding this
    project's pyproject.toml."""
    here = (start or Path(__file__)).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file() and PROJECT_NAME in candidate.read_text(encoding="utf-8"):
            return folder
    raise NotebookSetupError(f"no decision-gate pyproject.toml at or above {here}: run the notebooks "
                             "from a checkout of the project (README, \"Notebooks\")")


def _default_root() -> Path:
    """The checkout the kernel imports, else (an installed wheel) the working folder."""
    try:
        return project_root()
    except NotebookSetupError:
        return Path.cwd()


def _under(root: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else root / path


def notebook_paths(env: Mapping[str, str] | None = None, *, root: Path | None = None) -> NotebookPaths:
    """The dataset, rulebook and output paths from the environment and the project root."""
    env = os.environ if env is None else env
    root = root or _default_root()
    home = _under(root, env.get("GATE_HOME") or "var")
    raw = env.get("GATE_DATASET")
    dataset = raw if raw and "://" in raw else str(_under(root, raw) if raw else home / "dataset")
    origin = "GATE_DATASET" if raw else "$GATE_HOME/dataset" if env.get("GATE_HOME") else NotebookPaths.dataset_origin
    chosen = env.get("GATE_RULEBOOKS")
    rulebooks = _under(root, chosen) if chosen else data_path("rulebooks")
    return NotebookPaths(root, home, dataset, rulebooks, home / "notebooks", origin)


def require_dataset(paths: NotebookPaths) -> NotebookPaths:
    """`paths` when its dataset folder holds an export; else NotebookSetupError naming the
    folder, where it came from and the commands that create it."""
    if "://" in paths.dataset or (Path(paths.dataset) / MANIFEST).is_file():
        return paths
    raise NotebookSetupError(
        f"no dataset at {paths.dataset} ({paths.dataset_origin}; no {MANIFEST} there). Create it first: "
        "`scripts/demo` seeds the demo ledger and exports it to $GATE_HOME/dataset (var/dataset), or "
        f"`.venv/bin/gate export --out {paths.dataset}` exports an existing ledger; or point GATE_DATASET "
        "at a dataset folder.")


def dataset_trust(paths: NotebookPaths, env: Mapping[str, str] | None = None) -> Trust:
    """How a notebook trusts its dataset (`workbench.dataset.trust.reader_trust`): the keys of the
    gate whose home `paths.home` is, GATE_ALLOW_UNSIGNED=1 as the opt-in to unsigned data, and
    the newest manifest seen kept in that home (no ledger: staleness is not checked)."""
    # Lazy: the keyring is read only by a notebook that reads the dataset.
    from gate.settings import Settings
    from workbench.services.root import signing_setup

    env = dict(os.environ if env is None else env)
    settings = Settings.from_env({**env, "GATE_HOME": str(paths.home)})
    return reader_trust(paths.home, signing_setup(settings).trust_anchors(),
                        allow_unsigned=env.get("GATE_ALLOW_UNSIGNED") == "1", env=env)


def setup() -> NotebookPaths:
    """A notebook's first call: its paths, refusing clearly when the dataset is missing, and
    the plot settings (caller text in labels stays text: see `workbench.notebooks.plots`)."""
    # matplotlib takes over a second to import: only a notebook that plots pays for it (not the runner).
    from workbench.notebooks import plots as notebook_plots

    notebook_plots.configure()
    return require_dataset(notebook_paths())


def month_frames(frames: Frames, month: str) -> Frames:
    """The decisions of one month and all their outcomes (as `workbench.reports.timeseries.monthly`)."""
    decisions = frames.decisions.filter(pl.col("month") == month)
    outcomes = frames.outcomes.join(decisions.select("decision_id"), on="decision_id", how="semi")
    return Frames(decisions, outcomes)


def decision_frames(frames: Frames, decision_ids: list[str]) -> Frames:
    """Just these decisions and their outcomes."""
    decisions = frames.decisions.filter(pl.col("decision_id").is_in(decision_ids))
    outcomes = frames.outcomes.join(decisions.select("decision_id"), on="decision_id", how="semi")
    return Frames(decisions, outcomes)


# `report_row`'s columns with their types: a frame of such rows is built with them, never with types
# inferred from its first rows (a column null there would refuse a later value).
REPORT_ROW_SCHEMA: dict[str, pl.DataType] = {
    "effectiveness_score": pl.Float64(), "failure_rate": pl.Float64(), "interval_low": pl.Float64(),
    "interval_high": pl.Float64(), "resolved": pl.Int64(), "decisions": pl.Int64(), "recommendation": pl.String()}


def report_row(report: Mapping[str, Any]) -> dict[str, Any]:
    """An effectiveness report as one row: score, failure rate, the success rate's 95% Wilson
    interval, resolved decisions and recommendation (all as the report states them)."""
    metrics = report["metrics"]
    low, high = metrics["success_rate_interval"] or (None, None)
    return {"effectiveness_score": report["effectiveness_score"], "failure_rate": metrics["failure_rate"],
            "interval_low": low, "interval_high": high, "resolved": metrics["resolved_decisions"],
            "decisions": report["sample"]["decisions_considered"], "recommendation": report["recommendation"]}


def monthly_effectiveness(frames: Frames, policy_id: str, *, min_sample: int = 10) -> pl.DataFrame:
    """One row per month: the effectiveness report of that month's decisions (the engine and
    parameters of `workbench.reports.timeseries.monthly`), with its interval."""
    months = frames.decisions.select("month").unique().sort("month").collect()["month"].to_list()
    params = ReportParams(limit=10_000, min_sample=min_sample)
    rows = [{"month": month, **report_row(effectiveness_report(month_frames(frames, month), policy_id, params))}
            for month in months]
    return pl.DataFrame(rows, schema={"month": pl.String, **REPORT_ROW_SCHEMA})


def version_changes(frames: Frames) -> pl.DataFrame:
    """Each policy version with its first and last decision (time and month), oldest first:
    where the plots mark a version change."""
    return (frames.decisions.group_by("policy_version")
            .agg(pl.col("created_at").min().alias("first_decision"), pl.col("created_at").max().alias("last_decision"),
                 pl.col("month").min().alias("first_month"), pl.len().alias("decisions"))
            .sort(["first_decision", "policy_version"]).collect())


def fact_points(frames: Frames, fact: str, evidence_ids: list[str]) -> pl.DataFrame:
    """Each decision's value of one fact (from its `facts_json`, as the rulebook saw it), its
    latest outcome status (`workbench.engines.common.latest_outcomes`) and that status's
    effectiveness class, and whether a finding names it as evidence; oldest first."""
    if not FACT_NAME.fullmatch(fact):
        raise ValueError("a plotted fact is named by a field path ([A-Za-z0-9_-]+)")
    latest = latest_outcomes(frames.outcomes).select("decision_id", "status")
    return (frames.decisions.join(latest, on="decision_id", how="left")
            .select("decision_id", "created_at", "policy_version",
                    pl.col("facts_json").str.json_path_match(f"$.{fact}").cast(pl.Float64, strict=False).alias("value"),
                    "status",
                    pl.col("status").replace_strict(dict(CLASSES), default=None, return_dtype=pl.String)
                    .alias("outcome_class"),
                    pl.col("decision_id").is_in(evidence_ids).alias("evidence"))
            .drop_nulls("value").sort("created_at").collect())
