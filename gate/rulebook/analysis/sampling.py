"""Sampling: the fallback when a rulebook is beyond the exact analysis (never silence).

Used when a field has more `contains` values than the atom partition handles, or when the
cube budget runs out. Facts are drawn from a seeded generator (the same rulebooks give the
same samples): every atom's representative of every field (so all constants, the points
around every numeric threshold, every type), MISSING, and for fields with many `contains`
values, strings and arrays built from random subsets of those values. The samples are run
through the scalar evaluator itself, so every reported witness is real; what sampling cannot
do is prove that nothing else exists, and the reports say so (`exact: false`).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

from gate.rulebook.analysis.space import Atom, Field, Space, set_path
from gate.rulebook.semantics import MISSING
from gate.strict_json import JsonValue

DEFAULT_SAMPLES = 4000


def _value(space: Space, index: int, rng: random.Random, preferred: list[Atom]) -> Any:
    f = space.fields[index]
    roll = rng.random()
    if roll < 0.1:
        return _MISSING_SAMPLE
    if f.sample_needles and roll < 0.45:
        chosen = [n for n in f.sample_needles if rng.random() < 0.3]
        if rng.random() < 0.5:
            return copy.deepcopy(chosen)
        strings = [n for n in chosen if isinstance(n, str)]
        return space.separator.join(strings) if strings else rng.choice([s for s in f.sample_needles
                                                                          if isinstance(s, str)] or [""])
    pool = preferred if preferred and roll < 0.8 else f.atoms
    return copy.deepcopy(rng.choice(pool).rep)  # a private copy: nested paths write into it


def _preferred(f: Field) -> list[Atom]:
    """The atoms a field's leaves single out: constants, the gaps between numeric thresholds,
    and the needle groups of strings and arrays (random atoms alone would mostly pick types
    no rule looks at)."""
    out = []
    for atom in f.atoms:
        if (atom.point and atom.kind not in ("null", "boolean")) or (atom.kind == "number" and f.points) or (atom.kind == "string" and f.string_needles) or (atom.kind == "array" and f.array_needles):
            out.append(atom)
    return out


class _MissingSample:
    __slots__ = ()


_MISSING_SAMPLE = _MissingSample()


def samples(space: Space, count: int = DEFAULT_SAMPLES, seed: int = 0) -> Iterator[dict[str, JsonValue]]:
    """`count` fact sets over the space's fields (deterministic for a seed)."""
    rng = random.Random(seed)  # noqa: S311 - reproducible samples of an input space, not secrets
    order = sorted(range(len(space.fields)), key=lambda i: space.fields[i].path)
    preferred = [_preferred(f) for f in space.fields]
    for _ in range(count):
        facts: dict[str, JsonValue] = {}
        for index in order:
            value = _value(space, index, rng, preferred[index])
            # The `missing` atom's representative is the MISSING marker: the path stays absent,
            # as a missing draw leaves it, so every fact set is plain JSON.
            if value is not _MISSING_SAMPLE and value is not MISSING:
                set_path(facts, space.fields[index].path, value)
        yield facts
