"""The typed ledger rows (issue 54) name exactly their table's columns.

A row read from a table is handed out as its TypedDict (`gate.ledger.holds._hold_row`,
`gate.ledger.releases._event_row`, ...): that cast is checked here, so a column added to a table
without its member in the row's type (or a member without its column) fails, and a written row
(a hold opened with its decision, a release decision, a governed event-settings change) carries
every column its insert names. `HoldMove` and `QueueColumns` are column groups of the hold row.
"""

from __future__ import annotations

import pytest

from gate.events.cloudevent import OutboxRow
from gate.ledger.chains import ChainLinkRow
from gate.ledger.event_settings import AnomalyAlertRow, EventSettingsRow
from gate.ledger.holds import HoldMove, HoldRow, QueueColumns
from gate.ledger.lifecycle import ReceiptRow
from gate.ledger.operations import PilotRow
from gate.ledger.outbox import AttemptRow
from gate.ledger.outbox_retention import RetentionRow
from gate.ledger.releases import EventRow, ReleaseDecisionRow, ShadowColumns
from gate.ledger.removals import RemovalRow
from gate.ledger.tables import (
    anomaly_alerts,
    chain_links,
    decision_removals,
    event_outbox,
    event_retention,
    event_settings,
    holds,
    lifecycle_receipts,
    pilot_intakes,
    release_decisions,
    release_events,
    webhook_attempts,
    workflow_runs,
)
from gate.ledger.workflows import WorkflowRunRow


def _members(typed: type) -> set[str]:
    return set(typed.__required_keys__) | set(typed.__optional_keys__)


def _spelled(typed: type, name: str) -> str:
    """A member's type as its module spells it (the modules postpone their annotations)."""
    hint = typed.__annotations__[name]
    return str(getattr(hint, "__forward_arg__", hint))


@pytest.mark.parametrize(("typed", "table"), [
    (HoldRow, holds), (EventRow, release_events), (ReleaseDecisionRow, release_decisions),
    (EventSettingsRow, event_settings), (OutboxRow, event_outbox), (AttemptRow, webhook_attempts),
    (RetentionRow, event_retention), (ReceiptRow, lifecycle_receipts), (PilotRow, pilot_intakes),
    (RemovalRow, decision_removals), (WorkflowRunRow, workflow_runs), (AnomalyAlertRow, anomaly_alerts),
    (ChainLinkRow, chain_links)])
def test_a_typed_row_names_exactly_its_tables_columns(typed: type, table) -> None:
    assert _members(typed) == {column.name for column in table.columns}
    assert not typed.__optional_keys__  # every column is read, null or not


@pytest.mark.parametrize(("group", "row"), [(HoldMove, HoldRow), (QueueColumns, HoldRow),
                                            (ShadowColumns, ReleaseDecisionRow)])
def test_a_column_group_is_columns_of_its_row_with_their_types(group: type, row: type) -> None:
    """Each member's type is the column's, or (a value a move sets) the column's less its null."""
    assert _members(group) <= _members(row)
    for name in _members(group):
        stated, column = _spelled(group, name), _spelled(row, name)
        assert column in (stated, f"{stated} | None"), name
