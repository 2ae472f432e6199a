"""Minimal flips: for one decision, the smallest change of a single fact that changes its result.

For every field the rulebook reads (conditions and `input_schema`), the other facts stay as
they are and the field is moved into each of its other atoms (see `space`). Within an atom
every leaf has the same truth value, so one member per atom decides the result for the whole
atom, and the member nearest to the current value is the smallest change into it. Each
candidate is run through the scalar evaluator, so every flip reported is real.

"Smallest": for a number moving to another number, the distance; a flip at an open threshold
(`gt 25` from 20) reports the threshold (`{"value": 25, "inclusive": false}`) and, as the new
value, the nearest representable number past it (the next integer when the field is declared
`integer`, else the next float). Numbers get up to two flips (one increasing, one decreasing).
Other changes (a type change, a different string, removing or adding the fact) have no
distance; one is reported per field, preferring a value of the same kind, then any present
value, then removing the fact. A flip that keeps the input valid (status ok) is always
preferred to one that only makes the input fail `input_schema` (needs_input).

Exact (`exact: true`) when the space is exact and no read field nests inside another; with
many `contains` values on a field the candidates for that field come from samples too.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, TypedDict

from gate.protocol.evaluation import STATUS_OK
from gate.rulebook.analysis.common import CompareKey, compare_key, evaluator, label_of
from gate.rulebook.analysis.model import Label
from gate.rulebook.analysis.sampling import samples
from gate.rulebook.analysis.shapes import LabelJSON
from gate.rulebook.analysis.space import Atom, Space, resolve
from gate.rulebook.operators import is_number
from gate.rulebook.semantics import MISSING
from gate.rulebook.shapes import Evaluator, RulebookDocument
from gate.strict_json import JsonValue


class Threshold(TypedDict):
    """The threshold a number flip crosses: its value, and whether the value itself is on the
    far side (`inclusive`: a point) or the flip goes just past it."""

    value: float
    inclusive: bool


FlipJSON = TypedDict("FlipJSON", {
    "field": str,
    "change": str,
    "from_missing": bool,
    "to_missing": bool,
    "from": object,
    "to": object,
    "distance": float | None,
    "threshold": Threshold | None,
    "old": LabelJSON,
    "new": LabelJSON,
    "facts": dict[str, JsonValue],
    "exact": bool,
})
"""`Flip.to_json()` (docs/rulebook-analysis.md, "Minimal flips JSON"); `from` and `to` are the
fact's values (null when missing: see `from_missing`, `to_missing`)."""


@dataclass
class Flip:
    field: str
    old_value: Any  # MISSING when the fact was absent
    new_value: Any  # MISSING when the flip removes the fact
    change: str  # increase | decrease | set | remove
    distance: float | int | None
    threshold: Threshold | None
    old: Label
    new: Label
    facts: dict[str, JsonValue]
    exact: bool

    def to_json(self) -> FlipJSON:
        out: FlipJSON = {"field": self.field, "change": self.change,
               "from_missing": self.old_value is MISSING, "to_missing": self.new_value is MISSING,
               "from": None if self.old_value is MISSING else self.old_value,
               "to": None if self.new_value is MISSING else self.new_value,
               "distance": self.distance, "threshold": self.threshold,
               "old": self.old.to_json(), "new": self.new.to_json(), "facts": self.facts, "exact": self.exact}
        return out


def _nearest(atom: Atom, x: Any) -> tuple[Any, Threshold | None]:
    """The member of a number atom nearest to the number x, and the threshold crossed."""
    lo, _lo_closed, hi, _hi_closed = atom.bounds()
    if atom.point:
        return atom.rep, {"value": atom.rep, "inclusive": True}
    want = atom.integral
    if lo is not None and x <= lo:
        value = math.floor(lo) + 1 if want else math.nextafter(lo, math.inf)
        bound: Threshold | None = {"value": lo, "inclusive": False}
    elif hi is not None and x >= hi:
        value = math.ceil(hi) - 1 if want else math.nextafter(hi, -math.inf)
        bound = {"value": hi, "inclusive": False}
    else:  # same gap, other integrality: the nearest integer / non-integer to x
        value = (math.floor(x) if x - math.floor(x) <= math.ceil(x) - x else math.ceil(x)) if want \
            else math.nextafter(x, math.inf)
        bound = None
    inside = (lo is None or value > lo) and (hi is None or value < hi)
    if not inside or (want is not None and float(value).is_integer() != want):
        return atom.rep, None
    if isinstance(value, float) and value.is_integer() and isinstance(x, int) and abs(value) < 2**53:
        value = int(value)
    return value, bound


