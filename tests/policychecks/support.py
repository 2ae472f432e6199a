"""Helpers shared by the policy-check tests and tests/test_error_bodies.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from gate.policychecks.tables import TABLES_DIR
from gate.services.policychecks import PolicyCheckService

WORKFLOW_BODY = {"vendor": "Adobe", "region": "US", "plan": "annual", "days_since_purchase": 5, "ticket_id": "T-1"}


def undecided_service(directory: Path) -> PolicyCheckService:
    """A service whose refund rulebook needs a fact the lookup never supplies: every refund check
    ends `needs_input`, which the service must refuse (CheckFailed) rather than answer."""
    target = directory / "policychecks-undecided"
    shutil.copytree(TABLES_DIR, target)
    path = target / "refund.rulebook.json"
    rulebook = json.loads(path.read_text())
    rulebook["version"] = "undecided-test"
    rulebook["input_schema"]["required"].append("never_supplied")
    path.write_text(json.dumps(rulebook))
    return PolicyCheckService(target)
