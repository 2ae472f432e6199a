"""The help layout of every `gate` command (standard library only: `gate verify` and
`gate rulebook` stay usable with only the core installed).

Each option's help line says what happens when it is left out: an option with a default shows
it (`(default: 8080)`), a required one says `(required)`, and an option without a value of its
own says in its text what it falls back to (`default: every scope`). A text with line breaks
(the GATE_* table of `gate serve --help`) keeps its layout; a one-paragraph description is
wrapped to the terminal. tests/cli/test_cli_help.py walks every subcommand's --help and holds
each option to this.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TypeAlias

__all__ = ["HelpFormatter", "Subparsers", "add_id_argument", "apply_everywhere", "resolve_ids"]

# What `ArgumentParser.add_subparsers()` returns, as every `add_*_parser(sub)` receives it (a string:
# argparse's class takes no type argument at run time).
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


class HelpFormatter(argparse.HelpFormatter):
    """Defaults and required markers in every option's help line; laid-out texts kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text.strip():
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if not action.option_strings or text == argparse.SUPPRESS:
            return text
        if action.required:
            return text if "required" in text else f"{text} (required)".lstrip()
        if "%(default)" in text or "(default" in text or _no_default(action.default):
            return text
        return f"{text} (default: %(default)s)".lstrip()


def _no_default(value: object) -> bool:
    return value is None or value is False or value == [] or value == argparse.SUPPRESS


def subparsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """Every parser below `parser` (depth first), with `parser` itself first."""
    yield parser
    for action in parser._actions:  # argparse offers no public walk over subcommands
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                yield from subparsers(child)


def apply_everywhere(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand that kept argparse's stock layout the gate's `HelpFormatter`
    (a subcommand module may bring a subclass of its own, which is left as it is)."""
    stock = (argparse.HelpFormatter, argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter)
    for each in subparsers(parser):
        if each.formatter_class in stock:
            each.formatter_class = HelpFormatter


_ALIAS = "deprecated_option_for_"


def add_id_argument(parser: argparse.ArgumentParser, dest: str, text: str, *, alias: str) -> None:
    """The id a command acts on, as its positional argument (`gate events deliveries ID`, as `gate
    holds show ID`); `alias`, the option it was once given with (`--id`), still works, hidden from
    the help and deprecated. `resolve_ids` makes the two one value."""
    parser.add_argument(dest, nargs="?", default=None, metavar=dest.upper(), help=text)
    parser.add_argument(alias, dest=_ALIAS + dest, default=None, metavar=dest.upper(), help=argparse.SUPPRESS)


def resolve_ids(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Each id given positionally or by its deprecated option, set under its own name; neither,
    or two that differ, is argparse's usage error (exit status 2)."""
    for name in [name for name in vars(args) if name.startswith(_ALIAS)]:
        dest, old = name.removeprefix(_ALIAS), getattr(args, name)
        given = getattr(args, dest)
        delattr(args, name)
        if given is not None and old is not None and given != old:
            parser.error(f"{dest.upper()} is given twice, as {given!r} and {old!r}")
        if given is None and old is None:
            parser.error(f"the following arguments are required: {dest.upper()}")
        setattr(args, dest, given if given is not None else old)
