"""Rulebook v1: validation with exact error paths, compilation to a fast evaluator, evaluation.

Public interface (reference facts §2 is the contract):

- `validate_rulebook(obj, base_path="rulebook") -> list[dict]`: `[]` when valid, else
  `{field, code, message}` errors in a deterministic order.
- `checked_rulebook(obj) -> RulebookDocument`: the same check as a type guard (raises
  `gate.errors.RulebookInvalid` with those errors). The document's
  shape (`RulebookDocument`, `Rule`, `Condition`, `Outcome`, ...) is typed in `shapes`.
- `get_evaluator(rulebook, rulebook_hash) -> CompiledRulebook`: validates (raising
  `gate.errors.RulebookInvalid`), compiles once per hash, caches (bounded LRU, thread-safe);
  the result's `document` is the validated rulebook, typed.
- `CompiledRulebook.evaluate(facts) -> Evaluation`: pure, deterministic, never raises.
- `schema_bytes()`, `schema_hash()`, `SCHEMA_PATH`: the published JSON Schema file.
"""

from gate.protocol.evaluation import Evaluation
from gate.rulebook.cache import get_evaluator
from gate.rulebook.compile import CompiledRulebook
from gate.rulebook.schema import SCHEMA_PATH, schema_bytes, schema_hash
from gate.rulebook.shapes import Condition, Outcome, Rule, RulebookDocument
from gate.rulebook.validate import checked_rulebook, validate_rulebook

__all__ = [
    "SCHEMA_PATH",
    "CompiledRulebook",
    "Condition",
    "Evaluation",
    "Outcome",
    "Rule",
    "RulebookDocument",
    "checked_rulebook",
    "get_evaluator",
    "schema_bytes",
    "schema_hash",
    "validate_rulebook",
]
