"""The published Rulebook v1 JSON Schema: bytes, hash, stability, and agreement with the contract."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema

from gate.rulebook import SCHEMA_PATH, contract, schema_bytes, schema_hash
from gate.vocabulary import VERDICTS

ROOT = Path(__file__).resolve().parents[2]


def _schema():
    return json.loads(schema_bytes())


def test_schema_bytes_are_the_file_bytes():
    assert SCHEMA_PATH == ROOT / "gate" / "schemas" / "rulebook-v1.schema.json"
    assert schema_bytes() == SCHEMA_PATH.read_bytes()
    assert schema_hash() == hashlib.sha256(SCHEMA_PATH.read_bytes()).hexdigest()
    assert len(schema_hash()) == 64 and schema_hash() == schema_hash().lower()


def test_schema_file_is_stable_pretty_json_ending_in_newline():
    text = schema_bytes().decode("utf-8")
    assert text.endswith("}\n") and not text.endswith("\n\n")
    assert json.dumps(json.loads(text), indent=2, ensure_ascii=False) + "\n" == text


def test_schema_is_draft_2020_12():
    schema = _schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "rulebook-v1.schema.json"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_schema_matches_the_contract_constants():
    schema = _schema()
    defs = schema["$defs"]
    assert tuple(schema["required"]) == contract.RULEBOOK_REQUIRED
    assert tuple(schema["properties"]) == contract.RULEBOOK_MEMBERS
    assert schema["properties"]["schema_version"]["const"] == contract.SCHEMA_VERSION
    assert tuple(defs["leaf"]["properties"]["operator"]["enum"]) == contract.OPERATORS
    assert set(defs["leaf"]["if"]["properties"]["operator"]["enum"]) == contract.VALUELESS_OPERATORS
    assert tuple(defs["outcome"]["properties"]["decision"]["enum"]) == VERDICTS
    assert tuple(defs["outcome"]["required"]) == contract.OUTCOME_MEMBERS
    assert tuple(defs["input_property"]["properties"]["type"]["enum"]) == contract.INPUT_TYPES
    assert set(defs["executable_key"]["enum"]) == contract.EXECUTABLE_KEYS
    assert tuple(defs["rule"]["properties"]) == contract.RULE_MEMBERS
    assert tuple(defs["rule"]["required"]) == contract.RULE_REQUIRED
    assert defs["identifier"]["pattern"] == "^" + contract.IDENTIFIER_RE.pattern + "$"
    assert defs["token"]["pattern"] == "^" + contract.TOKEN_RE.pattern + "$"
    assert defs["field_path"]["pattern"] == "^" + contract.FIELD_PATH_RE.pattern + "$"
    rules = schema["properties"]["rules"]
    assert (rules["minItems"], rules["maxItems"]) == (contract.MIN_RULES, contract.MAX_RULES)
    assert (defs["children"]["minItems"], defs["children"]["maxItems"]) == (contract.MIN_CHILDREN, contract.MAX_CHILDREN)
    priority = defs["rule"]["properties"]["priority"]
    assert (priority["minimum"], priority["maximum"]) == (contract.MIN_PRIORITY, contract.MAX_PRIORITY)
    assert schema["properties"]["version"]["maxLength"] == contract.MAX_VERSION_LENGTH
    assert defs["outcome"]["properties"]["action"]["maxLength"] == contract.MAX_ACTION_LENGTH


def test_limits_json_schema_cannot_express_are_documented():
    description = _schema()["description"]
    assert "256 condition nodes" in description
    assert "depth at most 8" in description
    assert "unique" in description


def test_schemas_dir_can_be_overridden(tmp_path):
    (tmp_path / "rulebook-v1.schema.json").write_bytes(b'{"x": 1}\n')
    code = "from gate.rulebook import schema_bytes, schema_hash, SCHEMA_PATH; print(SCHEMA_PATH); print(schema_hash())"
    env = dict(os.environ, GATE_SCHEMAS_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    path, digest = out.stdout.split()
    assert path == str(tmp_path / "rulebook-v1.schema.json")
    assert digest == hashlib.sha256(b'{"x": 1}\n').hexdigest()
