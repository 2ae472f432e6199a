"""The notebooks' paths and plots (issue 22, item 3).

Paths: the dataset, GATE_HOME and rulebook paths come from the environment or the project
root, never from the working folder a kernel starts in; a missing dataset is refused with the
commands that make one. Plots: caller text in a label is drawn as its literal characters
(matplotlib would read `$…$` as mathtext: a rulebook version `v$\\x$` stopped the figure).
"""

from __future__ import annotations

import io
from pathlib import Path

import polars as pl
import pytest

from workbench.dataset.load import Frames
from workbench.notebooks.support import (
    NotebookSetupError,
    fact_points,
    notebook_paths,
    project_root,
    require_dataset,
)

ROOT = Path(__file__).resolve().parents[2]
MATH_VERSION = "v2$\\notacommand{x}$<img src=x onerror=alert(1)>"


def test_the_project_root_is_found_from_the_module_not_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert project_root() == ROOT
    assert project_root(ROOT / "workbench" / "engines" / "anomalies.py") == ROOT


def test_a_folder_without_this_projects_pyproject_is_no_root(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "someone-else"\n')
    (tmp_path / "inner").mkdir()
    with pytest.raises(NotebookSetupError, match=r"no decision-gate pyproject\.toml"):
        project_root(tmp_path / "inner")


def test_relative_paths_are_taken_from_the_project_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as a kernel started in some other folder
    default = notebook_paths({})
    assert (default.dataset, default.home, default.output) == (
        str(ROOT / "var" / "dataset"), ROOT / "var", ROOT / "var" / "notebooks")
    assert default.rulebooks == ROOT / "gate" / "data" / "rulebooks"
    home = notebook_paths({"GATE_HOME": "elsewhere"})
    assert home.dataset == str(ROOT / "elsewhere" / "dataset") and home.dataset_origin == "$GATE_HOME/dataset"
    chosen = notebook_paths({"GATE_HOME": "elsewhere", "GATE_DATASET": "exports/ds", "GATE_RULEBOOKS": "rb"})
    assert (chosen.dataset, chosen.rulebooks, chosen.dataset_origin) == (
        str(ROOT / "exports" / "ds"), ROOT / "rb", "GATE_DATASET")
    absolute = notebook_paths({"GATE_DATASET": str(tmp_path / "ds")})
    assert absolute.dataset == str(tmp_path / "ds")
    assert notebook_paths({"GATE_DATASET": "s3://bucket/ds"}).dataset == "s3://bucket/ds"


def test_without_a_checkout_the_root_is_the_working_folder_and_the_rulebooks_the_packages(tmp_path, monkeypatch):
    # As installed from the wheel (tests/test_wheel.py runs it there): no pyproject.toml above.
    import workbench.notebooks.support as support
    from gate.resources import data_path

    def no_checkout(start=None):
        raise NotebookSetupError("no decision-gate pyproject.toml")

    monkeypatch.setattr(support, "project_root", no_checkout)
    monkeypatch.chdir(tmp_path)
    paths = notebook_paths({})
    assert (paths.root, paths.home, paths.rulebooks) == (tmp_path, tmp_path / "var", data_path("rulebooks"))
    assert notebook_paths({"GATE_RULEBOOKS": "mine"}).rulebooks == tmp_path / "mine"


def test_a_missing_dataset_is_refused_with_how_to_make_one(tmp_path, demo_dataset):
    missing = notebook_paths({"GATE_DATASET": str(tmp_path / "none")})
    with pytest.raises(NotebookSetupError) as refused:
        require_dataset(missing)
    message = str(refused.value)
    assert f"no dataset at {tmp_path / 'none'} (GATE_DATASET; no manifest.json there)" in message
    assert "scripts/demo" in message and f"gate export --out {tmp_path / 'none'}" in message
    (tmp_path / "empty").mkdir()  # a folder that is not an export is refused too
    with pytest.raises(NotebookSetupError):
        require_dataset(notebook_paths({"GATE_DATASET": str(tmp_path / "empty")}))
    found = notebook_paths({"GATE_DATASET": str(demo_dataset["dataset"])})
    assert require_dataset(found) is found


def _frames() -> Frames:
    decisions = pl.LazyFrame({
        "decision_id": ["d1", "d2", "d3"], "policy_version": ["v1", MATH_VERSION, MATH_VERSION],
        "created_at": pl.Series([1, 2, 3]).cast(pl.Datetime("ms", "UTC")), "month": ["2026-01", "2026-02", "2026-02"],
        "facts_json": ['{"amount": 10}', '{"amount": 250.5}', '{"other": 1}']})
    outcomes = pl.LazyFrame({"decision_id": ["d2", "d2"], "receipt_id": ["r1", "r2"], "status": ["succeeded", "failed"],
                             "reported_at": pl.Series([5, 6]).cast(pl.Datetime("ms", "UTC"))})
    return Frames(decisions, outcomes)


def test_fact_points_read_the_fact_and_the_latest_outcome():
    points = fact_points(_frames(), "amount", ["d2"])
    assert points.select("decision_id", "value", "status", "outcome_class", "evidence").rows() == [
        ("d1", 10.0, None, None, False), ("d2", 250.5, "failed", "failure", True)]


@pytest.mark.parametrize("fact", ["amount') or 1", "$.a", "<img src=x>", "", "a" * 129])
def test_fact_points_refuse_a_fact_name_that_is_no_field_path(fact):
    with pytest.raises(ValueError, match="field path"):
        fact_points(_frames(), fact, [])


def _drawn_texts(figure) -> list[str]:
    from matplotlib.text import Text

    figure.savefig(io.BytesIO(), format="png")  # draws every label (mathtext would raise here)
    return [t.get_text() for t in figure.findobj(Text)]


def test_caller_text_in_plot_labels_is_drawn_as_text():
    from workbench.notebooks import plots
    from workbench.notebooks.support import version_changes

    frames = _frames()
    versions = version_changes(frames)
    monthly = pl.DataFrame({"month": ["2026-01", "2026-02"], "effectiveness_score": [0.9, None],
                            "failure_rate": [0.1, None], "interval_low": [0.6, None], "interval_high": [0.98, None]})
    by_version = pl.DataFrame({"policy_version": ["v1", MATH_VERSION], "effectiveness_score": [0.9, 0.5],
                               "failure_rate": [0.1, 0.5], "interval_low": [0.7, None], "interval_high": [0.95, None]})
    figures = [
        plots.course(monthly, versions, f"{MATH_VERSION} per month"),
        plots.by_version(by_version, "per version"),
        plots.bars([MATH_VERSION, "p"], [0.5, None], "scores", "$score$"),
        plots.fact_over_time(fact_points(frames, "amount", ["d2"]), "amount", versions, MATH_VERSION),
        plots.transitions([{"from": "yes", "to": MATH_VERSION, "count": 3}], "transitions"),
    ]
    texts = [text for figure in figures for text in _drawn_texts(figure)]
    assert sum(MATH_VERSION in text for text in texts) >= 5  # title, marker, ticks: the literal characters
    assert "$score$" in texts


def test_the_notebooks_figures_are_the_engines(demo_dataset):
    """One meaning per number: the monthly course is `workbench.reports.timeseries.monthly`'s, and the
    per-version failure rates the conclusion quotes are the anomaly finding's."""
    from workbench.dataset.load import from_dataset
    from workbench.notebooks.support import monthly_effectiveness, report_row
    from workbench.reports.policy import (
        ReportParams,
        anomaly_report,
        effectiveness_report,
    )
    from workbench.reports.timeseries import monthly

    dataset, policy = str(demo_dataset["dataset"]), "refund_approval"
    frames = from_dataset(dataset, scopes=["demo"], policy_id=policy)
    ours = monthly_effectiveness(frames, policy)
    assert ours.select("month", "effectiveness_score", "recommendation", "resolved").rows() == \
        monthly(frames, policy).select("month", "effectiveness_score", "recommendation", "resolved").rows()
    finding = next(a for a in anomaly_report(frames, policy, ReportParams())["anomalies"]
                   if a["anomaly_id"] == "failure_rate_shift:policy_version:2026-08-01")
    rates = {v: report_row(effectiveness_report(
        from_dataset(dataset, scopes=["demo"], policy_id=policy, policy_version=v), policy,
        ReportParams(policy_version=v)))["failure_rate"] for v in ("2026-05-01", "2026-08-01")}
    assert rates == {"2026-05-01": finding["baseline"]["failure_rate"],
                     "2026-08-01": finding["observed"]["failure_rate"]}
