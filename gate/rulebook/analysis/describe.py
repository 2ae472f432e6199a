"""Human and JSON descriptions of regions (cubes) of a `Space`.

A region is described field by field; an unconstrained field is left out. For one field, the
allowed atoms are listed by kind:

    {"field": "amount", "text": "number in (25, 40] or missing",
     "allows": {"missing": true, "null": false, "booleans": [],
                "numbers": [{"min": 25, "min_inclusive": false, "max": 40, "max_inclusive": true}],
                "strings": {"values": [], "other": []}, "arrays": {...}, "objects": {...}}}

`numbers` is a list of intervals (`min`/`max` null when unbounded; an extra `"integers": true`
or `false` when only the integral or only the non-integral members of a gap are allowed, which
happens for fields declared `integer`). `strings.other` (and `arrays.other`) lists the groups of
strings other than the listed constants that are allowed, each as the `contains` needles they
hold and those they do not (`{"contains": [...], "not_contains": [...]}`); `"any_other": true`
stands for all of them. `objects` has `values` (constants) and `any_other`. `excluded` lists the
constants of that kind the region leaves out.
"""

from __future__ import annotations

import json
from typing import Any, TypedDict

from gate.rulebook.analysis.regions import Cube
from gate.rulebook.analysis.shapes import (
    ConstantsAllowed,
    FieldAllows,
    FieldDescription,
    NeedleGroup,
    NumberRange,
    ObjectsAllowed,
)
from gate.rulebook.analysis.space import Field, Space


def _interval_text(lo: Any, lo_closed: bool, hi: Any, hi_closed: bool) -> str:
    if lo is not None and lo == hi:
        return json.dumps(lo)
    left = "[" if lo_closed else "("
    right = "]" if hi_closed else ")"
    return f"{left}{'-inf' if lo is None else json.dumps(lo)}, {'+inf' if hi is None else json.dumps(hi)}{right}"


def _fits(point: Any, tag: Any) -> bool:
    return tag is None or tag == "point" or float(point).is_integer() == tag


class _Piece(TypedDict):
    """An interval while `_numbers` merges them: a `NumberRange` and its tag (see there)."""

    min: float | None
    min_inclusive: bool
    max: float | None
    max_inclusive: bool
    tag: bool | str | None


def _numbers(f: Field, mask: int) -> list[NumberRange]:
    """Allowed numbers as merged intervals, in order.

    A gap of a field declared `integer` may be allowed only for its integers (tag True) or
    only for its non-integers (tag False), a point is tagged "point", a whole gap None;
    neighbouring pieces merge when their tags agree.
    """
    out: list[_Piece] = []
    for whole, a_int, a_frac in f.number_atoms:
        parts = [a for a in (whole, a_int, a_frac) if a >= 0]
        allowed = [a for a in parts if (mask >> a) & 1]
        if not allowed:
            continue
        atom = f.atoms[allowed[0]]
        lo, lo_closed, hi, hi_closed = atom.bounds()
        whole_gap = len(allowed) == len(parts) or whole >= 0
        tag: bool | str | None = "point" if atom.point else None if whole_gap else atom.integral
        prev = out[-1] if out else None
        if prev is not None and lo is not None and prev["max"] == lo and prev["max_inclusive"] != lo_closed:
            if tag == "point" and _fits(lo, prev["tag"]):
                prev.update({"max": hi, "max_inclusive": hi_closed})
                continue
            if tag != "point" and (prev["tag"] == tag or (prev["tag"] == "point" and _fits(prev["min"], tag))):
                prev.update({"max": hi, "max_inclusive": hi_closed, "tag": tag})
                continue
        out.append({"min": lo, "min_inclusive": lo_closed, "max": hi, "max_inclusive": hi_closed, "tag": tag})
    ranges: list[NumberRange] = []
    for piece in out:
        item: NumberRange = {"min": piece["min"], "min_inclusive": piece["min_inclusive"], "max": piece["max"],
                             "max_inclusive": piece["max_inclusive"]}
        if isinstance(piece["tag"], bool):
            item["integers"] = piece["tag"]
        ranges.append(item)
    return ranges


