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
from typing import Any, Protocol

MASK = "•••"
FACT_PREFIX = "facts."
SIGNED = "signed"  # the request's member saying it was read from the stored request bound to the record
DEFAULT_SHOW: tuple[str, ...] = ("question", "requested_action", "target_system", "target_object_id", "amount",
                                 "currency")
_NOT_CONTEXT = frozenset({"question", "requester"})  # request members not read from the request's `context`


class LetOut(Protocol):
    """A destination's data-map rule for one hold's request (gate.privacy.masking.Masker): whether
    the value at a request path may leave, and what leaves (the value, or its keyed token)."""

    def let_out(self, path: str | None, value: Any) -> tuple[bool, Any]: ...


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


def _let_out(value: Any, path: str | None, privacy: LetOut | None) -> Any:
    """A value `show` names, as the scope's data map lets it out (issue 67): a personal or
    sensitive member is masked unless the governed `notices` rule keeps it (its keyed token when
    the rule hashes it)."""
    if privacy is None:
        return value
    allowed, out = privacy.let_out(path, value)
    return out if allowed else MASK


def _request_path(name: str) -> str | None:
    """The request path of a request member a hold shows (the data map names members by it)."""
    return None if name in _NOT_CONTEXT else "context." + name


def disclose(show: Collection[str], request: Mapping[str, Any] | None, facts: Mapping[str, Any],
             privacy: LetOut | None = None) -> Disclosure:
    """What a destination whose rule is `show` may read of a hold's `request` (a HoldRequest:
    its members, and `signed`; None or unsigned: no member is read) and `facts`; with `privacy`
    (the scope's `notices` rule for this hold's request, gate.privacy.masking), a value `show`
    names still leaves only as the data map's rule lets it out: the queue's `show` is one
    destination of that rule, not a second home (issue 67)."""
    named = frozenset(show)
    signed = request is not None and request.get(SIGNED) is True
    members: list[tuple[str, Any]] = []
    if request is not None and signed:
        for name, value in request.items():
            if name != SIGNED and value is not None:
                members.append((name, _let_out(value, _request_path(name), privacy) if name in named else MASK))
    shown = [(name, _let_out(value, "context.inputs." + str(name), privacy) if FACT_PREFIX + str(name) in named
              else MASK) for name, value in sorted(facts.items(), key=lambda item: str(item[0]))]
    masked = sum(1 for _, value in (*members, *shown) if value is MASK)
    return Disclosure(tuple(members), tuple(shown), masked, signed)
