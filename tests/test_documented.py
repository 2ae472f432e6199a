"""Every refusal code and every setting is documented: a code any refusal names (the HTTP table,
a refusal class's CODE, a literal code a refusal or gate.principals.require is given) and a GATE_*
variable product code reads appear, as words, in docs/*.md or the README."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from api.errors import ERROR_TABLE
from tests.test_error_hierarchy import NEVER_HTTP, PACKAGES, _class_codes, _literal_codes

ROOT = Path(__file__).resolve().parent.parent
SETTING = re.compile(r"GATE_[A-Z0-9_]+")
# Literals that look like a setting and are not one, each with what it is.
NOT_SETTINGS = {"GATE_EVENTS": "the JetStream stream's name (gate.settings.DEFAULT_NATS_STREAM)"}


def _documented_words() -> set[str]:
    texts = [path.read_text(encoding="utf-8") for path in sorted((ROOT / "docs").glob("*.md"))]
    texts.append((ROOT / "README.md").read_text(encoding="utf-8"))
    return set(re.findall(r"[A-Z][A-Z0-9_]+", "\n".join(texts)))


def _codes() -> set[str]:
    return set(ERROR_TABLE) | set(NEVER_HTTP) | set(_class_codes()) | set(_literal_codes())


def _settings() -> set[str]:
    """Every GATE_* name product code spells as a whole string (os.environ, the settings table)."""
    names = set()
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and SETTING.fullmatch(node.value):
                    names.add(node.value)
    return names - set(NOT_SETTINGS)


def test_the_scans_find_codes_and_settings():
    assert {"HOLD_PERMISSION_DENIED", "CLI_REFUSED", "RULEBOOK_INVALID", "SVC_API_UNAUTHORIZED"} <= _codes()
    assert {"GATE_DATABASE_URL", "GATE_WEBHOOK_ALLOW_HOSTS", "GATE_API_KEY"} <= _settings()
    assert set(NOT_SETTINGS) & _settings() == set()


def test_every_refusal_code_is_documented():
    missing = sorted(_codes() - _documented_words())
    assert missing == [], "document each in docs/*.md where its area's codes are (docs/errors.md for the rest)"


def test_every_setting_is_documented():
    missing = sorted(_settings() - _documented_words())
    assert missing == [], "document each GATE_* variable (docs/operating.md)"
