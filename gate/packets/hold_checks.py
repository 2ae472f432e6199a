"""Packet verification of a held decision's hold: `hold_events`, the signed events (issue 43,
docs/verification.md §10.2), and `hold_commitment`, what commits the packet to them (issue 52).

* `hold_events`: when present, a non-empty array; every event has exactly the `hold_event_v1`
  members, its recomputed `event_hash`, a well-formed principal, and the record's `decision_id`
  and `record_hash`; the events are in chain order, each once; at most one closes the hold, the
  last, with an outcome its action allows, and an approval rests on its quorum of distinct
  approving votes, none of them the requester's under four eyes
  (`gate.holds.events.hold_events_problems` without keys).
* `hold_events_signature`: every event is signed by a trusted key that its
  `public_key_fingerprint` names (no trusted key is `false`, as for the receipt head).
* `hold_commitment`: required when the record's verdict holds the action (`review`: its decide
  opened the hold) or the packet carries hold events: its form and hash, the record's ids, and
  exactly the packet's events (`count`, `last_event_hash`): an event removed from the packet,
  or the whole `hold_events` member, is named here (`gate.holds.events.commitment_problems`).
* `hold_commitment_signature`: signed like an event, by a trusted key its fingerprint names.
* `hold_checkpoint_log`: with checkpoints (a witness's log, or the gate's own in hosted
  verify): the newest checkpoint of the scope's hold chain made no later than the commitment's
  `as_of`, verified with a trusted key, is not larger than the commitment's `chain_size`, and
  at that same size has its `chain_root` (`gate.chain.event_witness`): a hold chain cut back
  before the export (a deny deleted and the hold reopened) fails.

Each stays `null` when it does not apply (a packet of a decision that was never held).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gate.chain.event_witness import held_at, held_checkpoint_problems, hold_chain_id
from gate.holds.events import HELD_VERDICT, commitment_problems, hold_events_problems, signature_problem
from gate.packets.result import _State
from gate.strict_json import JsonValue
from gate.verify import TrustAnchors


def _signature_problems(items: Sequence[Any], label: str, anchors: TrustAnchors) -> list[str]:
    problems = []
    for index, item in enumerate(items):
        problem = signature_problem(item, anchors) if isinstance(item, Mapping) else "not an object"
        if problem is not None:
            problems.append(f"{label}[{index}]: {problem}" if label == "hold_events" else f"{label}: {problem}")
    return problems


def check_hold_events(state: _State, packet: Mapping[str, JsonValue], record: Mapping[str, JsonValue],
                      anchors: TrustAnchors) -> None:
    if "hold_events" in packet:
        events = packet["hold_events"]
        if not isinstance(events, list) or not events:
            state.fail("hold_events", "hold_events must be a non-empty array")
            events = []
        else:
            state.conclude("hold_events", hold_events_problems(record, events, None))
            state.conclude("hold_events_signature", _signature_problems(events, "hold_events", anchors))
    else:
        events = []
    held = record.get("verdict") == HELD_VERDICT or "hold_events" in packet or "hold_commitment" in packet
    if not held:
        return
    commitment = packet.get("hold_commitment")
    state.conclude("hold_commitment", commitment_problems(commitment, record, events))
    if isinstance(commitment, Mapping):
        state.conclude("hold_commitment_signature", _signature_problems([commitment], "hold_commitment", anchors))


def check_hold_checkpoint_log(state: _State, packet: Mapping[str, Any], log: Sequence[Mapping[str, Any]],
                              anchors: TrustAnchors) -> None:
    """`hold_checkpoint_log` (see the module docstring); `null` with a note when the packet has
    no hold commitment or the log holds no checkpoint of its hold chain made by then."""
    commitment = packet.get("hold_commitment")
    if not isinstance(commitment, Mapping) or not isinstance(commitment.get("scope_hash"), str):
        return
    held = held_at([dict(entry) for entry in log], hold_chain_id(commitment["scope_hash"]), commitment.get("as_of"))
    if held is None:
        state.notes.append("the checkpoint log holds no checkpoint of the hold chain made by the packet's "
                           "hold commitment: nothing to compare")
        return
    problems = held_checkpoint_problems(held, anchors)
    size, held_size = commitment.get("chain_size"), held.get("tree_size")
    state.value("hold_checkpoint_log.tree_size", held_size, size)
    if type(size) is not int or type(held_size) is not int or size < held_size:
        problems.append(f"the hold chain had {size!r} events when the packet was exported, fewer than the "
                        f"{held_size} of the checkpoint witnessed at {held.get('created_at')}: the chain was cut back")
    elif size == held_size and commitment.get("chain_root") != held.get("root_hash"):
        problems.append(f"the hold chain of {size} events has another root than the witnessed checkpoint of that "
                        "size: the chain was rewritten")
    state.conclude("hold_checkpoint_log", problems)
