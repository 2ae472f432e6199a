"""The past holds most like an open one (the inbox's "decisions like this one"), pure.

A reviewer deciding a held action asks how the same rule's earlier holds went. The candidates are
closed holds of the same scope, policy and rule (the ledger reads the newest `WINDOW` of them,
newest first: `HoldLedger.closed_like`); they are ranked here by how far their numeric facts lie
from the open hold's, and the nearest `NEAREST` are kept. Bounded on purpose: one indexed read
of at most `WINDOW` rows and one pass over them, whatever the history's size.

The distance is the mean, over the open hold's numeric facts (top-level numbers; booleans are
not numbers here), of |a − b| divided by that fact's spread (max − min over the open hold and
the candidates), capped at 1; a fact the candidate lacks, or holds as a non-number, counts 1.
So 0 is "the same numbers", 1 "as far apart as anything seen, or not comparable". With no numeric
fact every candidate is at 0 and the newest come first. Ties go to the newer candidate. Nothing
here reads a clock or a database.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

WINDOW = 2000  # closed holds of the same policy and rule read, newest first
NEAREST = 5  # of those, how many the inbox shows


def numeric_facts(facts: Any) -> dict[str, float]:
    """The facts that are finite numbers, by name (nested values and booleans are left out)."""
    if not isinstance(facts, Mapping):
        return {}
    found: dict[str, float] = {}
    for name, value in facts.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            found[str(name)] = float(value)
    return found


def spreads(target: Mapping[str, float], others: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Each of the target's facts' spread (max − min) over the target and the others."""
    spread: dict[str, float] = {}
    for name, value in target.items():
        values = [value, *(other[name] for other in others if name in other)]
        spread[name] = max(values) - min(values)
    return spread


def distance(target: Mapping[str, float], other: Mapping[str, float], spread: Mapping[str, float]) -> float:
    """How far `other`'s numbers lie from `target`'s, in [0, 1] (module docstring)."""
    if not target:
        return 0.0
    total = 0.0
    for name, value in target.items():
        if name not in other:
            total += 1.0
            continue
        width = spread.get(name, 0.0)
        gap = abs(value - other[name])
        total += min(1.0, gap / width) if width > 0 else (0.0 if gap == 0 else 1.0)
    return total / len(target)


def nearest(target_facts: Any, candidate_facts: Sequence[Any], limit: int = NEAREST) -> list[tuple[int, float]]:
    """(index into `candidate_facts`, distance) of the `limit` candidates nearest the target,
    nearest first; `candidate_facts` are newest first, so of equal distances the newer wins."""
    target = numeric_facts(target_facts)
    others = [numeric_facts(facts) for facts in candidate_facts]
    spread = spreads(target, others)
    scored = sorted((distance(target, other, spread), index) for index, other in enumerate(others))
    return [(index, score) for score, index in scored[:max(0, limit)]]


__all__ = ["NEAREST", "WINDOW", "distance", "nearest", "numeric_facts", "spreads"]
