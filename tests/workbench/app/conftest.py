"""A small real ledger (signed, chained decisions with outcomes, two scopes) exported to a
dataset, and the workbench store over both."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from tests.workbench.ledger_support import LedgerWriter, at


def build_small_ledger(home: Path) -> dict[str, list[str]]:
    """48 pricing-exception decisions in scopes acme and globex over four months, executions and
    outcomes for the approvals; the ledger at home/gate.db, the keyring beside it."""
    writer = LedgerWriter(f"sqlite:///{home / 'gate.db'}", home / "signing-keys.json")
    ids: dict[str, list[str]] = {"acme": [], "globex": []}
    for index in range(48):
        scope = "acme" if index % 3 else "globex"
        moment = at(1 + index % 4, 1 + index % 27, 9 + index % 8)
        record = writer.decide(scope, moment, discount=10 + (index % 5) * 5, margin=15 + (index % 4) * 8)
        ids[scope].append(record["decision_id"])
        if record["verdict"] == "yes":
            writer.receipt("execution", scope, record, moment + timedelta(minutes=5), "executed")
            writer.receipt("outcome", scope, record, moment + timedelta(days=2),
                           "failed" if index % 4 == 0 else "succeeded")
    writer.close()
    return ids


@pytest.fixture(scope="module")
def workbench_home(tmp_path_factory):
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from workbench.app.store import WorkbenchStore

    home = tmp_path_factory.mktemp("workbench")
    ids = build_small_ledger(home)
    store = WorkbenchStore(Ledger(f"sqlite:///{home / 'gate.db'}"),
                           SigningSetup.load(home / "signing-keys.json", None, "hmac"), home / "dataset")
    store.refresh_dataset()
    yield store, ids, home
    store.ledger.dispose()
