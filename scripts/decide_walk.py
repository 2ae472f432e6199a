#!/usr/bin/env python3
"""The decide's walk through the code: which modules a decide enters, in order (issue 46's figure).

`scripts/decide_walk.py [--trace]` stores the sample request (`gate/data/requests/pricing-exception.json`)
twice through `DecisionService.decide` on a fresh SQLite ledger with an HMAC signer (once to warm
the caches a first decide fills, then the decide measured, with a scope that has one outcome, so
the record carries a confidence block; group commit off, so the seal runs in the same thread),
traces every call into a product module (`gate.*`) with
`sys.setprofile`, and prints:

* stops: the modules entered, in call order, consecutive calls inside one module counted once
  (special methods, such as reading a member of the record value, are not stops);
* returns: the stops at a module the walk had already left once;
* the same at the level of rooms (the sub-packages of `gate`), with the rooms' walk itself;
* visits per module (the most visited first).

`--trace` also prints the walk itself. The figures are a property of the code, not of the machine:
the same code gives the same walk.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _walk(service: Any, caller: Any, body: dict[str, Any]) -> list[str]:
    modules: list[str] = []

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call":
            return
        name = frame.f_globals.get("__name__", "")
        if frame.f_code.co_name.startswith("__"):  # reading a value (`record["verdict"]`) is no stop
            return
        if name.startswith("gate.") and (not modules or modules[-1] != name):
            modules.append(name)

    sys.setprofile(profile)
    try:
        service.decide(caller, body, idempotency_key="walk-measured")
    finally:
        sys.setprofile(None)
    return modules


def _returns(walk: list[str]) -> int:
    """The stops at a place the walk had already left once."""
    seen: set[str] = set()
    returns = 0
    for place in walk:
        returns += place in seen
        seen.add(place)
    return returns


def main(argv: list[str]) -> int:
    from gate.keys.config import SigningSetup
    from gate.keys.signing import HmacKey
    from gate.ledger import Ledger
    from gate.services.decide import DecisionService
    from gate.clock import SystemClock
    from gate.services.lifecycle import KINDS, LifecycleService
    from gate.services.pipeline import Caller

    body = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())
    with tempfile.TemporaryDirectory() as home:
        ledger = Ledger(f"sqlite:///{home}/walk.db", group_commit=False)  # one thread: the whole walk
        ledger.upgrade()
        signing = SigningSetup(keyring=None, hmac_key=HmacKey("walk", b"the decide walk's signing secret"),
                               required=True)
        service = DecisionService(ledger, signing)
        caller = Caller("key_walk", "walk", "starter", 1_000_000, 1_000_000_000)
        first = service.decide(caller, body, idempotency_key="walk-warm").record
        LifecycleService(ledger, SystemClock(), signing).record(
            KINDS["outcome"], scope="walk", decision_id=first["decision_id"], record=dict(first),
            body={"outcome_status": "succeeded", "action_executed": True,
                  "decision_record_hash": first["record_hash"]}, idempotency_key=None)
        walk = _walk(service, caller, body)
        ledger.dispose()
    rooms = [module.split(".")[1] for module in walk]
    by_room = [room for index, room in enumerate(rooms) if not index or rooms[index - 1] != room]
    if "--trace" in argv:
        print("\n".join(walk))
    print(f"modules: stops {len(walk)}  returns {_returns(walk)}")
    print(f"rooms:   stops {len(by_room)}  returns {_returns(by_room)}  ({len(set(rooms))} rooms: "
          + " ".join(by_room) + ")")
    for module, count in Counter(walk).most_common():
        print(f"  {count:3d}  {module}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
