"""The input space of one or more rulebooks, cut into finitely many atoms per field.

Every field path a rulebook reads (in a leaf or in `input_schema`) is a variable. Its possible
values (any JSON value, or MISSING when the path does not resolve) are partitioned into
*atoms* chosen so that every leaf of the analysed rulebooks, and every `input_schema` type
check, has the same truth value on all members of an atom:

- MISSING, null, true, false: one atom each;
- numbers: the real line cut at every numeric constant used on the field (points and the open
  gaps between them); when some `input_schema` declares the field `integer`, each gap is split
  again into its integral and its non-integral members;
- strings: one atom per string constant (`eq`, `neq`, `in`, `not_in`), and the other strings
  grouped by which `contains` needles they contain (only the needle sets some string can have,
  i.e. sets closed under "is a substring of");
- arrays: one atom per array constant, and the other arrays grouped by which `contains` values
  they hold;
- objects: one atom per object constant and one for every other object.

A set of atoms of one field is a bit mask (bit i = atom i), so a region of the input space is
a mapping field index → mask (an absent field is unconstrained), and intersection, difference
and emptiness are integer operations. Each atom carries a representative value; a leaf's mask
is computed by running the evaluator's own leaf semantics on those representatives, so the
abstraction cannot drift from the evaluator.

Fields whose paths nest (`a` and `a.b`) are not independent: `witness` solves those
constraints exactly (a region that no fact set can realise has no witness).

Exactness limit: a field with more than `MAX_NEEDLES` distinct `contains` values of one kind
would need too many atoms; such a space is marked inexact and the analyses fall back to
sampling (see `gate.rulebook.analysis.sampling`).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gate.rulebook.analysis.regions import Cube
from gate.rulebook.analysis.shapes import FieldDescription, InexactReason
from gate.rulebook.operators import BY_NAME, OPERATORS, Operand, is_number
from gate.rulebook.semantics import MISSING, strict_equal
from gate.rulebook.shapes import Condition, RulebookDocument
from gate.strict_json import JsonValue

MAX_NEEDLES = 10
# The operators whose value is a needle (contains, not_contains): named when they make a space inexact.
_NEEDLE_OPERATORS = [operator.name for operator in OPERATORS if operator.operand is Operand.NEEDLE]


def leaf_holds(operator: str, value: Any, x: Any) -> bool:
    """One leaf on a resolved field value `x` (MISSING when unresolved), as the evaluator does."""
    declared = BY_NAME.get(operator)
    if declared is None:
        raise ValueError(f"unsupported operator {operator!r}")
    return declared.holds(x, value)


def type_ok(kind: str, x: Any) -> bool:
    """An `input_schema` type check on a present value (the compiled evaluator's rule)."""
    if kind == "string":
        return isinstance(x, str)
    if kind == "number":
        return is_number(x) and math.isfinite(x)
    if kind == "integer":
        return is_number(x) and math.isfinite(x) and float(x).is_integer()
    if kind == "boolean":
        return isinstance(x, bool)
    if kind == "array":
        return isinstance(x, list)
    if kind == "object":
        return isinstance(x, dict)
    return x is None


def leaves_of(node: Condition) -> Iterator[Condition]:
    """Every leaf of a condition, left to right."""
    stack = [node]
    while stack:
        node = stack.pop()
        if "all" in node or "any" in node:
            stack.extend(reversed(node["all"] if "all" in node else node["any"]))
        elif "not" in node:
            stack.append(node["not"][0] if isinstance(node["not"], list) else node["not"])
        else:
            yield node


@dataclass
class Atom:
    """One cell of a field's partition: `kind` plus what singles it out, and a member `rep`."""

    kind: str  # missing | null | boolean | number | string | array | object
    rep: Any
    point: bool = False  # a single constant value (rep is that value)
    interval: tuple[Any, bool, Any, bool] | None = None  # numbers: (lo, lo_closed, hi, hi_closed), None bound = infinite
    integral: bool | None = None  # numbers in a split gap: True integers only, False non-integers only
    signature: tuple[int, ...] = ()  # strings/arrays other than the constants: the needles they contain

    def bounds(self) -> tuple[Any, bool, Any, bool]:
        """A number atom's interval: (lo, lo_closed, hi, hi_closed)."""
        if self.interval is None:
            raise TypeError(f"a {self.kind} atom has no interval")
        return self.interval


@dataclass
class Field:
    """A variable (field path) and its atoms."""

    path: str
    atoms: list[Atom] = field(default_factory=list)
    full: int = 0
    points: list[Any] = field(default_factory=list)  # sorted numeric constants
    number_atoms: list[tuple[int, int, int]] = field(default_factory=list)  # per gap/point: (atom, int_atom, frac_atom)
    strings: dict[str, int] = field(default_factory=dict)  # string constant -> atom
    string_needles: list[str] = field(default_factory=list)
    string_sigs: dict[frozenset[int], int] = field(default_factory=dict)  # frozenset of needle indices -> atom
    arrays: list[tuple[list[Any], int]] = field(default_factory=list)  # (constant, atom)
    array_needles: list[Any] = field(default_factory=list)
    array_sigs: dict[frozenset[int], int] = field(default_factory=dict)
    objects: list[tuple[dict[str, JsonValue], int]] = field(default_factory=list)  # (constant, atom)
    other_object: int = -1
    sample_needles: list[Any] = field(default_factory=list)  # every contains value, for sampling

    def add(self, atom: Atom) -> int:
        self.atoms.append(atom)
        self.full |= 1 << (len(self.atoms) - 1)
        return len(self.atoms) - 1


class _Constants:
    """Constants and needles gathered for one field from every leaf that reads it."""

    def __init__(self) -> None:
        self.numbers: list[Any] = []
        self.values: list[Any] = []  # strings, arrays, objects compared by equality
        self.needles: list[Any] = []
        self.integral = False

    def add_value(self, value: Any) -> None:
        if is_number(value):
            self.numbers.append(value)
        elif isinstance(value, (str, list, dict)):
            self.values.append(value)


def _unique(values: list[Any]) -> list[Any]:
    out: list[Any] = []
    for value in values:
        if not any(strict_equal(value, seen) for seen in out):
            out.append(value)
    return out


def _strings_in(value: Any, out: set[str]) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.add(item)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            out.update(item)
            stack.extend(item.values())


class Space:
    """The atoms of every variable of the given rulebooks (validated Rulebook v1 objects)."""

    def __init__(self, rulebooks: list[RulebookDocument]) -> None:
        constants: dict[str, _Constants] = {}
        texts: set[str] = set()
        for book in rulebooks:
            schema = book.get("input_schema", {})
            for name in list(schema.get("required", ())) + list(schema.get("properties", {})):
                constants.setdefault(name, _Constants())
                texts.update(name.split("."))
            for name, prop in schema.get("properties", {}).items():
                if prop.get("type") == "integer":
                    constants[name].integral = True
            for rule in book["rules"]:
                for leaf in leaves_of(rule["condition"]):
                    entry = constants.setdefault(leaf["field"], _Constants())
                    texts.update(leaf["field"].split("."))
                    value, operand = leaf.get("value"), BY_NAME[leaf["operator"]].operand
                    _strings_in(value, texts)
                    if operand in (Operand.VALUE, Operand.NUMBER):
                        entry.add_value(value)
                    elif operand is Operand.OPTIONS and isinstance(value, list):
                        for option in value:
                            entry.add_value(option)
                    elif operand is Operand.NEEDLE and "value" in leaf:
                        entry.needles.append(value)
        # A separator no constant contains: other strings are built around it, so they can
        # never equal a constant or contain a needle by accident.
        self.separator = next(c for c in itertools.chain("|~#^", map(chr, range(0x2500, 0x2600)))
                              if not any(c in text for text in texts))
        self.sentinel = self.separator * 3
        self.inexact: list[InexactReason] = []
        self.fields: list[Field] = []
        self.index: dict[str, int] = {}
        for path in sorted(constants):
            self.index[path] = len(self.fields)
            self.fields.append(self._build(path, constants[path]))
        self.full = [f.full for f in self.fields]
        self.parent = self._parents()
        self.children: dict[int, list[int]] = {}
        for i, parent in enumerate(self.parent):
            self.children.setdefault(parent, []).append(i)
        self._leaf_cache: dict[tuple[str, str, str], int] = {}
        self.descriptions: dict[tuple[int, int], FieldDescription] = {}  # (field, mask) -> description, filled by `describe`

    @property
    def exact(self) -> bool:
        return not self.inexact

    # ------------------------------------------------------------------ construction

    def _build(self, path: str, const: _Constants) -> Field:
        f = Field(path)
        f.add(Atom("missing", MISSING))
        f.add(Atom("null", None, point=True))
        f.add(Atom("boolean", True, point=True))
        f.add(Atom("boolean", False, point=True))
        self._numbers(f, const)
        values = _unique(const.values)
        for value in values:
            if isinstance(value, str):
                f.strings[value] = f.add(Atom("string", value, point=True))
        string_needles = sorted({n for n in const.needles if isinstance(n, str)})
        array_needles = _unique(const.needles)
        f.sample_needles = array_needles
        for kind, found in (("string", string_needles), ("array", array_needles)):
            needles = found
            if len(found) > MAX_NEEDLES:
                self.inexact.append({"field": path, "operators": list(_NEEDLE_OPERATORS),
                                     "reason": f"{len(found)} distinct contains values on {kind}s "
                                               f"(exact analysis handles at most {MAX_NEEDLES})"})
                needles = found[:MAX_NEEDLES]
            if kind == "string":
                f.string_needles = needles
            else:
                f.array_needles = needles
        for subset in _subsets(len(f.string_needles)):
            rep = self.separator + self.separator.join(f.string_needles[i] for i in subset) + self.separator
            sig = frozenset(i for i, n in enumerate(f.string_needles) if n in rep)
            if sig not in f.string_sigs:
                f.string_sigs[sig] = f.add(Atom("string", rep, signature=tuple(sorted(sig))))
        for value in values:
            if isinstance(value, list):
                f.arrays.append((value, f.add(Atom("array", value, point=True))))
        for subset in _subsets(len(f.array_needles)):
            members = [f.array_needles[i] for i in subset] + [self.sentinel]
            f.array_sigs[frozenset(subset)] = f.add(Atom("array", members, signature=tuple(subset)))
        for value in values:
            if isinstance(value, dict):
                f.objects.append((value, f.add(Atom("object", value, point=True))))
        f.other_object = f.add(Atom("object", {self.sentinel: 0}))
        return f

    def _numbers(self, f: Field, const: _Constants) -> None:
        points = sorted(_unique(const.numbers))
        f.points = points
        bounds = [None] + points + [None]
        for i in range(len(points) + 1):
            lo, hi = bounds[i], bounds[i + 1]
            interval = (lo, False, hi, False)
            if const.integral:
                whole = _gap_rep(lo, hi, True)
                frac = _gap_rep(lo, hi, False)
                a_int = f.add(Atom("number", whole, interval=interval, integral=True)) if whole is not None else -1
                a_frac = f.add(Atom("number", frac, interval=interval, integral=False)) if frac is not None else -1
                f.number_atoms.append((-1, a_int, a_frac))
            else:
                rep = _gap_rep(lo, hi, None)
                f.number_atoms.append((f.add(Atom("number", rep, interval=interval)) if rep is not None else -1, -1, -1))
            if i < len(points):
                p = points[i]
                f.number_atoms.append((f.add(Atom("number", p, point=True, interval=(p, True, p, True))), -1, -1))

    def _parents(self) -> list[int]:
        """For each field, the index of its nearest proper-prefix field, or -1."""
        out = []
        for f in self.fields:
            parts = f.path.split(".")
            parent = -1
            for cut in range(len(parts) - 1, 0, -1):
                prefix = ".".join(parts[:cut])
                if prefix in self.index:
                    parent = self.index[prefix]
                    break
            out.append(parent)
        return out

    # ------------------------------------------------------------------ queries

    def leaf_mask(self, leaf: Condition) -> int:
        """Atoms of the leaf's field on which the leaf is true."""
        key = (leaf["field"], leaf["operator"], repr(leaf.get("value")))
        mask = self._leaf_cache.get(key)
        if mask is None:
            f = self.fields[self.index[leaf["field"]]]
            operator, value = leaf["operator"], leaf.get("value")
            mask = 0
            for i, atom in enumerate(f.atoms):
                if leaf_holds(operator, value, atom.rep):
                    mask |= 1 << i
            self._leaf_cache[key] = mask
        return mask

    def atom_of(self, index: int, x: Any) -> int:
        """The atom of field `index` that holds the value `x` (MISSING for an unresolved path)."""
        f = self.fields[index]
        if x is MISSING:
            return 0
        if x is None:
            return 1
        if x is True:
            return 2
        if x is False:
            return 3
        if is_number(x):
            pos = bisect.bisect_left(f.points, x)
            if pos < len(f.points) and f.points[pos] == x:
                return f.number_atoms[2 * pos + 1][0]
            whole, a_int, a_frac = f.number_atoms[2 * pos]
            if whole >= 0 or (a_int < 0 and a_frac < 0):
                return whole
            return a_int if float(x).is_integer() else a_frac
        if isinstance(x, str):
            if x in f.strings:
                return f.strings[x]
            return f.string_sigs[frozenset(i for i, n in enumerate(f.string_needles) if n in x)]
        if isinstance(x, list):
            for value, atom in f.arrays:
                if strict_equal(x, value):
                    return atom
            return f.array_sigs[frozenset(i for i, n in enumerate(f.array_needles)
                                          if any(strict_equal(item, n) for item in x))]
        if isinstance(x, dict):
            for obj, atom in f.objects:
                if strict_equal(x, obj):
                    return atom
            return f.other_object
        return -1  # not a JSON value: in no atom

    def locate(self, facts: Any) -> list[int]:
        """The atom of every field for a fact set."""
        facts = facts if isinstance(facts, dict) else {}
        return [self.atom_of(i, resolve(facts, f.path)) for i, f in enumerate(self.fields)]

    def contains(self, cube: Cube, atoms: list[int]) -> bool:
        return all(atoms[i] >= 0 and (mask >> atoms[i]) & 1 for i, mask in cube.items())

    def witness(self, cube: Cube) -> dict[str, JsonValue] | None:
        """A fact set inside `cube`, or None when nested paths make the region empty."""
        facts: dict[str, JsonValue] = {}
        children = self.children
        for root in children.get(-1, []):
            if root not in cube and root not in children:
                continue  # unconstrained and nothing nested: leave it missing
            value = self._solve(root, cube, children)
            if value is _FAIL:
                return None
            if value is not _ABSENT:
                set_path(facts, self.fields[root].path, value)
        return facts

    def _solve(self, i: int, cube: Cube, children: dict[int, list[int]]) -> Any:
        """A value for field i (and its nested fields) inside cube; _ABSENT for MISSING, _FAIL if none."""
        f = self.fields[i]
        mask = cube.get(i, f.full)
        kids = children.get(i, [])
        for a in _bits(mask):
            atom = f.atoms[a]
            if atom.kind == "object" and atom.point:
                if all(self._allows(k, cube, resolve(atom.rep, self._rest(i, k)), children) for k in kids):
                    return atom.rep
            elif atom.kind == "object":
                obj: dict[str, JsonValue] = {self.sentinel: 0}
                for k in kids:
                    value = self._solve(k, cube, children)
                    if value is _FAIL:
                        break
                    if value is not _ABSENT:
                        set_path(obj, self._rest(i, k), value)
                else:
                    return obj
            elif all(self._allows(k, cube, MISSING, children) for k in kids):
                return _ABSENT if atom.kind == "missing" else atom.rep
        return _FAIL

    def _allows(self, k: int, cube: Cube, value: Any, children: dict[int, list[int]]) -> bool:
        """Does cube allow field k to have `value` (with its nested fields following from it)?"""
        atom = self.atom_of(k, value)
        if atom < 0 or not (cube.get(k, self.full[k]) >> atom) & 1:
            return False
        return all(self._allows(c, cube, resolve(value, self._rest(k, c)) if isinstance(value, dict) else MISSING,
                                children) for c in children.get(k, []))

    def _rest(self, parent: int, child: int) -> str:
        return self.fields[child].path[len(self.fields[parent].path) + 1:]


class _Absent:
    __slots__ = ()


_ABSENT = _Absent()
_FAIL = _Absent()


def resolve(facts: Any, path: str) -> Any:
    """The value at a dotted path, through objects only; MISSING when it does not resolve."""
    current = facts
    for part in path.split("."):
        if not isinstance(current, dict) or part not in current:
            return MISSING
        current = current[part]
    return current


def set_path(facts: dict[str, JsonValue], path: str, value: JsonValue) -> None:
    """Set a dotted path, creating (or replacing non-object) intermediate objects."""
    parts = path.split(".")
    target = facts
    for part in parts[:-1]:
        child = target.get(part)
        if not isinstance(child, dict):
            child = target[part] = {}
        target = child
    target[parts[-1]] = value


def _bits(mask: int) -> Iterator[int]:
    i = 0
    while mask:
        if mask & 1:
            yield i
        mask >>= 1
        i += 1


def _subsets(n: int) -> Iterator[tuple[int, ...]]:
    for size in range(n + 1):
        yield from itertools.combinations(range(n), size)


def _gap_rep(lo: Any, hi: Any, integral: bool | None) -> Any:
    """A number strictly between lo and hi (None = unbounded) of the wanted integrality, or None."""
    if lo is None and hi is None:
        candidates = [0.5] if integral is False else [0]
    elif lo is None:
        base = math.ceil(hi) - 1
        candidates = [base + 0.5 if base + 0.5 < hi else base - 0.5] if integral is False else [base]
    elif hi is None:
        base = math.floor(lo) + 1
        candidates = [base - 0.5 if base - 0.5 > lo else base + 0.5] if integral is False else [base]
    else:
        base = math.floor(lo) + 1
        mid = lo / 2 + hi / 2
        candidates = [base, mid] if integral is not False else [mid, (lo + mid) / 2, (mid + hi) / 2, base - 0.5,
                                                                   math.nextafter(lo, math.inf)]
        if integral is None:
            candidates = [base, mid, math.nextafter(lo, math.inf)]
    for c in candidates:
        inside = (lo is None or c > lo) and (hi is None or c < hi)
        whole = float(c).is_integer()
        if inside and (integral is None or whole == integral):
            return c
    return None
