"""A bounded cost for every evaluation: limits on the facts, and on the work a rulebook may do over them.

The compiled evaluator is linear in what it touches, but what it touches multiplies: each
`contains` leaf walks its whole array, so 8 rules × 31 leaves over one 460,000-element array
(a 936 KB body) cost 26 s of a worker. Two checks, both in time linear in the facts plus the
rulebook, refuse with 422 (nothing evaluated, nothing stored): the first in the request envelope
checks (`gate.protocol.requests`), before anything walks or hashes the facts; the second before evaluating:

1. `EVALUATION_INPUT_TOO_LARGE`: the facts (`context.inputs`) hold at most `MAX_FACT_VALUES`
   JSON values in all (each object, array, string, number, boolean and null counts one), no
   array longer than `MAX_FACT_ARRAY_LENGTH` and no string or object key longer than
   `MAX_FACT_STRING_LENGTH` characters. This one is part of the request's shape, so it lives
   with the request checks in `gate.protocol.fact_limits`, below the rulebook package.
2. `EVALUATION_TOO_COSTLY`: an upper bound of the evaluator's work over these facts is at most
   `MAX_EVALUATION_WORK` units. Per leaf, by its operator's `cost` (`gate.rulebook.operators`):
   one unit per field path part, plus: for `contains` and `not_contains` over an array, its
   length times the size of the needle (elements are compared with the needle by strict
   equality, which visits at most the needle), over anything else one; for `in`, `not_in`, `eq`
   and `neq`, the size of the rulebook's value; for the others, one. Short-circuiting only
   lowers the real work.

Under these limits evaluation is exactly what it was: the checks refuse or pass, they never
change a verdict. The limits are documented in `docs.json` and the README.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from gate.errors import GateError
from gate.rulebook.operators import BY_NAME, Cost
from gate.rulebook.semantics import MISSING
from gate.rulebook.shapes import Condition, RulebookDocument
from gate.strict_json import JsonValue

__all__ = [
    "MAX_EVALUATION_WORK",
    "check_evaluation_cost",
    "evaluation_work",
]

MAX_EVALUATION_WORK = 250_000

# Leaf profiles per rulebook hash (the same key as the evaluator cache, and as bounded).
_PROFILE_CACHE_SIZE = 512
_lock = threading.Lock()
_profiles: OrderedDict[str, tuple[tuple[tuple[str, ...], bool, int], ...]] = OrderedDict()


def _size(value: Any) -> int:
    """JSON values in `value` (a rulebook constant, already bounded by validation and the body limit)."""
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return count


def _leaves(node: Condition) -> Iterator[Condition]:
    stack = [node]
    while stack:
        current = stack.pop()
        if "all" in current or "any" in current:
            stack.extend(current.get("all") or current.get("any") or ())
        elif "not" in current:
            child = current["not"]
            stack.extend(child if isinstance(child, list) else [child])
        else:
            yield current


def _profile(rulebook: RulebookDocument, rulebook_hash: str) -> tuple[tuple[tuple[str, ...], bool, int], ...]:
    """Per leaf: (path parts, walks an array of the facts, static units or needle size)."""
    with _lock:
        cached = _profiles.get(rulebook_hash)
        if cached is not None:
            _profiles.move_to_end(rulebook_hash)
            return cached
    profile = []
    for rule in rulebook["rules"]:
        for leaf in _leaves(rule["condition"]):
            parts = tuple(leaf["field"].split("."))
            cost = BY_NAME[leaf["operator"]].cost
            if cost is Cost.ARRAY:
                profile.append((parts, True, _size(leaf.get("value"))))
            elif cost is Cost.VALUE:
                profile.append((parts, False, _size(leaf.get("value"))))
            else:
                profile.append((parts, False, 1))
    result = tuple(profile)
    with _lock:
        _profiles[rulebook_hash] = result
        while len(_profiles) > _PROFILE_CACHE_SIZE:
            _profiles.popitem(last=False)
    return result


def _resolve(facts: dict[str, JsonValue], parts: tuple[str, ...]) -> object:
    value: object = facts
    for part in parts:
        if not isinstance(value, dict):
            return MISSING
        value = value.get(part, MISSING)
    return value


def evaluation_work(rulebook: RulebookDocument, rulebook_hash: str, facts: Any) -> int:
    """An upper bound of the work units evaluating the (validated) rulebook over `facts` costs."""
    facts = facts if isinstance(facts, dict) else {}
    work = 0
    for parts, walks_array, units in _profile(rulebook, rulebook_hash):
        work += len(parts)
        if walks_array:
            target = _resolve(facts, parts)
            work += len(target) * units if isinstance(target, list) else 1
        else:
            work += units
    return work


def check_evaluation_cost(rulebook: RulebookDocument, rulebook_hash: str, facts: Any) -> None:
    """Raise 422 `EVALUATION_TOO_COSTLY` past the work limit (facts already passed `check_facts`)."""
    work = evaluation_work(rulebook, rulebook_hash, facts)
    if work > MAX_EVALUATION_WORK:
        # SECURITY: fail closed before evaluating; one key cannot hold a worker for seconds.
        raise GateError(
            "EVALUATION_TOO_COSTLY",
            f"evaluating this rulebook over these inputs would cost up to {work} work units; "
            f"at most {MAX_EVALUATION_WORK} allowed (mostly contains over long arrays)",
            work=work, maximum=MAX_EVALUATION_WORK,
        )
