"""Every `gate` subcommand's --help: each option says what happens when it is left out (its
default, or that it is required), so the README's "every command's --help shows its defaults"
holds. The list of subcommands and options comes from the parser itself: a new option without a
shown default fails here. The pages are the parsers' own text at 100 columns; a sample of them is
also run as `gate … --help` subprocesses, which must print exactly that text."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from gate_cli.help import subparsers
from gate_cli.main import build_parser

GATE = str(Path(sys.executable).parent / "gate")


def _paths() -> list[tuple[list[str], argparse.ArgumentParser]]:
    """(argv prefix, parser) for the top level and every subcommand."""
    out = []
    for parser in subparsers(build_parser()):
        words = parser.prog.split()[1:]  # "gate keys create" -> ["keys", "create"]
        out.append((words, parser))
    return out


def _option_blocks(text: str) -> dict[str, str]:
    """Each option string of a --help page → its help text, wrapped lines joined."""
    blocks: dict[str, str] = {}
    current: list[str] = []
    keys: list[str] = []

    def close() -> None:
        for key in keys:
            blocks[key] = " ".join(" ".join(current).split())

    for line in text.splitlines():
        head = re.match(r"^  (-[^ ].*?)(?:  +(.*))?$", line)
        if head:
            close()
            keys = re.findall(r"(?:^|, )(-{1,2}[\w-]+)", head.group(1))
            current = [head.group(2) or ""]
        elif keys and line.startswith("    ") and line.strip():
            current.append(line.strip())
        else:
            close()
            keys, current = [], []
    close()
    return blocks


def _help(words: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([GATE, *words, "--help"], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "COLUMNS": "100"})


def _problems(parser: argparse.ArgumentParser, page: str) -> list[str]:
    blocks = _option_blocks(page)
    problems = []
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", "version") or action.help == argparse.SUPPRESS:
            continue  # a hidden option (a deprecated alias, gate_cli.help.add_id_argument) is not on the page
        name = action.option_strings[-1]
        text = blocks.get(name)
        if text is None:
            problems.append(f"{name}: not on the help page")
        elif action.required:
            if "required" not in text:
                problems.append(f"{name}: required, but its help does not say so: {text!r}")
        elif action.default not in (None, False, [], argparse.SUPPRESS):
            if "default" not in text or str(action.default) not in text:
                problems.append(f"{name}: default {action.default!r} not shown: {text!r}")
        elif action.nargs != 0 and "default" not in text and "required" not in text:
            problems.append(f"{name}: takes a value but says neither its default nor that it is required: {text!r}")
    for group in parser._mutually_exclusive_groups:
        if group.required:
            for action in group._group_actions:
                text = blocks.get(action.option_strings[-1], "")
                if "required" not in text:
                    problems.append(f"{action.option_strings[-1]}: one of a required group, not said: {text!r}")
    return problems


def _page(parser: argparse.ArgumentParser, monkeypatch) -> str:
    """What `gate … --help` prints at 100 columns: the parser's own help text."""
    monkeypatch.setenv("COLUMNS", "100")
    return parser.format_help()


def test_every_subcommand_help_shows_defaults_and_required_options(monkeypatch):
    paths = _paths()
    assert len(paths) > 25 and any(words == ["report"] for words, _ in paths)
    problems = []
    for words, parser in paths:
        problems += [f"gate {' '.join(words)} {p}" for p in _problems(parser, _page(parser, monkeypatch))]
    assert not problems, "\n".join(problems)


def test_the_help_subprocesses_print_the_parsers_pages(monkeypatch):
    """The shell prints exactly the pages checked above (top level, one command, nested ones)."""
    paths = {" ".join(words): parser for words, parser in _paths()}
    for words in ("", "report", "holds resolve", "subject export"):
        done = _help(words.split())
        assert done.returncode == 0, (words, done.stderr)
        assert done.stdout == _page(paths[words], monkeypatch), words


def test_report_help_shows_the_endpoint_defaults_and_ranges():
    page = " ".join(_help(["report"]).stdout.split())
    for shown in ("default 1000", "Range 1 to 10000", "default 10", "default 0.35", "default 5", "'all'",
                  "--policy POLICY policy id (the rulebook id) (required)"):
        assert shown in page, shown


def test_dry_run_help_says_which_options_are_required():
    blocks = _option_blocks(_help(["dry-run"]).stdout)
    for name in ("--rulebook-id", "--draft", "--out"):
        assert "required" in blocks[name], (name, blocks[name])
    assert "default: 200" in blocks["--flips-limit"]
