"""The draft rulebook of a dry-run: read, validated with exact paths, hashed, compiled twice.

The draft is compiled for both engines: to Polars expressions (`workbench.engines.rulebook_polars`)
for the typed rows, and to the scalar evaluator (`gate.rulebook`) for the rows the typed columns
cannot hold exactly. Both use the evaluator's own rule order (`gate.rulebook.compile.rule_order`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gate.errors import RulebookInvalid
from gate.protocol.canonical import CanonicalJSONError, parse_strict, sha256_hex
from gate.rulebook import CompiledRulebook, RulebookDocument, checked_rulebook, get_evaluator
from gate.rulebook.compile import rule_order
from workbench.engines.rulebook_polars import CompiledPolarsRulebook, compile_rulebook
from workbench.migration.errors import DryRunError

__all__ = ["Draft", "load_draft", "read_draft_file"]


@dataclass(frozen=True)
class Draft:
    rulebook: RulebookDocument
    rulebook_hash: str  # sha256(canon(draft)), as a record would name it
    order: tuple[str, ...]  # rule ids in evaluation order
    polars: CompiledPolarsRulebook
    scalar: CompiledRulebook


def read_draft_file(path: str | Path) -> Any:
    """The JSON in a draft file (DryRunError DRAFT_UNREADABLE when it is not readable JSON)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DryRunError("DRAFT_UNREADABLE", f"cannot read draft {path}: {exc}") from exc
    try:
        return parse_strict(text)
    except (CanonicalJSONError, json.JSONDecodeError, ValueError) as exc:
        raise DryRunError("DRAFT_UNREADABLE", f"draft {path} is not valid JSON: {exc}") from exc


def load_draft(draft: object, rulebook_id: str) -> Draft:
    """Validate a draft of `rulebook_id` and compile it (DryRunError on any problem)."""
    try:
        rulebook = checked_rulebook(draft)
    except RulebookInvalid as exc:
        errors = exc.errors
        raise DryRunError("DRAFT_INVALID", f"the draft is not a valid Rulebook v1 ({len(errors)} errors)",
                          errors) from None
    if rulebook["rulebook_id"] != rulebook_id:
        raise DryRunError("DRAFT_RULEBOOK_MISMATCH",
                          f"the draft is of rulebook {rulebook['rulebook_id']!r}, not {rulebook_id!r}")
    digest = sha256_hex(rulebook)
    order = tuple(rule["rule_id"] for rule in rule_order(rulebook["rules"]))
    return Draft(rulebook, digest, order, compile_rulebook(rulebook, order), get_evaluator(rulebook, digest))
