"""A ledger with held decisions and their resolutions, written through the real services.

`HoldWriter` is `LedgerWriter` (signed, chained decisions and receipts at chosen instants) with the
hold service on the same clock: a held decision (`held`) opens its hold in the decide's
transaction, and `approve`, `deny` and `expire` close it as a reviewer or the clock would.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from gate.keys.config import SigningSetup
from gate.principals import Principal
from gate.services.root import hold_service
from tests.workbench.ledger_support import LedgerWriter

RESOLVE = frozenset({"resolve"})
THIN_MARGIN = 12  # the sample request's rule `review_thin_margin` holds it


class HoldWriter(LedgerWriter):
    def __init__(self, url: str, keyring_path: Path) -> None:
        super().__init__(url, keyring_path)
        self.signing = SigningSetup.load(keyring_path, None, "hmac")
        self.holds = hold_service(self.ledger, self.signing, clock=self.clock)

    def held(self, scope: str, at: datetime) -> dict[str, Any]:
        record = self.decide(scope, at, margin=THIN_MARGIN)
        assert record["verdict"] == "review"
        return record

    def vote(self, scope: str, record: dict[str, Any], at: datetime, decision: str,
             reviewer: str = "key_reviewer") -> dict[str, Any]:
        self.clock.set(at)
        return self.holds.resolve(scope, Principal.api_key(reviewer), RESOLVE, record["decision_id"],
                                  {"decision": decision, "reason_code": "CHECKED"})["hold"]

    def approve(self, scope: str, record: dict[str, Any], at: datetime, reviewer: str = "key_reviewer") -> dict[str, Any]:
        return self.vote(scope, record, at, "approve", reviewer)

    def deny(self, scope: str, record: dict[str, Any], at: datetime, reviewer: str = "key_reviewer") -> dict[str, Any]:
        return self.vote(scope, record, at, "deny", reviewer)

    def sweep(self, at: datetime) -> int:
        """The clock's pass at `at`: every open hold past its deadline expires."""
        self.clock.set(at)
        return self.holds.sweep()
