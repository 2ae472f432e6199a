"""Packet verification of `hold_events`: the held decision's signed hold events (issue 43,
docs/verification.md §10.2), present only in a packet of a decision whose hold has at least one.

* `hold_events`: a non-empty array; every event has exactly the `hold_event_v1` members, its
  recomputed `event_hash`, a well-formed principal, and the record's `decision_id` and
  `record_hash`; the events are in chain order, each once; at most one closes the hold, the
  last, with an outcome its action allows, and an approval rests on its quorum of distinct
  approving votes, none of them the requester's under four eyes
  (`gate.holds.events.hold_events_problems` without keys).
* `hold_events_signature`: every event is signed by a trusted key that its
  `public_key_fingerprint` names (no trusted key is `false`, as for the receipt head).

Both stay `null` in a packet without the member.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.holds.events import hold_events_problems, signature_problem
from gate.packets.result import _State
from gate.verify import TrustAnchors


def check_hold_events(state: _State, packet: Mapping[str, Any], record: Mapping[str, Any],
                      anchors: TrustAnchors) -> None:
    if "hold_events" not in packet:
        return
    events = packet["hold_events"]
    if not isinstance(events, list) or not events:
        state.fail("hold_events", "hold_events must be a non-empty array")
        return
    state.conclude("hold_events", hold_events_problems(record, events, None))
    problems = []
    for index, event in enumerate(events):
        problem = signature_problem(event, anchors) if isinstance(event, Mapping) else "not an object"
        if problem is not None:
            problems.append(f"hold_events[{index}]: {problem}")
    state.conclude("hold_events_signature", problems)
