"""Numbers on the terminal at the precision the rulebook author wrote (standard library only).

The exact analysis works in binary floating point: a flip across an open threshold `gt 500`
lands on the nearest double past it (500.00000000000006), and a witness between 0.1 and 0.7 on
their computed midpoint (0.39999999999999997). Those values are right, and `--json` keeps them
exactly, but printed as they are they read as noise. The readable text says instead:

* a value one step of the floating-point grid past a number the author wrote is printed as
  `just above 500` / `just below 150` (the smallest change is "anything past the threshold");
* a witness number with float noise (it needs more than 12 significant digits) is replaced by
  the shortest decimal inside the same interval of its region
  (0.4 for 0.39999999999999997 in (0.1, 0.7)): every number of that interval gives the region's
  result, so it is as good a witness, written as the author would write it.

Everything else is printed as JSON prints it (the shortest text that reads back as the same
number).
"""

from __future__ import annotations

import copy
import json
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: this module runs on the standard library alone
    from gate.rulebook.analysis.shapes import FieldDescription, NumberRange

__all__ = ["near_text", "tidy_witness", "witness_text"]

_MISSING = object()


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def near_text(value: Any, anchors: list[Any]) -> str:
    """`value` as JSON, or `just above A` / `just below A` when it is the float next to an anchor A."""
    if isinstance(value, float) and math.isfinite(value):
        for anchor in anchors:
            if not _is_number(anchor) or anchor == value or not math.isfinite(anchor):
                continue
            if value == math.nextafter(float(anchor), math.inf):
                return f"just above {json.dumps(anchor)}"
            if value == math.nextafter(float(anchor), -math.inf):
                return f"just below {json.dumps(anchor)}"
    return json.dumps(value, sort_keys=True)


def _inside(c: float, interval: NumberRange) -> bool:
    lo, hi = interval.get("min"), interval.get("max")
    if lo is not None and (c < lo or (c == lo and not interval.get("min_inclusive"))):
        return False
    if hi is not None and (c > hi or (c == hi and not interval.get("max_inclusive"))):
        return False
    integers = interval.get("integers")
    return integers is None or float(c).is_integer() == integers


def _shortest(x: float, interval: NumberRange) -> float | int:
    """The number with the fewest decimals inside `interval` nearest to x (x itself at worst)."""
    for places in range(18):
        c = round(x, places)
        if _inside(c, interval):
            return int(c) if places == 0 and abs(c) < 2**53 else c
    return x


def _get(obj: Any, path: list[str]) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


def _put(obj: dict[str, Any], path: list[str], value: Any) -> None:
    for part in path[:-1]:
        obj = obj[part]
    obj[path[-1]] = value


def tidy_witness(witness: Any, where: list[FieldDescription] | None) -> Any:
    """A copy of an exact region's witness with each noisy number written at the fewest
    decimals its interval allows; unchanged without a region (a sampled finding)."""
    if not isinstance(witness, dict) or not where:
        return witness
    fields = [item.get("field", "") for item in where]
    out = copy.deepcopy(witness)
    for item in where:
        field = item.get("field", "")
        if any(other != field and (other.startswith(field + ".") or field.startswith(other + "."))
               for other in fields):
            continue  # nested reads constrain each other: leave the exact value alone
        path = field.split(".")
        x = _get(out, path)
        if not isinstance(x, float) or not math.isfinite(x) or float(f"{x:.12g}") == x:
            continue  # not noise: a number the author wrote, or one as short
        allows = item.get("allows")
        numbers = (allows.get("numbers") if allows else None) or []
        interval = next((iv for iv in numbers if _inside(x, iv)), None)
        if interval is not None:
            _put(out, path, _shortest(x, interval))
    return out


def witness_text(witness: Any, where: list[FieldDescription] | None) -> str:
    """The witness as one line of JSON, its numbers tidied (see `tidy_witness`)."""
    return json.dumps(tidy_witness(witness, where), sort_keys=True)