def _constants(values: list[object], excluded: list[object], f: Field, mask: int, sigs: dict[frozenset[int], int],
               needles: list[Any]) -> ConstantsAllowed:
    """The allowed strings (or arrays): the given constants and the other values allowed."""
    atoms = list(sigs.values())
    allowed = [a for a in atoms if (mask >> a) & 1]
    if allowed and len(allowed) == len(atoms):
        return {"values": values, "excluded": excluded, "any_other": True, "other": []}
    groups: list[NeedleGroup] = []
    for a in allowed:
        sig = set(f.atoms[a].signature)
        groups.append({"contains": [needles[i] for i in sorted(sig)],
                       "not_contains": [needles[i] for i in range(len(needles)) if i not in sig]})
    return {"values": values, "excluded": excluded, "any_other": False, "other": groups}


def field_allows(space: Space, index: int, mask: int) -> FieldAllows:
    """What field `index` may be inside `mask` (every field of a space has atoms: missing,
    null, true and false at least)."""
    f = space.fields[index]
    objects: ObjectsAllowed = {"values": [v for v, a in f.objects if (mask >> a) & 1],
                               "excluded": [v for v, a in f.objects if not (mask >> a) & 1],
                               "any_other": bool((mask >> f.other_object) & 1)}
    return {
        "missing": bool(mask & 1),
        "null": bool(mask & 2),
        "booleans": [v for v, bit in ((True, 4), (False, 8)) if mask & bit],
        "numbers": _numbers(f, mask),
        "strings": _constants([v for v, a in f.strings.items() if (mask >> a) & 1],
                              [v for v, a in f.strings.items() if not (mask >> a) & 1],
                              f, mask, f.string_sigs, f.string_needles),
        "arrays": _constants([v for v, a in f.arrays if (mask >> a) & 1],
                             [v for v, a in f.arrays if not (mask >> a) & 1],
                             f, mask, f.array_sigs, f.array_needles),
        "objects": objects,
    }


def _constants_text(kind: str, group: ConstantsAllowed | ObjectsAllowed) -> list[str]:
    if group["any_other"]:
        return [f"any {kind}" + (f" except {json.dumps(group['excluded'])}" if group["excluded"] else "")]
    if group["values"]:
        return [f"{kind} in {json.dumps(group['values'])}"]
    return []


def _others_text(kind: str, group: ConstantsAllowed) -> list[str]:
    parts = []
    for other in group["other"]:
        bits = []
        if other["contains"]:
            bits.append(f"containing {json.dumps(other['contains'])}")
        if other["not_contains"]:
            bits.append(f"not containing {json.dumps(other['not_contains'])}")
        parts.append(f"other {kind} " + " and ".join(bits) if bits else f"other {kind}")
    return parts


def field_text(allows: FieldAllows) -> str:
    """A short reading of one field's allowed values."""
    parts = []
    if allows["missing"]:
        parts.append("missing")
    if allows["null"]:
        parts.append("null")
    parts.extend(json.dumps(b) for b in allows["booleans"])
    for item in allows["numbers"]:
        if item["min"] is None and item["max"] is None:
            text = "any number"
        else:
            text = "number " + ("= " if item["min"] is not None and item["min"] == item["max"] else "in ")
            text += _interval_text(item["min"], item["min_inclusive"], item["max"], item["max_inclusive"])
        if "integers" in item:
            text += " (integers)" if item["integers"] else " (non-integers)"
        parts.append(text)
    for kind, group in (("string", allows["strings"]), ("array", allows["arrays"])):
        parts += _constants_text(kind, group) + _others_text(kind, group)
    parts += _constants_text("object", allows["objects"])
    return " or ".join(parts) if parts else "nothing"


def describe(space: Space, cube: Cube) -> list[FieldDescription]:
    """The constrained fields of a cube, in field path order."""
    out = []
    for index in sorted(cube, key=lambda i: space.fields[i].path):
        mask = cube[index]
        if mask == space.full[index]:
            continue
        out.append(_describe_field(space, index, mask))
    return out


def _describe_field(space: Space, index: int, mask: int) -> FieldDescription:
    """One field's description; cached per space (regions repeat the same masks).

    The nested `allows` member is shared between the regions of one report: read-only.
    """
    cache = space.descriptions
    found = cache.get((index, mask))
    if found is None:
        allows = field_allows(space, index, mask)
        text = field_text(allows)
        inverse = space.full[index] & ~mask
        if bin(inverse).count("1") < bin(mask).count("1"):
            text = "anything but (" + field_text(field_allows(space, index, inverse)) + ")"
        found = cache[(index, mask)] = {"field": space.fields[index].path, "text": text, "allows": allows}
    return found.copy()
