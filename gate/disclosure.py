"""What of a hold leaves the gate for a destination (issue 65 item 2, docs/holds.md "What a
queue's channels show").

A queue's `show` (gate.holds.policy, `queues.<name>.show`) names the request members (those of
gate.holds.request.HoldRequest but `signed`) and the facts (`facts.<name>`) its e-mail and Slack
message state; every other value is masked as `•••`, to be read in the Inbox behind sign-in and the
scope's grants. Absent: the question, the requested action, the target and the amount (with its
currency); no facts. `disclose` is the one rule the e-mail and Slack renderers
(gate.events.notices) apply. Pure and below every package that shows a hold (it imports nothing
of the gate), so any destination may call it; nothing here reads a clock or a database.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

MASK = "•••"
FACT_PREFIX = "facts."
SIGNED = "signed"  # the request's member saying it was read from the stored request bound to the record
DEFAULT_SHOW: tuple[str, ...] = ("question", "requested_action", "target_system", "target_object_id", "amount",
                                 "currency")


@dataclass(frozen=True, slots=True)
class Disclosure:
    """A hold as one destination may read it: `request`, each request member that has a value
    (in the request's order) with its value or `MASK`; `facts`, each fact with its value or
    `MASK`; `masked`, how many values were masked; `signed`, whether the request was read as
    signed (an unsigned request has no member to show)."""

    request: tuple[tuple[str, Any], ...]
    facts: tuple[tuple[str, Any], ...]
    masked: int
    signed: bool


def disclose(show: Collection[str], request: Mapping[str, Any] | None, facts: Mapping[str, Any]) -> Disclosure:
    """What a destination whose rule is `show` may read of a hold's `request` (a HoldRequest:
    its members, and `signed`; None or unsigned: no member is read) and `facts`."""
    named = frozenset(show)
    signed = request is not None and request.get(SIGNED) is True
    members: list[tuple[str, Any]] = []
    if request is not None and signed:
        for name, value in request.items():
            if name != SIGNED and value is not None:
                members.append((name, value if name in named else MASK))
    shown = [(name, value if FACT_PREFIX + str(name) in named else MASK)
             for name, value in sorted(facts.items(), key=lambda item: str(item[0]))]
    masked = sum(1 for _, value in (*members, *shown) if value is MASK)
    return Disclosure(tuple(members), tuple(shown), masked, signed)
