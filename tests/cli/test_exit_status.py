"""One rule for every command's exit status (issue 66, item 2; docs/errors.md, "Exit status"):
a refusal exits 2 and prints one line, `gate COMMAND: CODE: message`, its code once.

Each top-level command's refusal path runs once, all of them in one subprocess (a small driver
calls `gate_cli.main.main` per case, each with its own environment), so the file takes seconds
and still runs the real entry point, parser, settings and printer. A command added to the parser
without a case here fails `test_every_command_has_a_case`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gate_cli.context import DONE, FAILED, REFUSED, REPORTED
from gate_cli.main import build_parser

# command → (argv, extra environment, the code the refusal names)
CASES: dict[str, tuple[list[str], dict[str, str], str]] = {
    "serve": (["serve", "--workers", "2"], {}, "CLI_REFUSED"),
    "demo": (["demo", "seed", "--decisions", "0"], {}, "DEMO_SEED_REFUSED"),
    "db": (["db", "upgrade"], {"GATE_DATABASE_URL": "sqlite:///{tmp}/missing/ledger.db"}, "CLI_REFUSED"),
    "dispatch": (["dispatch"], {"GATE_DATABASE_URL": "sqlite:///{tmp}/missing/ledger.db"}, "CLI_REFUSED"),
    "keys": (["keys", "create", "--scope", "s", "--permissions", "bogus"], {}, "CLI_REFUSED"),
    "export": (["export", "--out", "{tmp}/dataset", "--batch-size", "0"], {}, "CLI_REFUSED"),
    "verify": (["verify", "{tmp}/missing.json"], {}, "VERIFY_INPUT_UNREADABLE"),
    "report": (["report", "effectiveness", "--policy", "refund_approval"], {}, "CLI_REFUSED"),
    "scopes": (["scopes", "benchmarks", "--scope", "", "--status"], {}, "CLI_REFUSED"),
    "release": (["release", "status", "nope", "--scope", "s"], {}, "RULEBOOK_NOT_FOUND"),
    "events": (["events", "deliveries", "nope", "--scope", "s"], {}, "EVENT_SUBSCRIPTION_NOT_FOUND"),
    "holds": (["holds", "list", "--scope", "s", "--limit", "0"], {}, "CLI_REFUSED"),
    "subject": (["subject", "export", "", "--scope", "s"], {}, "SUBJECT_EXPORT_INVALID"),
    "erase": (["erase", "--scope", "s", "--subject", ""], {}, "SUBJECT_ERASURE_INVALID"),
    "rulebook": (["rulebook", "lint", "{tmp}/missing.json"], {}, "RULEBOOK_INPUT_INVALID"),
    "dry-run": (["dry-run", "--rulebook-id", "x", "--draft", "{tmp}/missing.json", "--scope", "s"], {}, "USAGE"),
    "sweep": (["sweep", "--rulebook-id", "x", "--draft", "{tmp}/missing.json", "--rule", "r", "--field", "f",
               "--from", "1", "--to", "2"], {}, "DRAFT_UNREADABLE"),
    "workbench": (["workbench", "--host", "0.0.0.0", "--port", "0"], {}, "WORKBENCH_ACCESS_INVALID"),
    "workbench-passwd": (["workbench-passwd", "{tmp}/passwords"], {}, "CLI_REFUSED"),
    "conformance": (["conformance", "--endpoint", "ftp://example.invalid"], {}, "CLI_REFUSED"),
    "migration": (["migration", "check", "{tmp}/missing.json"], {}, "CLI_REFUSED"),
    "checkpoint": (["checkpoint", "save", "--url", "http://127.0.0.1:1"], {}, "VERIFY_INPUT_UNREADABLE"),
    "init-policies": (["init-policies", "{tmp}/policies", "--scope", "nowhere"], {}, "POLICY_LAYOUT_INVALID"),
    "plan": (["plan", "--dir", "{tmp}/nowhere"], {}, "POLICY_LAYOUT_INVALID"),
    "apply": (["apply", "--dir", "{tmp}/nowhere"], {}, "POLICY_LAYOUT_INVALID"),
}

DRIVER = """
import contextlib, io, json, os, sys
from gate_cli.main import main
results = []
for argv, env in json.loads(sys.argv[1]):
    saved = dict(os.environ)
    os.environ.update(env)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as exit:
            status = exit.code
    os.environ.clear()
    os.environ.update(saved)
    results.append([status, err.getvalue()])
print(json.dumps(results))
"""


def test_the_statuses_are_the_documented_four():
    assert (DONE, FAILED, REFUSED, REPORTED) == (0, 1, 2, 3)
    text = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text(encoding="utf-8")
    assert "## Exit status" in text


def test_every_command_has_a_case():
    parser = build_parser()
    [commands] = [action for action in parser._actions if action.dest == "command"]
    assert set(commands.choices) == set(CASES)


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict[str, tuple[int, str]]:
    tmp = tmp_path_factory.mktemp("exit-status")
    env = {key: value for key, value in os.environ.items() if not key.startswith("GATE_")}
    env.update(GATE_HOME=str(tmp / "home"), GATE_REDIS_URL="")
    cases = [[[arg.format(tmp=tmp) for arg in argv], {k: v.format(tmp=tmp) for k, v in extra.items()}]
             for argv, extra, _code in CASES.values()]
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(cases)], env=env, capture_output=True,
                          text=True, timeout=300, cwd=tmp)
    assert done.returncode == 0, done.stderr
    return {name: (status, stderr) for name, (status, stderr) in zip(CASES, json.loads(done.stdout), strict=True)}


@pytest.mark.parametrize("command", list(CASES))
def test_a_refusal_exits_2_with_its_code_once(refusals, command):
    status, stderr = refusals[command]
    code = CASES[command][2]
    assert status == REFUSED, (command, status, stderr)
    assert stderr.count("\n") == 1 and stderr.startswith(f"gate {command}: {code}: "), stderr
    assert stderr.count(code) == 1, stderr
