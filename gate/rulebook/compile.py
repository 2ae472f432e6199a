"""Compilation of a validated Rulebook v1 into one fast, pure Python evaluator function.

A rulebook is turned into the source text of a single function (input_schema checks, then
every rule in evaluation order as one boolean expression, each leaf appending its trace
entry) and compiled once with `compile()`. The result is cached per rulebook hash by
`gate.rulebook.cache`, so the per-decision cost is one straight-line call.

SECURITY: no rulebook string or value ever appears in the generated source. Field path
parts, comparison values, rule ids, outcomes and operator names are placed in a constant
tuple that the generated code unpacks into closure variables named `_k0`, `_k1`, … by
position; the source text is built only from those generated names and fixed templates of
this module and of the operators' compiled forms (`gate.rulebook.operators`), selected by
operators that validation has already restricted to the declared names. A rulebook therefore
cannot inject code, whatever its strings contain.

Semantics are those of `gate.rulebook.semantics` and each operator's `holds` (reference facts
§2); an operator's compiled form only specialises them for speed (for example `eq` against a
string constant is plain `==`, which is exact for JSON values because Python never equates a
string with a non-string).

Trace (`Evaluation.checks`): every leaf actually evaluated, in evaluation order, as
`{"rule_id", "field", "operator", "passed"}`. `all` stops at its first false child and `any`
at its first true child (short-circuit), so leaves after that point are not evaluated and not
traced. A leaf under `not` is traced with its own result, before negation. Rules after the
first matching rule are not evaluated. needs_input evaluations have an empty trace.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from gate.protocol.canonical import collation_sorted
from gate.protocol.evaluation import STATUS_OK, Evaluation
from gate.rulebook import semantics
from gate.rulebook.contract import NEEDS_INPUT_DECISION
from gate.rulebook.operators import BY_NAME, HELPERS
from gate.rulebook.shapes import Condition, Evaluator, InputSchema, Outcome, Rule, RulebookDocument
from gate.vocabulary import (
    NEEDS_INPUT_ACTION,
    NEEDS_INPUT_REASON,
    NEEDS_INPUT_STATUS,
    NEEDS_INPUT_VERDICT,
)

__all__ = ["CompiledRulebook", "compile_rulebook", "rule_order"]

class CompiledRulebook:
    """A rulebook compiled to a pure evaluator; immutable and safe to share between threads.

    `evaluate(facts) -> Evaluation` is deterministic and never raises for any JSON facts
    (a non-object `facts` is treated as an empty object).
    """

    __slots__ = ("document", "evaluate", "rulebook_hash", "rulebook_id", "source", "version")

    def __init__(self, document: RulebookDocument, rulebook_hash: str, evaluate: Evaluator, source: str) -> None:
        self.document = document  # the validated rulebook, a private copy: read it, never change it
        self.rulebook_id = document["rulebook_id"]
        self.version = document["version"]
        self.rulebook_hash = rulebook_hash
        self.evaluate = evaluate  # a plain function: no bound-method cost per call
        self.source = source  # the generated source, for inspection and tests

    def __repr__(self) -> str:
        return f"CompiledRulebook({self.rulebook_id!r}, {self.version!r}, {self.rulebook_hash[:12]}…)"


def rule_order(rules: list[Rule]) -> list[Rule]:
    """Rules by priority descending (missing = 0), ties by rule_id ascending in collation order."""
    rank = {rule_id: index for index, rule_id in enumerate(collation_sorted(r["rule_id"] for r in rules))}
    return sorted(rules, key=lambda rule: (-int(rule.get("priority", 0)), rank[rule["rule_id"]]))


def _evaluation_factory() -> Callable[..., Evaluation]:
    """A positional constructor for Evaluation that skips the frozen-dataclass __init__.

    Frozen dataclass __init__ sets each field through object.__setattr__ (about 0.8 µs for
    ten fields); writing the slots directly gives the same value in half the time. Used
    only while Evaluation is a plain slotted dataclass without __post_init__; otherwise the
    regular constructor is returned. Tests assert both build equal values.
    """
    names = [f.name for f in dataclasses.fields(Evaluation)]
    if "__slots__" not in Evaluation.__dict__ or hasattr(Evaluation, "__post_init__"):
        return Evaluation
    setters = {f"_s{i}": getattr(Evaluation, name).__set__ for i, name in enumerate(names)}
    params = ", ".join(f"a{i}" for i in range(len(names)))
    body = "".join(f"    _s{i}(o, a{i})\n" for i in range(len(names)))
    source = f"def make({params}):\n    o = _new(_E)\n{body}    return o\n"
    namespace: dict[str, Any] = {"_new": object.__new__, "_E": Evaluation, **setters}
    exec(compile(source, "<gate.rulebook.evaluation-factory>", "exec"), namespace)  # noqa: S102 - our fixed template
    make: Callable[..., Evaluation] = namespace["make"]
    return make


_MAKE_EVALUATION = _evaluation_factory()

# Objects the generated code may reference, bound once as closure variables of the factory.
_RUNTIME = {
    "_M": semantics.MISSING,
    "_E": _MAKE_EVALUATION,
    "_EMPTY": {},
    "_type": type,
    "_isinstance": isinstance,
    "_dict": dict,
    "_str": str,
    "_list": list,
    "_bool": bool,
    "_int": int,
    "_float": float,
    "_tuple": tuple,
    **HELPERS,
}


class _Source:
    """Accumulates constants (referenced by generated names only) and source lines."""

    def __init__(self) -> None:
        self.constants: list[Any] = []
        self._strings: dict[str, str] = {}
        self.lines: list[str] = []

    def const(self, value: Any) -> str:
        """The generated name under which `value` is visible to the evaluator."""
        if type(value) is str:
            name = self._strings.get(value)
            if name is None:
                name = self._strings[value] = self._new(value)
            return name
        return self._new(value)

    def _new(self, value: Any) -> str:
        self.constants.append(value)
        return f"_k{len(self.constants) - 1}"

    def emit(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)


def _resolve_expr(src: _Source, field: str) -> str:
    """Expression for the value at `field`, or _M when the path does not resolve."""
    parts = field.split(".")
    expr = f"facts.get({src.const(parts[0])}, _M)"
    for part in parts[1:]:
        expr = f"(t.get({src.const(part)}, _M) if _isinstance(t := {expr}, _dict) else _M)"
    return expr


def _leaf_test(src: _Source, operator: str, field: str, value: Any) -> str:
    """A boolean expression for one leaf: its operator's compiled form (`gate.rulebook.operators`)."""
    declared = BY_NAME.get(operator)
    if declared is None:
        raise ValueError(f"unsupported operator {operator!r}")  # unreachable after validation
    return declared.compiled(src, _resolve_expr(src, field), value)


