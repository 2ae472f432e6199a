"""mutmut 3 with this project's two mutation filters (docs/mutation-testing.md).

Run by `scripts/mutation` as `python scripts/mutmut_prose.py <mutmut arguments>` in a scratch
copy; it patches mutmut's operators in memory and then hands over to mutmut's own command line.

Prose is a human-readable message: a string literal with a space in it, an f-string whose
literal text has a space, or a concatenation of such. Prose changes no decision, so:

* a prose literal is not mutated (`"no such key"` -> `"XXno such keyXX"`);
* nothing inside a prose f-string is mutated (`f"{len(names)} names"` -> `f"{len(names) + 1} names"`),
  nor inside a choice between two prose strings (`"is required" if x is None else "must be text"`);
* a call argument that is prose is neither replaced by `None` nor dropped
  (`self.add(path, CODE, "too deep")` -> `self.add(path, CODE, None)`);
* an assignment of prose is not replaced by `None` (`message = f"..."` -> `message = None`).

Everything else (codes, member names, comparisons, constants, other arguments) is mutated
exactly as mutmut does. Modules whose strings are code, not prose (`CODE_STRINGS`: the source
templates of the rulebook compiler and of the operators' compiled forms), are mutated exactly as
mutmut does, strings included.
"""

from __future__ import annotations

import sys

import libcst as cst
import mutmut.mutation.file_mutation as file_mutation
import mutmut.mutation.mutators as mutators

CODE_STRINGS = {"gate/rulebook/compile.py", "gate/rulebook/operators.py"}
_current = {"file": ""}


def _applies() -> bool:
    return _current["file"].replace("\\", "/").removeprefix("./") not in CODE_STRINGS


def is_prose(node: cst.CSTNode) -> bool:
    """A message for people: a literal or f-string with a space in its text."""
    if isinstance(node, cst.SimpleString):
        return " " in node.value
    if isinstance(node, cst.FormattedString):
        return any(isinstance(part, cst.FormattedStringText) and " " in part.value for part in node.parts)
    if isinstance(node, cst.ConcatenatedString):
        return is_prose(node.left) or is_prose(node.right)
    if isinstance(node, cst.IfExp):  # "one message" if x else "another message"
        return is_prose(node.body) and is_prose(node.orelse)
    return False


def _string(node):
    if _applies() and is_prose(node):
        return
    yield from mutators.operator_string(node)


def _arguments(node: cst.Call):
    prose = {index for index, arg in enumerate(node.args) if _applies() and is_prose(arg.value)}
    for mutated in mutators.operator_arg_removal(node):
        # Each mutant either replaces one argument by None (same length) or drops one.
        if len(mutated.args) == len(node.args):
            changed = [i for i, (a, b) in enumerate(zip(node.args, mutated.args, strict=False)) if a is not b]
        else:
            kept = {id(arg) for arg in mutated.args}
            changed = [i for i, arg in enumerate(node.args) if id(arg) not in kept]
        if not prose.intersection(changed):
            yield mutated


def _assignment(node):
    if _applies() and node.value is not None and is_prose(node.value):
        return
    yield from mutators.operator_assignment(node)


REPLACEMENTS = {
    mutators.operator_string: _string,
    mutators.operator_arg_removal: _arguments,
    mutators.operator_assignment: _assignment,
}
OPERATORS = [(kind, REPLACEMENTS.get(operator, operator)) for kind, operator in mutators.mutation_operators]
mutators.mutation_operators = OPERATORS
file_mutation.mutation_operators = OPERATORS

_skip = file_mutation.MutationVisitor._skip_node_and_children


def _skip_prose(self, node):
    if _applies() and isinstance(node, (cst.FormattedString, cst.ConcatenatedString, cst.IfExp)) and is_prose(node):
        return True
    return _skip(self, node)


file_mutation.MutationVisitor._skip_node_and_children = _skip_prose

_create = file_mutation.create_mutations


def _create_mutations(filename, *args, **kwargs):
    _current["file"] = str(filename)
    return _create(filename, *args, **kwargs)


file_mutation.create_mutations = _create_mutations


def write_mutated(module: str, source: str, target: str) -> None:
    """Write `module` (its path in the repository; its text read from `source`) as mutmut would
    mutate it, every mutant beside its original function (`scripts/mutation --stale` reads their
    keys). The working directory holds the `[tool.mutmut]` configuration."""
    from pathlib import Path

    _current["file"] = module
    mutated = file_mutation.mutate_file_contents(module, Path(source).read_text(encoding="utf-8"))
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    Path(target).write_text(mutated.code, encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write-mutated"]:  # --write-mutated MODULE SOURCE TARGET: no run, no tests
        write_mutated(*sys.argv[2:5])
        raise SystemExit(0)
    from mutmut.__main__ import cli

    sys.argv = ["mutmut", *sys.argv[1:]]
    cli()
