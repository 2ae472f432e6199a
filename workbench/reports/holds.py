"""The hold report (`hold_report_v1`) as every shell serves it, and its words.

`hold_body` binds the engine (`workbench.engines.holds`) to the gate's meaning of outcome statuses
and to the report's parameters; the registry (`gate.reports.registry`, kind `holds`) names it and the engines' shell
(`workbench.reports.policy`) seals it.
The frames come from `workbench.dataset.load.holds_from_dataset` or `holds_from_ledger`, so the
API, `gate report holds`, the workbench's Overview and the dry-run read the same numbers.
Its words (the CLI's text, the pages' lines) are `workbench.reports.holdtext`, which loads no Polars.
"""

from __future__ import annotations

from typing import NotRequired

from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from gate.reports.params import ParamValue, ReportParams
from gate.reports.registry import Cohort
from workbench.dataset.load import Frames
from workbench.dataset.trust import DatasetTrust
from workbench.engines.holds import HoldBody, hold_report

# ---------------------------------------------------------------- the report, as served


class HoldReport(HoldBody):
    hold_report_version: str
    policy_id: str
    policy_version: str | None
    parameters: dict[str, ParamValue]
    source: NotRequired[DatasetTrust]  # a report read from a dataset names it
    holds_hash: str


def hold_body(frames: Frames, params: ReportParams, cohort: Cohort | None = None) -> HoldBody:
    """The hold report's body over `frames` (their `holds`, the outcomes of the held decisions,
    `as_of`); a body engine's call shape (`workbench.reports.policy.BodyEngine`: no cohort read). ValueError when the frames were loaded without their holds (a decisions loader)."""
    if frames.holds is None or frames.as_of is None:
        raise ValueError("the hold report reads holds: load its frames with holds_from_dataset or holds_from_ledger")
    return hold_report(frames.holds, frames.outcomes, OUTCOME_EFFECTIVENESS_CLASS, as_of=frames.as_of,
                       limit=params.limit, outcome_window_days=params.outcome_window_days)