def _condition_expr(src: _Source, node: Condition, rule_id: str) -> str:
    """One boolean expression for a condition; leaves append their trace entry as they run."""
    if "all" in node or "any" in node:
        joiner = " and " if "all" in node else " or "
        children = node["all"] if "all" in node else node["any"]
        return "(" + joiner.join(_condition_expr(src, child, rule_id) for child in children) + ")"
    if "not" in node:
        child = node["not"][0] if isinstance(node["not"], list) else node["not"]
        return f"(not {_condition_expr(src, child, rule_id)})"
    operator, field = node["operator"], node["field"]
    test = _leaf_test(src, operator, field, node.get("value"))
    entry = (
        f'{{"rule_id": {src.const(rule_id)}, "field": {src.const(field)}, '
        f'"operator": {src.const(operator)}, "passed": (p := {test})}}'
    )
    return f"(_ap({entry}) or p)"


def _outcome_args(src: _Source, outcome: Outcome) -> str:
    names = [src.const(value) for value in
             (outcome["decision"], outcome["verdict"], outcome["action"], outcome["reason_code"])]
    return ", ".join(names)


def _input_schema(src: _Source, schema: InputSchema) -> None:
    """Emit input_schema checks: names in collation order, so the lists come out sorted."""
    required = set(schema.get("required", ()))
    properties = schema.get("properties", {})
    names = collation_sorted(required | set(properties))
    if not names:
        return
    src.emit(1, "missing = []")
    src.emit(1, "invalid = []")
    for name in names:
        src.emit(1, f"x = {_resolve_expr(src, name)}")
        kind = properties[name]["type"] if name in properties else None
        check = _type_check(kind)
        if name in required:
            src.emit(1, "if x is _M:")
            src.emit(2, f"missing.append({src.const(name)})")
            if check:
                src.emit(1, f"elif not {check}:")
                src.emit(2, f"invalid.append({src.const(name)})")
        elif check:
            src.emit(1, f"if x is not _M and not {check}:")
            src.emit(2, f"invalid.append({src.const(name)})")
    args = ", ".join(
        src.const(v)
        for v in (NEEDS_INPUT_STATUS, NEEDS_INPUT_DECISION, NEEDS_INPUT_VERDICT, NEEDS_INPUT_ACTION, NEEDS_INPUT_REASON)
    )
    src.emit(1, "if missing or invalid:")
    src.emit(2, f"return _E({args}, None, False, (), _tuple(missing), _tuple(invalid))")


