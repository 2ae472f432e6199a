"""Adapter definitions: one Python source file, its manifest read statically, its hashes.

An adapter is a module with a literal ``MANIFEST = {...}`` and a function ``run(input) ->
dict``. The gate never imports adapter code into its own process: the manifest is read from
the source with `ast.literal_eval`, and the exact source bytes are what the worker compiles.

Hashes (bare lowercase sha256 hex, `json.sort_deep.v1` canonical JSON):

* ``implementation_hash`` = sha256 of the adapter's source file bytes, exactly as read;
* ``manifest_hash`` = sha256(canonical(manifest)) where the manifest is exactly
  ``{manifest_version, adapter_id, version, description, implementation_revision,
  implementation_hash, input_schema, output_schema}``. It covers the implementation hash, so
  any edit of the source changes the manifest hash a caller pins.

Manifest rules (refused with `AdapterDefinitionError` at registration):

* ``adapter_id`` matches ``^[a-z][a-z0-9_.:-]{1,119}$``; ``version`` is semver ``X.Y.Z``;
  ``implementation_revision`` and ``description`` are strings of 1–160 and 0–500 characters;
* ``input_schema`` and ``output_schema`` are JSON Schemas (draft 2020-12) of ``type: object``
  that are closed: every object schema in them has ``additionalProperties: false`` and
  ``properties``; the output's property names are disjoint from the input's (facts = input
  plus derived output, so no derived fact can overwrite an input);
* the module defines a top-level ``def run``. No other keys are allowed.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, TypedDict

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError

from gate import vocabulary as C
from gate.errors import CodedError
from gate.protocol.canonical import clone, sha256_hex
from gate.strict_json import JsonValue

ADAPTER_ID = re.compile(r"^[a-z][a-z0-9_.:-]{1,119}$")
SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
DECLARED_KEYS = ("adapter_id", "version", "implementation_revision", "description", "input_schema",
                 "output_schema")
MAX_FIELD_ERRORS = 32
# `format` is asserted (e.g. "date" must be a real calendar date), with jsonschema's own checkers,
# but for `iri` and `iri-reference`: jsonschema checks those only when an optional package is
# installed (and the command line does not load it: gate_cli/__init__.py), so an adapter's schema
# would read differently from one installation to another. They are annotations here.
_UNASSERTED_FORMATS = frozenset({"iri", "iri-reference"})
_FORMATS = FormatChecker(formats=())
_FORMATS.checkers = {name: check for name, check in Draft202012Validator.FORMAT_CHECKER.checkers.items()
                     if name not in _UNASSERTED_FORMATS}


class AdapterDefinitionError(CodedError, ValueError):
    """An adapter source or manifest the gate refuses to register (still a ValueError: a
    plugin's is logged with the other unreadable plugins)."""

    CODE = "TRUSTED_ADAPTER_DEFINITION_INVALID"


def read_manifest_literal(source: str, filename: str) -> dict[str, JsonValue]:
    """The literal `MANIFEST` of an adapter source, checking that `run` is defined (no execution)."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise AdapterDefinitionError(f"{filename}: not valid Python: {exc.msg}") from None
    manifest = None
    has_run = False
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "MANIFEST":
            try:
                manifest = ast.literal_eval(node.value)
            except ValueError:
                raise AdapterDefinitionError(f"{filename}: MANIFEST must be a literal") from None
        elif isinstance(node, ast.FunctionDef) and node.name == "run":
            has_run = True
    if not isinstance(manifest, dict):
        raise AdapterDefinitionError(f"{filename}: no literal MANIFEST dict")
    if not has_run:
        raise AdapterDefinitionError(f"{filename}: no top-level `def run(input)`")
    return manifest


def _closed(schema: Any, where: str) -> None:
    """Every object schema is closed (additionalProperties false, properties given)."""
    if isinstance(schema, dict):
        is_object = schema.get("type") == "object" or "properties" in schema
        if is_object and (schema.get("additionalProperties") is not False
                          or not isinstance(schema.get("properties"), dict)):
            raise AdapterDefinitionError(f"{where}: object schemas must set additionalProperties: false "
                                         "and list their properties")
        for key, value in schema.items():
            if key in ("properties", "$defs", "patternProperties"):
                if isinstance(value, dict):
                    for name, sub in value.items():
                        _closed(sub, f"{where}.{key}.{name}")
            elif isinstance(value, (dict, list)):
                _closed(value, f"{where}.{key}")
    elif isinstance(schema, list):
        for index, item in enumerate(schema):
            _closed(item, f"{where}[{index}]")


def _check_schema(schema: Any, where: str) -> None:
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise AdapterDefinitionError(f"{where} must be a JSON Schema of type object")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise AdapterDefinitionError(f"{where} is not a valid JSON Schema: {exc.message}") from None
    _closed(schema, where)
    sha256_hex(schema)  # canonical-JSON safe (no NaN, no unsafe integers)


class AdapterManifest(TypedDict):
    """The hashed manifest (`manifest_hash` is over exactly these members, see the module doc)."""

    manifest_version: str
    adapter_id: str
    version: str
    description: str
    implementation_revision: str
    implementation_hash: str
    input_schema: dict[str, JsonValue]  # JSON Schemas as the adapter declares them (checked closed)
    output_schema: dict[str, JsonValue]


def build_manifest(declared: dict[str, Any], implementation_hash: str) -> AdapterManifest:
    """The hashed manifest from the declared `MANIFEST` literal (validated)."""
    unknown = sorted(set(declared) - set(DECLARED_KEYS))
    if unknown:
        raise AdapterDefinitionError(f"MANIFEST has unknown keys: {', '.join(unknown)}")
    adapter_id = declared.get("adapter_id")
    if not isinstance(adapter_id, str) or not ADAPTER_ID.fullmatch(adapter_id):
        raise AdapterDefinitionError("MANIFEST.adapter_id must match ^[a-z][a-z0-9_.:-]{1,119}$")
    version = declared.get("version")
    if not isinstance(version, str) or not SEMVER.fullmatch(version):
        raise AdapterDefinitionError("MANIFEST.version must be semver X.Y.Z")
    revision = declared.get("implementation_revision")
    if not isinstance(revision, str) or not 1 <= len(revision) <= 160:
        raise AdapterDefinitionError("MANIFEST.implementation_revision must be a string of 1-160 characters")
    description = declared.get("description", "")
    if not isinstance(description, str) or len(description) > 500:
        raise AdapterDefinitionError("MANIFEST.description must be a string of at most 500 characters")
    _check_schema(declared.get("input_schema"), "MANIFEST.input_schema")
    _check_schema(declared.get("output_schema"), "MANIFEST.output_schema")
    overlap = set(declared["input_schema"]["properties"]) & set(declared["output_schema"]["properties"])
    if overlap:
        raise AdapterDefinitionError(f"output facts may not reuse input names: {', '.join(sorted(overlap))}")
    return {
        "manifest_version": C.ADAPTER_MANIFEST_VERSION,
        "adapter_id": adapter_id,
        "version": version,
        "description": description,
        "implementation_revision": revision,
        "implementation_hash": implementation_hash,
        "input_schema": clone(declared["input_schema"]),
        "output_schema": clone(declared["output_schema"]),
    }


def _field(prefix: str, path: list[Any]) -> str:
    text = prefix
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def schema_errors(validator: Draft202012Validator, value: Any, prefix: str) -> list[dict[str, str]]:
    """Per-field errors `{field, code, message}`, sorted by field, at most 32."""
    errors: list[dict[str, str]] = []
    for error in validator.iter_errors(value):
        path = list(error.absolute_path)
        if error.validator == "required":
            missing = [name for name in error.validator_value if isinstance(error.instance, dict)
                       and name not in error.instance]
            for name in missing:
                errors.append({"field": _field(prefix, path + [name]), "code": "missing_field",
                               "message": f"{name} is required"})
            continue
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = set(error.schema.get("properties", {}))
            for name in sorted(k for k in error.instance if k not in allowed):
                errors.append({"field": _field(prefix, path + [name]), "code": "unknown_field",
                               "message": f"{name} is not declared by the adapter's closed schema"})
            continue
        code = "invalid_type" if error.validator == "type" else "invalid_value"
        errors.append({"field": _field(prefix, path), "code": code, "message": error.message[:300]})
    errors.sort(key=lambda e: (e["field"], e["code"]))
    return errors[:MAX_FIELD_ERRORS]


@dataclass(frozen=True)
class RegisteredAdapter:
    """An adapter the gate can run: its source, manifest and hashes."""

    manifest: AdapterManifest
    manifest_hash: str
    source: str
    module_name: str
    filename: str
    origin: str  # builtin | plugin | registered
    input_validator: Draft202012Validator = field(repr=False, compare=False)
    output_validator: Draft202012Validator = field(repr=False, compare=False)

    @property
    def adapter_id(self) -> str:
        return self.manifest["adapter_id"]

    @property
    def version(self) -> str:
        return self.manifest["version"]

    @property
    def implementation_hash(self) -> str:
        return self.manifest["implementation_hash"]

    def dependency(self) -> dict[str, str]:
        """What a rulebook snapshot pins: `{adapter_id, version, manifest_hash}`."""
        return {"adapter_id": self.adapter_id, "version": self.version, "manifest_hash": self.manifest_hash}


def adapter_from_source(source_bytes: bytes, *, filename: str, module_name: str,
                        origin: str = "registered") -> RegisteredAdapter:
    """Validate an adapter's source and compute its manifest and hashes."""
    try:
        source = source_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise AdapterDefinitionError(f"{filename}: source is not UTF-8") from None
    declared = read_manifest_literal(source, filename)
    manifest = build_manifest(declared, hashlib.sha256(source_bytes).hexdigest())
    return RegisteredAdapter(
        manifest=manifest,
        manifest_hash=sha256_hex(manifest),
        source=source,
        module_name=module_name,
        filename=filename,
        origin=origin,
        input_validator=Draft202012Validator(manifest["input_schema"], format_checker=_FORMATS),
        output_validator=Draft202012Validator(manifest["output_schema"], format_checker=_FORMATS),
    )
