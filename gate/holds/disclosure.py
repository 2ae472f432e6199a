"""What of a hold leaves the gate for a queue's channels (issue 65 item 2, docs/holds.md "What a
queue's channels show").

A queue's `show` (gate.holds.policy, `queues.<name>.show`) names the request members
(gate.holds.request.MEMBERS and `requester`) and the facts (`facts.<name>`) its e-mail and Slack
message state; every other value is masked as `•••`, to be read in the Inbox behind sign-in and the
scope's grants. Absent: the question, the requested action, the target and the amount (with its
currency); no facts. `disclose` is the one rule the e-mail and Slack renderers
(gate.events.notices) apply; nothing here reads a clock or a database.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from gate.holds.request import MEMBERS, HoldRequest

MASK = "•••"
FACT_PREFIX = "facts."
REQUEST_NAMES: tuple[str, ...] = (*MEMBERS, "requester")  # the request members a `show` may name
DEFAULT_SHOW: tuple[str, ...] = ("question", "requested_action", "target_system", "target_object_id", "amount",
                                 "currency")


@dataclass(frozen=True, slots=True)
class Disclosure:
    """A hold as one destination may read it: `request`, each request member that has a value
    (in `REQUEST_NAMES` order) with its value or `MASK`; `facts`, each fact with its value or
    `MASK`; `masked`, how many values were masked; `signed`, whether the request was read as
    signed (an unsigned request has no member to show)."""

    request: tuple[tuple[str, Any], ...]
    facts: tuple[tuple[str, Any], ...]
    masked: int
    signed: bool


def disclose(show: Collection[str], request: HoldRequest | None, facts: Mapping[str, Any]) -> Disclosure:
    """What a destination whose rule is `show` may read of a hold's `request` and `facts`."""
    named = frozenset(show)
    members: list[tuple[str, Any]] = []
    if request is not None and request["signed"]:
        for name in REQUEST_NAMES:
            value = request.get(name)
            if value is not None:
                members.append((name, value if name in named else MASK))
    shown = [(name, value if FACT_PREFIX + str(name) in named else MASK)
             for name, value in sorted(facts.items(), key=lambda item: str(item[0]))]
    masked = sum(1 for _, value in (*members, *shown) if value is MASK)
    return Disclosure(tuple(members), tuple(shown), masked, bool(request is not None and request["signed"]))