def _type_check(kind: str | None) -> str | None:
    return {
        None: None,
        "string": "_isinstance(x, _str)",
        # Finite: for a float, x - x is 0.0 unless x is ±inf or nan.
        "number": "(_type(x) is _int or (_type(x) is _float and x - x == 0.0))",
        "integer": "(_type(x) is _int or (_type(x) is _float and x - x == 0.0 and x.is_integer()))",
        "boolean": "(x is True or x is False)",
        "array": "_isinstance(x, _list)",
        "object": "_isinstance(x, _dict)",
        "null": "x is None",
    }[kind]


def generate(rulebook: RulebookDocument) -> tuple[str, tuple[Any, ...]]:
    """The factory source and its constants for a validated rulebook."""
    src = _Source()
    src.emit(0, "def evaluate(facts):")
    src.emit(1, "if not _isinstance(facts, _dict):")
    src.emit(2, "facts = _EMPTY")
    if "input_schema" in rulebook:
        _input_schema(src, rulebook["input_schema"])
    src.emit(1, "checks = []")
    src.emit(1, "_ap = checks.append")
    ok = src.const(STATUS_OK)
    for rule in rule_order(rulebook["rules"]):
        rule_id = rule["rule_id"]
        src.emit(1, f"if {_condition_expr(src, rule['condition'], rule_id)}:")
        outcome = _outcome_args(src, rule["outcome"])
        src.emit(2, f"return _E({ok}, {outcome}, {src.const(rule_id)}, True, _tuple(checks), (), ())")
    outcome = _outcome_args(src, rulebook["default_outcome"])
    src.emit(1, f"return _E({ok}, {outcome}, None, False, _tuple(checks), (), ())")

    constants = tuple(src.constants)
    unpack = "    " + "".join(f"_k{i}, " for i in range(len(constants))) + "= _K\n" if constants else ""
    runtime = ", ".join(_RUNTIME)
    body = "\n".join("    " + line for line in src.lines)
    factory = f"def _factory(_K, {runtime}):\n{unpack}{body}\n    return evaluate\n"
    return factory, constants


def compile_rulebook(rulebook: RulebookDocument, rulebook_hash: str) -> CompiledRulebook:
    """Compile a rulebook that `validate_rulebook` accepted (not re-validated here)."""
    # A private deep copy: later mutation of the caller's dict cannot change the evaluator.
    rulebook = copy.deepcopy(rulebook)
    factory_source, constants = generate(rulebook)
    namespace: dict[str, Any] = {"__builtins__": {}}
    code = compile(factory_source, f"<rulebook {rulebook_hash[:16]}>", "exec")
    exec(code, namespace)  # noqa: S102 - generated from fixed templates only (see SECURITY above)
    evaluate: Evaluator = namespace["_factory"](constants, *_RUNTIME.values())
    return CompiledRulebook(rulebook, rulebook_hash, evaluate, factory_source)
