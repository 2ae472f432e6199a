"""Every `gate` command: its name, its one-line help and where its parser is built (issue 68, item 5).

This table is the one home of a command's one-line help: `gate --help` lists it without importing a
command module, and a module's `add_*_parser(sub)` adds its commands without a `help=` of its own
(`Commands.add_parser` takes it from here). `gate COMMAND …` imports only the module that builds
COMMAND's parser, so a command starts with what it needs and nothing of the other families
(`tests/cli/test_cli_startup.py` holds both by what `python -X importtime` lists).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gate_cli.help import Subparsers


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    builder: str  # "module:function": the function adds this command's parser (and maybe its family's)


COMMANDS: tuple[Command, ...] = (
    Command("serve", "run the API (configuration from GATE_* environment variables)",
            "gate_cli.serve_cmd:add_serve_parser"),
    Command("demo", "set up the embedded default with demo data and serve it", "gate_cli.serve_cmd:add_demo"),
    Command("db", "ledger schema", "gate_cli.serve_cmd:add_db_parser"),
    Command("keys", "API keys and signing keys", "gate_cli.keys_cmd:add_keys_parser"),
    Command("export", "export the ledger into a Hive-partitioned Parquet dataset",
            "gate_cli.export_cmd:add_export_parser"),
    Command("verify", "verify an exported Decision Record or Decision Packet offline",
            "gate_cli.verify_cmd:add_verify_parser"),
    Command("report", "print a policy report (effectiveness, confidence, anomalies, benchmarks, holds)",
            "gate_cli.report_cmd:add_report_parser"),
    Command("scopes", "per-scope operator settings", "gate_cli.scopes_cmd:add_scopes_parser"),
    Command("release", "publish rulebook versions and move their releases", "gate_cli.release_cmd:add_release_parser"),
    Command("events", "webhook subscriptions, deliveries, replays and the dispatcher",
            "gate_cli.events_cmd:add_events_parser"),
    Command("dispatch", "run the deliveries, notices, retention and sweeps (beside `gate serve --no-dispatch`)",
            "gate_cli.dispatch_cmd:add_dispatch_parser"),
    Command("holds", "held actions: the inbox, a hold's facts and events, resolve, claim, reassign, escalate, policy",
            "gate_cli.holds_cmd:add_holds_parser"),
    Command("rulebook", "exact rulebook analysis: lint, semantic diff, minimal flips",
            "gate_cli.rulebook_cmd:add_rulebook_parser"),
    Command("dry-run", "re-evaluate a rulebook's history under a draft (or --verify a result)",
            "gate_cli.dry_run_cmd:add_dry_run_parser"),
    Command("sweep", "sweep a rule's numeric threshold over history (figures with intervals)",
            "gate_cli.sweep_cmd:add_sweep_parser"),
    Command("workbench", "serve the policy workbench (dashboard) beside the API",
            "gate_cli.workbench_cmd:add_workbench_parser"),
    Command("workbench-passwd", "set a workbench user's password (stored as a scrypt hash)",
            "gate_cli.workbench_cmd:add_passwd_parser"),
    Command("conformance", "run the published conformance fixtures against an endpoint",
            "gate_cli.contract_cmd:add_conformance_parser"),
    Command("migration", "rulebook migration manifests", "gate_cli.contract_cmd:add_migration_parser"),
    Command("checkpoint", "witness the audit chain: keep signed checkpoints outside the ledger",
            "gate_cli.checkpoint_cmd:add_checkpoint_parser"),
    Command("init-policies", "write the policy-as-code layout from what each scope runs",
            "gate_cli.policy_cmd:add_init_parser"),
    Command("plan", "what the rulebooks in DIR would change: diff, lint, full-history dry-run",
            "gate_cli.policy_cmd:add_plan_parser"),
    Command("apply", "publish the changed rulebooks in DIR and start their releases (release.toml)",
            "gate_cli.policy_cmd:add_apply_parser"),
    Command("subject", "a data subject's data on request (GDPR Art. 15): every decision, hold, event and dataset "
                       "row holding their values", "gate_cli.subject_cmd:add_subject_parser"),
    Command("erase", "ask to erase a data subject (gate subject erase)", "gate_cli.subject_cmd:add_erase_parser"),
)
BY_NAME = {command.name: command for command in COMMANDS}


class Commands(argparse._SubParsersAction):  # type: ignore[type-arg]  # argparse's class is generic only to mypy
    """The top-level subparsers: each command's help comes from `COMMANDS`, never from its module."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        command = BY_NAME.get(name)
        if command is None or "help" in kwargs:
            raise AssertionError(f"`gate {name}` is added with its help from gate_cli.commands.COMMANDS only")
        parser: argparse.ArgumentParser = super().add_parser(name, help=command.help, **kwargs)
        return parser


def builder(command: Command) -> Callable[[Subparsers], None]:
    """The function that adds `command`'s parser (its module is imported now)."""
    module, function = command.builder.split(":")
    # `__import__`, not `importlib.import_module`: the interpreter's own import, which
    # `python -X importtime` reports (the start-up tests count what a command imports by it).
    built: Callable[[Subparsers], None] = getattr(__import__(module, fromlist=[function]), function)
    return built


def named_in(argv: Sequence[str]) -> Command | None:
    """The command `argv` names (its first word that is not an option), or None (`gate --help`, a typo)."""
    for word in argv:
        if not word.startswith("-"):
            return BY_NAME.get(word)
        if word == "--":
            return None
    return None
