"""The hold report (`hold_report_v1`) as every shell serves it, and its words.

`hold_body` binds the engine (`workbench.engines.holds`) to the gate's meaning of outcome statuses
and to the report's parameters; the registry (`workbench.reports.registry`, kind `holds`) seals it.
The frames come from `workbench.dataset.load.holds_from_dataset` or `holds_from_ledger`, so the
API, `gate report holds`, the workbench's Overview and the dry-run read the same numbers.
Its words (the CLI's text, the pages' lines) are `workbench.reports.holdtext`, which loads no Polars.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict, cast

from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from workbench.dataset.load import Frames
from workbench.engines.holds import hold_report
from workbench.reports.params import ReportParams
from workbench.reports.sample import Sample

# ---------------------------------------------------------------- the report, as served


class Backlog(TypedDict):
    open: int
    oldest_age_seconds: float | None
    age_p50_seconds: float | None
    oldest_opened_at: str | None


class Waits(TypedDict):
    n: int
    p50_seconds: float | None
    p90_seconds: float | None


class ApprovalRate(TypedDict):
    approved: int
    denied: int
    n: int
    rate: float | None
    interval_95: list[float] | None


class ExpiryRate(TypedDict):
    expired: int
    n: int
    rate: float | None
    interval_95: list[float] | None


class LaterFailed(TypedDict):
    failed: int
    succeeded: int
    n: int
    rate: float | None
    interval_95: list[float] | None
    too_young: int
    no_terminal_outcome: int


class HoldFigures(TypedDict):
    """The figures of the policy's holds, or of one queue's."""

    backlog: Backlog
    time_to_resolution: Waits
    approval_rate: ApprovalRate
    expiry_rate: ExpiryRate
    later_failed: LaterFailed


class QueueFigures(HoldFigures):
    queue: str


class ReviewerFigures(TypedDict):
    reviewer: str
    resolved: int
    time_to_resolution: Waits
    approval_rate: ApprovalRate
    later_failed: LaterFailed


class HoldWindow(TypedDict):
    as_of: str
    limit: int | None
    open_holds: int
    closed_holds: int
    closed_from: str | None
    closed_to: str | None
    outcome_window_days: int
    judged_before: str
    text: str


class HoldBody(TypedDict):
    window: HoldWindow
    holds: HoldFigures
    queues: list[QueueFigures]
    reviewers: list[ReviewerFigures]
    sample: Sample  # the held decisions considered: the open holds and the closed ones of the window


class HoldReport(HoldBody):
    hold_report_version: str
    policy_id: str
    policy_version: str | None
    parameters: dict[str, Any]
    source: NotRequired[dict[str, Any]]
    holds_hash: str


def hold_body(frames: Frames, params: ReportParams) -> HoldBody:
    """The hold report's body over `frames` (their `holds`, the outcomes of the held decisions,
    `as_of`). ValueError when the frames were loaded without their holds (a decisions loader)."""
    if frames.holds is None or frames.as_of is None:
        raise ValueError("the hold report reads holds: load its frames with holds_from_dataset or holds_from_ledger")
    body = hold_report(frames.holds, frames.outcomes, OUTCOME_EFFECTIVENESS_CLASS, as_of=frames.as_of,
                       limit=params.limit, outcome_window_days=params.outcome_window_days)
    return cast(HoldBody, body)
