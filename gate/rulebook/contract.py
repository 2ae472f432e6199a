"""The Rulebook v1 contract in one place: members, operators, limits, patterns, error codes.

Everything here is fixed by reference facts §2; the validator, the compiler, the published
JSON Schema (`gate/schemas/rulebook-v1.schema.json`) and the tests all read these values, so a
change here is a contract change (a new evaluator version), never a refactor.
"""

from __future__ import annotations

import re

from gate.rulebook.operators import OPERATORS as DECLARED_OPERATORS
from gate.rulebook.operators import Operand
from gate.vocabulary import RULEBOOK_SCHEMA_VERSION, VERDICTS

SCHEMA_VERSION = RULEBOOK_SCHEMA_VERSION

# Members of each closed object, in the order the validator visits (and reports) them.
RULEBOOK_MEMBERS = ("schema_version", "rulebook_id", "version", "input_schema", "rules", "default_outcome")
RULEBOOK_REQUIRED = ("schema_version", "rulebook_id", "version", "rules", "default_outcome")
RULE_MEMBERS = ("rule_id", "priority", "condition", "outcome")
RULE_REQUIRED = ("rule_id", "condition", "outcome")
OUTCOME_MEMBERS = ("decision", "verdict", "action", "reason_code")
INPUT_SCHEMA_MEMBERS = ("required", "properties")
INPUT_PROPERTY_MEMBERS = ("type",)
LEAF_MEMBERS = ("field", "operator", "value")
COMBINATORS = ("all", "any", "not")
CONDITION_MEMBERS = COMBINATORS + LEAF_MEMBERS

# SECURITY: customer-supplied code is rejected (spec, "What the service does"). These keys are
# refused wherever a key can appear in a rulebook, even where a key is otherwise data
# (input_schema property names, objects inside `value`), so nothing resembling an executable
# payload is ever stored, hashed into a record or echoed back.
EXECUTABLE_KEYS = frozenset({"code", "handler", "function", "javascript", "script", "source", "wasm"})

# The leaf operators are declared, with their meaning, in gate.rulebook.operators (in the order
# of the schema's enum); their names, and those that take no value, as the validator reads them.
OPERATORS = tuple(operator.name for operator in DECLARED_OPERATORS)
VALUELESS_OPERATORS = frozenset(
    operator.name for operator in DECLARED_OPERATORS if operator.operand is Operand.NONE)

# An outcome's `decision` is one of gate.vocabulary.VERDICTS, named here for the rulebook's readers.
VERDICT_YES, VERDICT_NO, VERDICT_REVIEW = VERDICTS
NEEDS_INPUT_DECISION = VERDICT_REVIEW  # a needs_input evaluation holds for review
INPUT_TYPES = ("string", "number", "integer", "boolean", "array", "object", "null")

# Limits (reference facts §2).
MIN_RULES, MAX_RULES = 1, 100
MAX_CONDITION_NODES = 256
MAX_CONDITION_DEPTH = 8
MIN_CHILDREN, MAX_CHILDREN = 1, 32
MIN_PRIORITY, MAX_PRIORITY = -1000, 1000
MAX_VERSION_LENGTH = 80
MAX_ACTION_LENGTH = 160
# Our decisions (the reference states no bound): keep input_schema and error lists bounded.
MAX_INPUT_NAMES = 256
MAX_ERRORS = 256

# Patterns, always applied with fullmatch: `$` in Python would also accept a trailing "\n".
IDENTIFIER_RE = re.compile(r"[a-z][a-z0-9_.:-]{1,119}")
TOKEN_RE = re.compile(r"[A-Z][A-Z0-9_]{1,79}")
FIELD_PATH_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,159}")

# Error codes (reference facts §2, plus `missing_field` for absent required members).
UNKNOWN_FIELD = "unknown_field"
MISSING_FIELD = "missing_field"
INVALID_TYPE = "invalid_type"
INVALID_VALUE = "invalid_value"
UNSUPPORTED_OPERATOR = "unsupported_operator"
INVALID_CONDITION = "invalid_condition"
TOO_COMPLEX = "too_complex"
TOO_DEEP = "too_deep"
DUPLICATE_VALUE = "duplicate_value"
UNSUPPORTED_VERSION = "unsupported_version"
SCHEMA_VIOLATION = "schema_violation"

ERROR_CODES = (
    UNKNOWN_FIELD,
    MISSING_FIELD,
    INVALID_TYPE,
    INVALID_VALUE,
    UNSUPPORTED_OPERATOR,
    INVALID_CONDITION,
    TOO_COMPLEX,
    TOO_DEEP,
    DUPLICATE_VALUE,
    UNSUPPORTED_VERSION,
    SCHEMA_VIOLATION,
)
