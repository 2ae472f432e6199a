"""The `gate` console script: serve, keys, db, demo, export, verify, report, scopes, release, events, holds,
subject, erase, rulebook, dry-run, workbench, conformance, migration, checkpoint, init-policies, plan, apply.

It is composed outside the core: `gate verify` and `gate rulebook` import only `gate` (they work
offline with only the core installed); every other subcommand imports the server packages (the
ledger, the HTTP server, the workbench) inside the command that needs them, so `gate` starts
without them. Each command's parser is built by its own module, named in `gate_cli.commands`; a
run imports only the module of the command it runs (`gate --help` none). The commands share their
settings, ledger and clock through `gate_cli.context`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from gate import __version__
from gate.errors import GateError
from gate.vocabulary import INTERFACE_VERSION
from gate_cli.commands import COMMANDS, Commands, builder, named_in
from gate_cli.context import REFUSED, load_settings, prepare_home, print_refusal, refusal_text
from gate_cli.help import HelpFormatter, apply_everywhere, resolve_ids

# The signing keys, the services and the ledger are imported by the commands that use them, never
# at start-up: `gate --help` and every command's parser load no collation table, no JSON Schema
# and no SQL toolkit (issue 68; tests/cli/test_cli_startup.py).

# Subcommands that run with the core only (no server extras, no ledger), so GATE_HOME is not
# created for them; `gate checkpoint save --scope` opens the local ledger (and GATE_HOME) itself.
CORE_ONLY_COMMANDS = ("verify", "rulebook", "checkpoint")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """`gate`'s parser. Given the command line, only the command it names is built in full (the
    others are listed by name and help, for `gate --help` and a mistyped command's usage line);
    without one, every command is (the help walk and the container checks read them all)."""
    parser = argparse.ArgumentParser(
        prog="gate", formatter_class=HelpFormatter,
        description="Decision Gate command line. New here? `gate demo` serves a working gate with a demo key; "
                    "the API reference is then at http://127.0.0.1:8080/docs.")
    parser.add_argument("--version", action="version",
                        version=f"gate {__version__} (decision-gate; interface {INTERFACE_VERSION})")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", action=Commands)
    chosen = None if argv is None else named_in(argv)
    for command in COMMANDS:
        if argv is None or command is chosen:
            builder(command)(sub)
        else:
            sub.add_parser(command.name, add_help=False)  # listed, never parsed: another run builds it
    apply_everywhere(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command. Expected conditions end in one `gate: …` line and a non-zero status,
    never a traceback; a reader that closes the pipe early (`gate verify … | head`) ends quietly."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    resolve_ids(parser, args)  # an id given by its deprecated option (`--id`) as by its argument
    try:
        if args.command not in CORE_ONLY_COMMANDS:
            prepare_home(load_settings())
        status = args.func(args) or 0
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at interpreter exit
        return status
    except BrokenPipeError:
        # The reader went away; say nothing more (stdout is gone) and exit as `head` expects.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a command ended by a closed pipe
    except KeyboardInterrupt:
        return 130
    except GateError as error:
        return print_refusal(args.command, error)
    except Exception as exc:
        message = expected_failure(exc)
        if message is None:
            raise
        print(f"gate {args.command}: {message}", file=sys.stderr)
        return REFUSED


def expected_failure(exc: BaseException) -> str | None:
    """The one-line explanation of a condition a user can meet and fix, or None (a bug: re-raise).
    Every refusal is a GateError (CliError and SettingsError among them), printed as `print_refusal` does."""
    if isinstance(exc, GateError):
        return refusal_text(exc)
    sqlalchemy_exc = sys.modules.get("sqlalchemy.exc")
    if sqlalchemy_exc is not None and isinstance(exc, sqlalchemy_exc.OperationalError):
        reason = str(getattr(exc, "orig", exc)).splitlines()[0]
        return (f"LEDGER_UNAVAILABLE: the ledger cannot be opened ({reason}); check GATE_DATABASE_URL "
                "and that the database answers")
    if isinstance(exc, PermissionError):
        return f"CLI_REFUSED: permission denied: {exc.filename}"
    return None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
