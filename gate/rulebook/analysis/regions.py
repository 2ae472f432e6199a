"""Regions of the input space: products of per-field atom sets, and unions of them.

A *cube* is a dict `field index -> atom mask` (a field not in the dict is unconstrained); it
stands for every fact set whose field values all lie in the given atoms. A condition becomes a
union of cubes (disjunctive normal form): a leaf is one cube on one field, `all` intersects,
`any` unites, and `not` is pushed down to the leaves, where it is the complement of the leaf's
mask on its field (exact, because the atoms partition every field's values, MISSING included:
`not(eq 1)` holds for a missing field, `neq 1` does not). Empty cubes are dropped as soon as
they appear and cubes inside another cube of the same union are absorbed.

`partition` runs a decision list (first matching item wins) over a cube and returns disjoint
cubes labelled by the item that decides them; it subtracts each matched cube from what
remains with the disjoint "sharp" difference, so the pieces never overlap.

All work is counted against a `Budget`; when a rulebook would need more cubes than the budget
allows, `BudgetExceeded` is raised and the caller falls back to sampling (never to silence).
"""

from __future__ import annotations

from typing import Any

from gate.errors import Signal
from gate.rulebook.shapes import Condition

Cube = dict[int, int]  # field index -> atom mask
MAX_CUBES = 4096  # regions one condition may need (its normal form); more falls back to sampling
ABSORB_LIMIT = 256  # above this many cubes, absorption only removes exact repeats


class BudgetExceeded(Signal):
    """The exact analysis would need more cube operations than allowed (the caller samples instead)."""


class Budget:
    """A counter of cube operations shared by one analysis."""

    __slots__ = ("left",)

    def __init__(self, operations: int = 1_000_000) -> None:
        self.left = operations

    def spend(self, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise BudgetExceeded("the exact analysis exceeded its budget of cube operations")


def meet(a: Cube, b: Cube) -> Cube | None:
    """The intersection of two cubes, or None when it is empty."""
    if len(a) < len(b):
        a, b = b, a
    out = dict(a)
    for f, m in b.items():
        x = out.get(f)
        if x is None:
            out[f] = m
        else:
            x &= m
            if not x:
                return None
            out[f] = x
    return out


def subtract(a: Cube, b: Cube, full: list[int]) -> list[Cube]:
    """a minus b as disjoint cubes (a itself when they do not meet)."""
    for f, m in b.items():
        if f in a and not a[f] & m:
            return [a]
    out = []
    current = dict(a)
    for f, m in b.items():
        have = current.get(f, full[f])
        rest = have & ~m
        if rest:
            piece = dict(current)
            piece[f] = rest
            out.append(piece)
        current[f] = have & m
    return out


def subset(a: Cube, b: Cube, full: list[int]) -> bool:
    """Is cube a inside cube b?"""
    return all(not (a.get(f, full[f]) & ~m) for f, m in b.items())


def absorb(cubes: list[Cube], full: list[int], budget: Budget) -> list[Cube]:
    """Drop cubes contained in another cube of the list (keeping one of equal cubes)."""
    if len(cubes) < 2:
        return cubes
    if len(cubes) > MAX_CUBES:
        raise BudgetExceeded(f"a condition needs more than {MAX_CUBES} regions")
    if len(cubes) > ABSORB_LIMIT:  # pairwise containment would cost more than it saves: only drop repeats
        budget.spend(len(cubes))
        unique = {tuple(sorted(c.items())): c for c in cubes}
        return list(unique.values())
    budget.spend(len(cubes) * len(cubes) // 2)
    kept: list[Cube] = []
    for cube in sorted(cubes, key=len):
        if not any(subset(cube, other, full) for other in kept):
            kept = [other for other in kept if not subset(other, cube, full)]
            kept.append(cube)
    return kept


def condition_cubes(space: Any, node: Condition, budget: Budget, negate: bool = False) -> list[Cube]:
    """A condition (or its negation) as a union of cubes."""
    if "not" in node:
        child = node["not"][0] if isinstance(node["not"], list) else node["not"]
        return condition_cubes(space, child, budget, not negate)
    if "all" in node or "any" in node:
        children = node["all"] if "all" in node else node["any"]
        conjunction = ("all" in node) != negate
        parts = [condition_cubes(space, child, budget, negate) for child in children]
        if conjunction:
            result: list[Cube] = [{}]
            for part in sorted(parts, key=len):
                budget.spend(len(result) * len(part))
                result = absorb([c for a in result for b in part if (c := meet(a, b)) is not None], space.full, budget)
                if not result:
                    return []
            return result
        union = [cube for part in parts for cube in part]
        budget.spend(len(union))
        return absorb(union, space.full, budget)
    index = space.index[node["field"]]
    mask = space.leaf_mask(node)
    if negate:
        mask = space.full[index] & ~mask
    if not mask:
        return []
    return [{}] if mask == space.full[index] else [{index: mask}]


def disjoint(cubes: list[Cube], full: list[int], budget: Budget) -> list[Cube]:
    """The same union as disjoint cubes."""
    out: list[Cube] = []
    for cube in cubes:
        pieces = [cube]
        for seen in out:
            budget.spend(len(pieces))
            pieces = [p for piece in pieces for p in subtract(piece, seen, full)]
            if not pieces:
                break
        out.extend(pieces)
    return out


def partition(items: list[tuple[Any, list[Cube]]], default: Any, root: Cube, full: list[int],
              budget: Budget) -> list[tuple[Cube, Any]]:
    """Run a decision list over `root`: disjoint (cube, label) pieces covering `root`.

    `items` are (label, disjoint cubes of its condition) in evaluation order; what no item
    matches gets `default`.
    """
    result: list[tuple[Cube, Any]] = []
    remaining = [root]
    for label, cubes in items:
        if not remaining:
            break
        rest: list[Cube] = []
        for piece in remaining:
            left = [piece]
            for cube in cubes:
                budget.spend()
                hit = meet(piece, cube)
                if hit is None:
                    continue
                result.append((hit, label))
                left = [p for q in left for p in subtract(q, cube, full)]
                budget.spend(len(left))
            rest.extend(left)
        remaining = rest
    result.extend((piece, default) for piece in remaining)
    return result


def merge(cubes: list[Cube], full: list[int]) -> list[Cube]:
    """Unite cubes that differ in one field only (repeatedly), for shorter region lists."""
    cubes = [dict(c) for c in cubes]
    changed = True
    while changed and len(cubes) > 1:
        changed = False
        out: list[Cube] = []
        for cube in cubes:
            for other in out:
                keys = set(cube) | set(other)
                diff = [f for f in keys if cube.get(f, full[f]) != other.get(f, full[f])]
                if len(diff) <= 1:
                    if diff:
                        f = diff[0]
                        m = cube.get(f, full[f]) | other.get(f, full[f])
                        if m == full[f]:
                            other.pop(f, None)
                        else:
                            other[f] = m
                    changed = True
                    break
            else:
                out.append(cube)
        cubes = out
    return cubes
