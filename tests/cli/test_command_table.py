"""The table of `gate`'s commands (`gate_cli.commands`) is the one home of each command's name and
one-line help, and names the one function that builds its parser (issue 68, item 5): the parser a
run builds for one command is that command's full parser, listed beside the others by name."""

from __future__ import annotations

import argparse

import pytest

from gate_cli.commands import BY_NAME, COMMANDS, Commands, named_in
from gate_cli.help import subparsers
from gate_cli.main import build_parser


def _commands(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_every_command_is_built_by_its_own_builder_with_the_tables_help():
    full = _commands(build_parser())
    assert list(full.choices) == [command.name for command in COMMANDS]  # each builder adds its command alone
    assert {action.dest: action.help for action in full._choices_actions} == {c.name: c.help for c in COMMANDS}


@pytest.mark.parametrize("command", COMMANDS, ids=lambda command: command.name)
def test_a_run_builds_its_command_in_full_and_the_others_by_name(command):
    chosen = _commands(build_parser([command.name, "--help"]))
    whole = _commands(build_parser())
    assert list(chosen.choices) == list(whole.choices)
    assert [a.help for a in chosen._choices_actions] == [a.help for a in whole._choices_actions]
    built, expected = chosen.choices[command.name], whole.choices[command.name]
    assert [sorted(p.format_help().split()) for p in subparsers(built)] == \
        [sorted(p.format_help().split()) for p in subparsers(expected)]
    other = next(name for name in chosen.choices if name != command.name)
    assert chosen.choices[other]._actions == []  # listed, not built


def test_the_command_is_the_first_word_that_is_not_an_option():
    assert named_in(["holds", "list"]) is BY_NAME["holds"]
    assert named_in(["--version"]) is None
    assert named_in(["holdz", "list"]) is None
    assert named_in(["--", "holds"]) is None


def test_a_command_cannot_bring_a_help_of_its_own_or_be_missing_from_the_table():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(action=Commands)
    with pytest.raises(AssertionError, match="COMMANDS"):
        sub.add_parser("holds", help="a second home")
    with pytest.raises(AssertionError, match="COMMANDS"):
        sub.add_parser("not-a-command")
    assert sub.add_parser("holds").prog.endswith("holds")


def test_a_mistyped_command_is_a_usage_error_naming_every_command(capsys):
    with pytest.raises(SystemExit) as ended:
        build_parser(["holdz"]).parse_args(["holdz"])
    assert ended.value.code == 2
    said = capsys.readouterr().err
    assert "invalid choice: 'holdz'" in said
    assert all(f"'{command.name}'" in said for command in COMMANDS)
