"""Issue 66 item 3: `Permission` end to end. A right is the `Permission` literal from
`permissions_of` (and a key's parsed list) through every signature to `require` and a page's
`may`, so a misspelt right is a type error (mypy), and text from outside becomes one only through
the one parser, refused with its error."""

from __future__ import annotations

import ast
import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from mypy import api as mypy_api

from gate.keys.apikeys import parse_permissions
from gate.principals import PERMISSIONS, is_permission, permits
from tests.cli_in_process import gate_in_process

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("gate", "gate_client", "api", "gate_cli", "workbench")

SNIPPET = '''
from gate.principals import Permissions, permissions_of, permits, require
from workbench.app.access import Rights


def page(rights: Rights, roles: list[str]) -> None:
    held: Permissions = permissions_of(roles)
    rights.may("acme", "approve")
    require(held, "approve", "WORKBENCH_PERMISSION_DENIED")
    rights.may("acme", "aprove")  # refused
    require(held, "aprove", "WORKBENCH_PERMISSION_DENIED")  # refused
    permits(held, "relase")  # refused
    wide: frozenset[str] = frozenset({"approve"})
    require(wide, "approve", "WORKBENCH_PERMISSION_DENIED")  # refused: a set of any text is no set of rights
'''


def test_mypy_refuses_a_misspelt_permission_where_a_page_and_a_check_take_one(tmp_path):
    """Runs mypy (the project's strict config) on a snippet calling `Rights.may` and `require`:
    the misspelt rights and the set of plain text are errors, the right ones are not."""
    snippet = tmp_path / "snippet.py"
    text = textwrap.dedent(SNIPPET).lstrip("\n")
    snippet.write_text(text)
    refused = [number for number, line in enumerate(text.splitlines(), 1) if "# refused" in line]
    out, err, status = mypy_api.run([str(snippet), "--config-file", str(ROOT / "pyproject.toml"),
                                     "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"),
                                     "--no-error-summary", "--hide-error-context"])
    errors = sorted(int(line.split(":")[1]) for line in out.splitlines() if line.startswith(str(snippet)))
    assert status == 1, (out, err)
    assert len(refused) == 4 and errors == refused, out
    assert "aprove" in out and "relase" in out


def _parameters(tree: ast.AST) -> list[tuple[int, str, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
                if arg.annotation is not None:
                    out.append((arg.lineno, arg.arg, ast.unparse(arg.annotation)))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute | ast.Name):
            name = node.target.attr if isinstance(node.target, ast.Attribute) else node.target.id
            out.append((node.lineno, name, ast.unparse(node.annotation)))
    return out


def test_no_signature_takes_a_right_as_plain_text():
    """Every parameter and field named `permission` is a `Permission`, and `permissions` a set of
    them (`Permissions`), or the stored comma-separated text a key row holds (`str | None`, parsed
    by `parse_permissions` before anything checks it): never `str` or `frozenset[str]`."""
    allowed = {"permission": {"Permission"},
               "permissions": {"Permissions", "Collection[Permission]", "str | None", "str", "Any"}}
    wrong = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            for line, name, annotation in _parameters(ast.parse(path.read_text(encoding="utf-8"))):
                if name in allowed and annotation not in allowed[name]:
                    wrong.append(f"{path.relative_to(ROOT)}:{line}: {name}: {annotation}")
    assert wrong == []


def test_text_becomes_a_permission_only_when_it_is_one():
    assert all(is_permission(name) for name in PERMISSIONS)
    assert not any(is_permission(name) for name in ("aprove", "Approve", " approve", "", None, 1))
    assert permits(frozenset({"approve"}), "approve") and not permits(frozenset({"release"}), "approve")


@pytest.mark.parametrize(("text", "unknown"), [
    ("decide,aprove", "aprove"),
    # the workbench's own rights are no key's: a key is granted KEY_PERMISSIONS alone
    ("read,export", "export, read"),
])
def test_a_keys_list_naming_no_key_right_is_refused(text, unknown):
    with pytest.raises(ValueError) as caught:
        parse_permissions(text)
    assert str(caught.value).startswith(f"unknown permission(s) {unknown}; ")


def test_the_command_line_refuses_a_misspelt_permission_and_changes_nothing(gate_env):
    """Where a right is typed from outside (`gate keys create|grant --permissions`), a misspelt
    one is refused by the one parser, naming it, and no key is stored or widened."""
    def keys(*args: str) -> subprocess.CompletedProcess[str]:
        return gate_in_process(["keys", *args], env=gate_env)

    refused = keys("create", "--scope", "s1", "--permissions", "decide,aprove")
    assert refused.returncode != 0 and "unknown permission(s) aprove" in refused.stderr
    assert keys("list", "--json").stdout.strip() == "[]"
    made = keys("create", "--scope", "s1", "--permissions", "publish", "--json")
    assert made.returncode == 0, made.stderr
    key_id = json.loads(made.stdout)["key_id"]
    widened = keys("grant", key_id, "--permissions", "relase")
    assert widened.returncode != 0 and "unknown permission(s) relase" in widened.stderr
    listed = json.loads(keys("list", "--json").stdout)
    assert [(row["key_id"], row.get("permissions")) for row in listed] == [(key_id, "decide,publish")]