def _with(facts: dict[str, JsonValue], path: str, value: Any) -> dict[str, JsonValue]:
    out = copy.deepcopy(facts)
    parts = path.split(".")
    target = out
    for part in parts[:-1]:
        child = target.get(part)
        if not isinstance(child, dict):
            if value is MISSING:
                return out
            child = target[part] = {}
        target = child
    if value is MISSING:
        target.pop(parts[-1], None)
    else:
        target[parts[-1]] = copy.deepcopy(value)
    return out


def _rank(flip: Flip, size: Any) -> tuple[bool, Any]:
    """Prefer flips to a valid input (status ok) over flips into needs_input, then by size."""
    return (flip.new.status != STATUS_OK, size)


_JSON_KINDS: dict[type, str] = {str: "string", list: "array", dict: "object"}


def _kind(x: Any) -> str:
    if x is MISSING:
        return "missing"
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "boolean"
    if is_number(x):
        return "number"
    return _JSON_KINDS.get(type(x), "other")


@dataclass(frozen=True)
class _Decision:
    """The decision whose flips are sought: its facts, its result, and how results compare."""

    run: Evaluator
    key: CompareKey
    facts: dict[str, JsonValue]
    current: Label


def _sampled_values(space: Space) -> dict[int, list[Any]]:
    """Per field whose atoms are not exact (too many contains values), the values samples give it."""
    extra: dict[int, list[Any]] = {}
    inexact = {item["field"] for item in space.inexact}
    for sample in samples(space, 500):
        for i, f in enumerate(space.fields):
            if f.path in inexact:
                value = resolve(sample, f.path)
                if value is not MISSING:
                    extra.setdefault(i, []).append(value)
    return extra


def _member(atom: Atom, x: Any) -> tuple[Any, Threshold | None]:
    """The value to try in `atom`, and the threshold crossed (numbers only). A sampled value
    (an atom of its own, without an interval) is tried as it is."""
    if atom.kind == "number" and atom.interval is not None and is_number(x):
        return _nearest(atom, x)
    return atom.rep, None


def _field_flips(decision: _Decision, path: str, x: Any, candidates: list[tuple[int, Atom]],
                 exact: bool) -> list[Flip]:
    """The flips of one field (current value `x`): the nearest increase and decrease for a
    number, else the best other change; none when no candidate changes the result."""
    numeric: dict[str, Flip] = {}
    other: list[tuple[tuple[bool, Any], Flip]] = []
    for a, atom in candidates:
        value, threshold = _member(atom, x)
        changed = _with(decision.facts, path, value)
        new = label_of(decision.run, changed)
        if decision.key(new) == decision.key(decision.current):
            continue
        if is_number(x) and is_number(value):
            change = "increase" if value > x else "decrease"
            flip = Flip(path, x, value, change, abs(value - x), threshold, decision.current, new, changed,
                        exact and a >= 0)
            best = numeric.get(change)
            if best is None or _rank(flip, flip.distance) < _rank(best, best.distance):
                numeric[change] = flip
        else:
            change = "remove" if value is MISSING else "set"
            flip = Flip(path, x, value, change, None, threshold, decision.current, new, changed, exact and a >= 0)
            other.append((_rank(flip, 0 if _kind(value) == _kind(x) else 1 if value is not MISSING else 2), flip))
    if numeric:
        return [numeric[c] for c in ("decrease", "increase") if c in numeric]
    if other:
        return [min(other, key=lambda item: item[0])[1]]
    return []


def minimal_flips(rulebook: RulebookDocument, facts: Any, compare: str = "outcome") -> list[Flip]:
    """The smallest single-fact changes that change this decision's result, per field.

    Raises gate.errors.RulebookInvalid for an invalid rulebook.
    """
    key = compare_key(compare)
    run = evaluator(rulebook)
    facts = copy.deepcopy(facts) if isinstance(facts, dict) else {}
    space = Space([rulebook])
    exact = space.exact and not any(p >= 0 for p in space.parent)  # no read field nests in another
    decision = _Decision(run, key, facts, label_of(run, facts))
    extra = {} if space.exact else _sampled_values(space)
    flips: list[Flip] = []
    for i, f in enumerate(space.fields):
        x = resolve(facts, f.path)
        here = space.atom_of(i, x)
        candidates = [(a, atom) for a, atom in enumerate(f.atoms) if a != here]
        candidates += [(-1, Atom(_kind(v), v)) for v in extra.get(i, [])]
        flips.extend(_field_flips(decision, f.path, x, candidates, exact))
    return flips
