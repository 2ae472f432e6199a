"""The command line's processes start without the optional grammar jsonschema would compile
(gate_cli/__init__.py), and the adapters' `format` checks read the same with or without it.

The command line starts at once (issue 68, item 5): `gate --help`, every command's parser and
`gate holds list` import what the command needs when it runs, never the collation table of the
canonical JSON (0.6–0.8 s), the JSON Schemas, the SQL toolkit or the analytics stack up front;
and a command that writes only ASCII keys, such as `gate verify` of a record, keys them without
that table. Checked by what `python -X importtime` says was imported, not by a clock: a loaded CI
host changes the time, not the modules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gate.adapters.manifest import _FORMATS

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests" / "crypto" / "vectors"
# Never needed to parse a command line or print a help text.
HEAVY = ("gate.protocol.collation", "jsonschema", "gate.bodies", "sqlalchemy", "alembic", "polars", "pyarrow",
         "pandas", "panel", "flask", "gate.services.root",
         # the verifiers of `gate verify` and `gate checkpoint` load when one runs (issue 68, item 5)
         "gate.packets", "gate.chain.merkle", "gate.chain.checkpoint_log", "gate.verify")
# Never needed to list holds (the collation table builds sort keys for canonical JSON: no listing writes
# any; Alembic only migrates a ledger that does not state the newest revision; jsonschema validates a
# body, and a listing validates none: `gate.bodies` imports it at the first validation).
NOT_FOR_A_LISTING = ("gate.protocol.collation", "alembic", "polars", "pyarrow", "pandas", "panel", "flask",
                     "jsonschema", "referencing", "rpds")
HELP_MODULES_BUDGET = 190  # 142 measured for `gate --help`, 178 for `gate verify --help`; 260 while every command's module built its parser, 439 before issue 68
LISTING_MODULES_BUDGET = 520  # 487 measured; 527 while every command's module built its parser, 632 while
# gate.bodies imported jsonschema (issue 68, item 5)



def test_a_gate_process_never_compiles_the_iri_grammar():
    probe = ("import sys, gate_cli.main, jsonschema; "
             "print(repr(sys.modules.get('rfc3987_syntax', 'absent')))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() in ("None", "'absent'"), done.stdout


def test_the_adapters_assert_formats_but_never_the_iri_ones():
    assert "iri" not in _FORMATS.checkers and "iri-reference" not in _FORMATS.checkers
    assert _FORMATS.conforms("not an iri at all ::", "iri")  # an annotation, whatever is installed
    assert not _FORMATS.conforms("2026-13-45", "date") and _FORMATS.conforms("2026-11-26", "date")


def _imported(argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """The modules `gate ARGV` imports, in order, from `python -X importtime`."""
    code = f"import sys; from gate_cli.main import main; sys.exit(main({argv!r}))"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line.split("|") for line in done.stderr.splitlines() if line.startswith("import time:")]
    return [parts[2].strip() for parts in lines[1:]]  # the first line is the header


@pytest.mark.parametrize("argv", [["--help"], ["holds", "list", "--help"], ["verify", "--help"],
                                  ["keys", "create", "--help"]], ids=" ".join)
def test_a_help_text_imports_no_heavy_module(argv):
    modules = _imported(argv)
    assert [name for name in modules if name.split(".")[0] in HEAVY or name in HEAVY
            or any(name.startswith(heavy + ".") for heavy in HEAVY)] == []
    assert len(modules) < HELP_MODULES_BUDGET, len(modules)


def test_listing_holds_builds_no_collation_table_no_migration_and_no_analytics(tmp_path):
    env = {"GATE_HOME": str(tmp_path / "home"), "GATE_DATABASE_URL": f"sqlite:///{tmp_path / 'gate.db'}"}
    assert "alembic" in _imported(["holds", "list", "--scope", "tenant_a"], env)  # the first run migrates
    modules = _imported(["holds", "list", "--scope", "tenant_a"], env)
    assert "gate.ledger" in modules  # it did read the ledger
    assert [name for name in modules if name in NOT_FOR_A_LISTING
            or any(name.startswith(heavy + ".") for heavy in NOT_FOR_A_LISTING)] == []
    assert len(modules) < LISTING_MODULES_BUDGET, len(modules)


def test_a_body_is_still_validated_once_jsonschema_is_imported_late():
    """`gate.bodies` reads a schema without jsonschema, and validates with it (imported then)."""
    probe = ("import sys; from gate import bodies; bodies.schema('hold-resolution'); "
             "print('jsonschema' in sys.modules); "
             "print(bodies.first_error('hold-resolution', {'note': 7}) is not None); "
             "print('jsonschema' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True,
                          cwd=ROOT)
    assert done.stdout.split() == ["False", "True", "True"], done.stdout


def _command_modules(modules: list[str]) -> set[str]:
    """The command modules among `modules` (`gate_cli.X_cmd`): each builds one family's parsers."""
    return {name for name in modules if name.startswith("gate_cli.") and name.endswith("_cmd")}


def test_the_top_level_help_imports_no_command_module():
    assert _command_modules(_imported(["--help"])) == set()


@pytest.mark.parametrize(("argv", "module"), [(["holds", "list", "--help"], "gate_cli.holds_cmd"),
                                               (["verify", "--help"], "gate_cli.verify_cmd"),
                                               (["plan", "--help"], "gate_cli.policy_cmd")], ids=" ".join)
def test_a_command_imports_its_own_module_and_no_other_family(argv, module):
    assert _command_modules(_imported(argv)) == {module}


def test_listing_holds_imports_no_other_command_family(tmp_path):
    env = {"GATE_HOME": str(tmp_path / "home"), "GATE_DATABASE_URL": f"sqlite:///{tmp_path / 'gate.db'}"}
    _imported(["holds", "list", "--scope", "tenant_a"], env)  # the first run migrates
    assert _command_modules(_imported(["holds", "list", "--scope", "tenant_a"], env)) == {"gate_cli.holds_cmd"}


def test_verifying_a_record_keys_its_ascii_members_without_the_collation_table():
    """`gate verify` hashes the record's canonical text (every key ASCII) and answers VERIFIED
    (exit 0) with no `gate.protocol.collation`; its tampered twin still fails. (The first key of
    another character loads the table: tests/core/test_collation.py.)"""
    secret = {"FIXTURE_HMAC": "decide_conformance_hmac_secret_v1"}
    record = ["verify", str(VECTORS / "valid-decision-record.json"), "--hmac-secret-env", "FIXTURE_HMAC"]
    modules = _imported(record, secret)
    assert "gate.protocol.collation_ascii" in modules and "gate.protocol.canonical" in modules
    assert "gate.protocol.collation" not in modules and "pyuca" not in modules
    tampered = subprocess.run([sys.executable, "-c", "import sys; from gate_cli.main import main; sys.exit(main())",
                               *record[:1], str(VECTORS / "tampered-record.json"), *record[2:]],
                              capture_output=True, text=True, cwd=ROOT, env={**os.environ, **secret}, timeout=120)
    assert tampered.returncode == 1 and "NOT VERIFIED" in tampered.stdout, tampered.stdout[-2000:]
