"""The request bodies and event payloads, each declared once as a JSON Schema (issue 54, item 2).

Each `<name>.schema.json` beside this module is package data, read with `importlib.resources`
(so an installed wheel finds it). The boundary validates a body with `check(name, body, code)`:
one cached `jsonschema` validator per schema, the first failure in the schema's own order (a
schema lists `type`, `required`, `additionalProperties` and then `properties`, so the refusal
names the first thing wrong, as the hand-written checks did), and a bounded message. `api.openapi`
imports the same schemas (`openapi_schema`), so the document cannot restate them.

The refusal's message: a schema node may carry `x-refusal`, the sentence that ends the message
when anything inside that node fails (or an object of sentences by failing keyword, `*` for the
rest); the message begins with where the node is in the body (`queues.default.quorum`,
`routes[1].priority`). A required member that is missing, where its object has no sentence for
`required`, is refused with the member's own sentence (as a wrong value would be). A failure under no `x-refusal` says
`jsonschema`'s own words, cut to `MAX_MESSAGE` characters (it may quote the caller's value).
What a schema cannot say (a member naming another, a cycle, a rule across members) stays in the
code that parses the body, after `check`.

A refusal whose body lists `errors` (`[{field, code, message}]`, as the verification routes'
do) takes them from `x-error` beside the `x-refusal` that answers (the same keys: one item, or
an object of items by failing keyword): `field` defaults to where the node is (`$` at the top),
and `"field": "*unknown"` lists one item per member the node does not know; `{unknown}` in the
refusal's sentence is those members, comma-separated, and `{allowed}` in a sentence or an item's
message the members the node declares (issue 66, item 1).

A pattern may hold placeholders for what the running interpreter's own text rules are (so the
schema and the code that reads the value cannot drift): `\\u0000unprintable\\u0000` is the contents
of a character class of every code point `str.isprintable` refuses, `\\u0000space\\u0000` of every
one `str.strip` removes, and a whole pattern `\\u0000printable-run\\u0000` is a run of printable
characters. The validator reads them resolved (`resolved`), and so does the served document;
building the first class takes about a fifth of a second, so it is built when first needed.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast

from gate.errors import GateError

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

MAX_MESSAGE = 300
_ANNOTATIONS = ("x-refusal", "x-error", "$schema", "$id", "$comment")
# Keywords whose sub-schema applies to one member or item of the instance.
_BY_NAME = ("properties", "patternProperties")
_BY_POSITION = ("additionalProperties", "items", "unevaluatedProperties", "unevaluatedItems")
# Keywords whose sub-schema(s) apply to the instance itself.
_LISTED = ("allOf", "anyOf", "oneOf", "dependentSchemas")
_IN_PLACE = ("if", "then", "else", "not", "propertyNames")




class ErrorItem(TypedDict):
    """One problem of a body, as a refusal's `errors` lists it."""

    field: str
    code: str
    message: str


def _whole_number(_checker: Any, instance: Any) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


@cache
def _ecma(pattern: str) -> re.Pattern[str]:
    """A pattern as ECMA-262 reads it, the dialect JSON Schema names: a final `$` is the end of the
    text, where Python's `$` also matches before a final line break ("default\\n" is no name)."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + "\\Z"
    return re.compile(pattern)


def _pattern(validator: Any, pattern: str, instance: Any, _schema: Any) -> Iterator[ValidationError]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _ecma(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _Validator(document: Mapping[str, Any]) -> Validator:  # a validator of the class built once
    return _validator_class()(document)


PRINTABLE_RUN = "\x00printable-run\x00"  # a whole pattern: 0 or more printable characters
_UNPRINTABLE, _SPACE = "\x00unprintable\x00", "\x00space\x00"


def _escape(code: int) -> str:
    return f"\\u{code:04x}" if code <= 0xFFFF else chr(code)


def _class_of(test: Callable[[str], bool]) -> str:
    """The contents of a character class of every code point `test` takes, as ranges in order
    (surrogates left out: they cannot occur in decoded JSON text or a URL)."""
    ranges: list[list[int]] = []
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF or not test(chr(code)):
            continue
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    return "".join(_escape(low) if low == high else f"{_escape(low)}-{_escape(high)}" for low, high in ranges)


@cache
def unprintable_class() -> str:
    """The contents of a class of every code point `str.isprintable` refuses."""
    return _class_of(lambda char: not char.isprintable())


@cache
def _space_class() -> str:
    return _class_of(str.isspace)  # what `str.strip()` removes: `re`'s own `\\s`, by code point


_Shape = TypeVar("_Shape")


def resolved(value: _Shape) -> _Shape:
    """`value` (a schema or a document) with every placeholder replaced (see the module's
    docstring): the same shape; a value with none is answered as it is."""
    return cast(_Shape, _resolved(value))


def _resolved(value: object) -> object:
    if isinstance(value, str):
        if value == PRINTABLE_RUN:
            return f"^[^{unprintable_class()}]*$"
        if "\x00" in value:
            value = value.replace(_UNPRINTABLE, unprintable_class()) if _UNPRINTABLE in value else value
            return value.replace(_SPACE, _space_class()) if _SPACE in value else value
        return value
    if isinstance(value, Mapping):
        return {key: _resolved(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolved(item) for item in value]
    return value


@cache
def _validator_class() -> Any:
    """Draft 2020-12 with ECMA patterns and whole-number integers. `jsonschema` is imported here,
    when a body is first validated, never by a process that only reads a schema (`gate holds list`
    reads a limit from one: issue 68, item 5)."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend

    # `integer` is a JSON number written without a fraction: 60.0 is refused, as the hand-written
    # checks refused it (`type(value) is int`), where JSON Schema alone would take it.
    return extend(Draft202012Validator, validators={"pattern": _pattern},
                  type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _whole_number))


@cache
def schema(name: str) -> Mapping[str, Any]:
    """The schema `<name>.schema.json` of this package, one of its `$defs` (`<name>#<definition>`,
    a body a route tells apart before checking it: it refers to nothing outside itself), or the
    composition a `+` names (`composed`): read once; never mutate it."""
    if "#" in name:
        file, _, definition = name.partition("#")
        node: Mapping[str, Any] = schema(file)["$defs"][definition]
        return node
    text = _composition(name) if "+" in name else \
        resources.files(__package__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def composed(base: str, source: str, members: Sequence[str]) -> str:
    """The name of `<base>` with `members` of `<source>` added, for `schema`, `validator`, `check`
    and `problems`: a body made of one schema's members and a few of another's, each member
    stated once in its own file (a workflow's body is its check's arguments and the workflow's
    `ticket_id`)."""
    return f"{base}+{source}.{','.join(members)}"


def _composition(name: str) -> str:
    """`<base>+<source>.<member>,…` as JSON text: `<base>`'s schema with the named members of
    `<source>`'s top level added after its own (each required where `<source>` requires it, so
    `problems` lists them after `<base>`'s), and `<source>`'s top-level `x-refusal` and `x-error`
    entries in place of `<base>`'s for the same failing keyword (both must state them by keyword).
    A member `<base>` already has, or one `<source>` lacks, is a programming error (ValueError)."""
    base_name, _, added = name.partition("+")
    source_name, _, listed = added.partition(".")
    base, source, members = schema(base_name), schema(source_name), listed.split(",")
    known, offered = base.get("properties", {}), source.get("properties", {})
    if not all(member and member not in known and member in offered for member in members):
        raise ValueError(f"{name}: each added member must be new to {base_name} and stated by {source_name}")
    document = {key: value for key, value in base.items() if key not in ("$id", "title", "description")}
    document["properties"] = {**known, **{member: offered[member] for member in members}}
    document["required"] = [*base.get("required", ()),
                            *(member for member in members if member in source.get("required", ()))]
    for annotation in ("x-refusal", "x-error"):
        parts = [part for part in (base.get(annotation), source.get(annotation)) if part is not None]
        if any(not isinstance(part, Mapping) or "code" in part for part in parts):
            raise ValueError(f"{name}: a composed schema's top-level {annotation} must be stated by keyword")
        if parts:
            document[annotation] = {keyword: stated for part in parts for keyword, stated in part.items()}
    return json.dumps(document)


@cache
def validator(name: str) -> Validator:
    """The cached validator of `<name>` (the schema itself is checked against the metaschema once)."""
    from jsonschema import Draft202012Validator

    document = resolved(schema(name))  # its patterns' placeholders, as this interpreter reads text
    Draft202012Validator.check_schema(document)
    return _Validator(document)


EVENT_DATA = "event-data"  # event-data.schema.json: one schema per event type, in its $defs


@cache
def _event_node(event_type: str) -> Mapping[str, Any]:
    """One event type's `data` schema (KeyError: no schema for this type). The shared member set
    a type refers to is inlined once here, so a check resolves no reference."""
    definitions = schema(EVENT_DATA)["$defs"]
    if "." not in event_type:
        raise KeyError(event_type)
    node = dict(definitions[event_type])
    validator(EVENT_DATA)  # the whole document is checked against the metaschema once
    reference = node.pop("$ref", None)
    if reference is not None:
        shared = definitions[reference.rsplit("/", 1)[1]]
        node.pop("unevaluatedProperties", None)
        node = {**shared, **node, "required": [*shared["required"], *node.get("required", [])],
                "properties": {**shared["properties"], **node.get("properties", {})}, "additionalProperties": False}
    return node


@cache
def event_validator(event_type: str) -> Validator:
    """The cached validator of one event type's `data` (KeyError: no schema for this type)."""
    return _Validator(_event_node(event_type))


# What a quick check knows of a member's type: exactly the values the validator's type checker
# takes, or fewer (a number, an integer: never quick; the validator decides).
# Each as the Python types whose instances it takes, so a member's check is one `isinstance`.
_QUICK_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "object": (dict,), "array": (list,), "boolean": (bool,), "null": (type(None),),
}


def _quick_member(node: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    """A check of one member's `type` (or `enum` of strings), None for any other keyword."""
    if not set(node) <= {"type", "enum", "description"} or not ("type" in node) ^ ("enum" in node):
        return None
    if "enum" in node:
        allowed = frozenset(node["enum"])
        strings = all(isinstance(value, str) for value in allowed)
        return (lambda value: isinstance(value, str) and value in allowed) if strings else None
    kinds = [node["type"]] if isinstance(node["type"], str) else list(node["type"])
    if not all(kind in _QUICK_TYPES for kind in kinds):
        return None
    types = tuple(python_type for kind in kinds for python_type in _QUICK_TYPES[kind])
    return lambda value: isinstance(value, types)


@cache
def quick_event_check(event_type: str) -> Callable[[Any], bool] | None:
    """A plain-Python acceptance of `event_type`'s data where its schema is a closed object of
    typed members (the decide's announcements, `decision.created` and `hold.opened`): True
    only for data the validator finds no error in (False: the validator decides, and names the
    error). None where the schema says more than that. The validator's walk cost about 120 µs
    of the writer's time per event; this check a few."""
    node = _event_node(event_type)
    if not set(node) <= {"type", "required", "properties", "additionalProperties", "description"} \
            or node.get("type") != "object" or node.get("additionalProperties") is not False:
        return None
    members = {name: _quick_member(member) for name, member in node.get("properties", {}).items()}
    if any(check is None for check in members.values()):
        return None
    required = tuple(node.get("required", ()))
    checks = cast(dict[str, Callable[[Any], bool]], members)

    def accepts(data: Any) -> bool:  # loops, not generators: 2 µs where they took 11 (writer thread)
        if not isinstance(data, dict):
            return False
        for name in required:
            if name not in data:
                return False
        for name, value in data.items():
            check = checks.get(name)
            if check is None or not check(value):
                return False
        return True
    return accepts


def event_types() -> tuple[str, ...]:
    """The event types `event-data.schema.json` declares (its `$defs` whose names have a dot)."""
    return tuple(name for name in schema(EVENT_DATA)["$defs"] if "." in name)


def check_event_data(event_type: str, data: Any) -> None:
    """Raise `EventDataInvalid` unless `data` is what `event_type`'s schema declares: an event
    the code builds wrong is a bug, never written (docs/events.md, "Format")."""
    quick = quick_event_check(event_type)
    if quick is not None and quick(data):
        return
    error = next(event_validator(event_type).iter_errors(data), None)
    if error is not None:
        raise EventDataInvalid(f"{event_type} data does not match its schema: {plain_message(error)}")


class EventDataInvalid(ValueError):
    """An event's `data` does not match its type's schema (a programming error, not a refusal)."""


def closed_members(name: str, body: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The members of `body` that `<name>`'s top level does not know (sorted), and those it
    requires that `body` lacks (in the schema's order): for a refusal that names them all."""
    document = schema(name)
    known = document.get("properties", {})
    unknown = sorted(str(member) for member in body if member not in known)
    return unknown, [member for member in document.get("required", ()) if member not in body]


def openapi_schema(name: str) -> dict[str, Any]:
    """The schema as an OpenAPI 3.1 component (named by its `title`): the same rules, without the
    annotations that only the validator reads; a reference to its own `$defs` points into the
    component, since the document, not the schema, is the root a `#` reference names there."""
    document = schema(name)
    stripped: dict[str, Any] = _strip(document, f"#/components/schemas/{document['title']}/$defs/")
    return stripped


def _strip(node: Any, definitions: str) -> Any:
    if isinstance(node, dict):
        return {key: (definitions + value.removeprefix("#/$defs/") if key == "$ref" and value.startswith("#/$defs/")
                      else _strip(value, definitions)) for key, value in node.items() if key not in _ANNOTATIONS}
    if isinstance(node, list):
        return [_strip(value, definitions) for value in node]
    return node


def first_error(name: str, body: Any) -> ValidationError | None:
    """The first way `body` fails `<name>`, in the schema's order (None: it passes)."""
    return next(validator(name).iter_errors(body), None)


def check(name: str, body: Any, code: str) -> None:
    """Refuse `body` with `code` (a GateError, 400 or as the code says) unless it passes `<name>`."""
    error = first_error(name, body)
    if error is not None:
        items = error_items(name, error)
        raise GateError(code, refusal(name, error), **({"errors": items} if items else {}))


def error_items(name: str, error: ValidationError) -> list[ErrorItem]:
    """The `errors` items the answering node's `x-error` states for this failure ([]: none)."""
    node, where, keyword = _answering_node(schema(name), error)
    return _stated_items(node, where, keyword, error.instance)


def _stated_items(node: Any, where: Sequence[Any], keyword: str, instance: Any) -> list[ErrorItem]:
    """The items `node`'s `x-error` states for a failing `keyword` ([]: none)."""
    item = _keyed(node.get("x-error") if isinstance(node, Mapping) else None, keyword)
    if not isinstance(item, Mapping):
        return []
    message = _with_allowed(node, item["message"])
    if item.get("field") == "*unknown":
        return [{"field": member, "code": item["code"], "message": message} for member in _unknown(node, instance)]
    return [{"field": item.get("field") or path_text(where) or "$", "code": item["code"], "message": message}]


def _with_allowed(node: Mapping[str, Any], text: str) -> str:
    """`text` with `{allowed}` replaced by the members `node` declares, comma-separated, so a
    composed schema's refusal names the members it added too."""
    return text.replace("{allowed}", ", ".join(node.get("properties", {}))) if "{allowed}" in text else text


def problems(name: str, body: Any) -> list[ErrorItem]:
    """Every problem of `body` against `<name>`, one item per member ([]: it passes), for a refusal
    that names them all at once (the policy checks' arguments): each failure's item is its node's
    `x-error` (a missing member's is its own node's, by `required`); the members the body's top
    level does not know come first (sorted), then the declared members in the schema's order, each
    once (its first failure), and a body that is not an object is its top level's one item. A
    failure whose node states no `x-error` is still an item (`invalid_value`, `jsonschema`'s words):
    a failing body is never answered with no problem."""
    document, found = schema(name), dict[str, ErrorItem]()
    for error in validator(name).iter_errors(body):
        items = _items_of(name, error, body) or [
            {"field": path_text(error.absolute_path) or "$", "code": "invalid_value", "message": plain_message(error)}]
        for item in items:
            found.setdefault(item["field"], item)
    order = {member: rank for rank, member in enumerate(document.get("properties", {}))}
    return sorted(found.values(), key=lambda item: (item["field"] in order, order.get(item["field"], 0),
                                                    item["field"]))


def _items_of(name: str, error: ValidationError, body: Any) -> list[ErrorItem]:
    """The items of one failure: a `required` failure at the top, one per member missing, each
    answered by its own node as `check` answers the first (`_answering_node`)."""
    if error.validator == "required" and not error.absolute_path and isinstance(body, Mapping):
        members = schema(name).get("properties", {})
        return [item for member in error.validator_value if member not in body
                for item in _stated_items(members.get(member, {}), [member], "required", None)]
    return error_items(name, error)


def _unknown(node: Mapping[str, Any], instance: Any) -> list[str]:
    """The members of `instance` that `node` does not know, sorted."""
    known = node.get("properties", {})
    return sorted(str(member) for member in instance if member not in known) if isinstance(instance, Mapping) else []


def checked(name: str, body: Any, code: str) -> Mapping[str, Any]:
    """`check`, then the body as the object every body schema here declares."""
    check(name, body, code)
    if not isinstance(body, Mapping):
        raise TypeError(f"{name}.schema.json passed a body that is not an object")
    return body


def refusal(name: str, error: ValidationError) -> str:
    """The bounded message of one failure (see the module's docstring)."""
    sentence, where = _nearest_refusal(schema(name), error)
    if sentence is None:
        return plain_message(error)
    if "{unknown}" in sentence or "{allowed}" in sentence:
        node, _where, _keyword = _answering_node(schema(name), error)
        sentence = _with_allowed(node, sentence.replace("{unknown}", ", ".join(_unknown(node, error.instance))[:MAX_MESSAGE]))
    if not where:
        return sentence.lstrip(": ")
    return f"{path_text(where)}{sentence}" if sentence.startswith(":") else f"{path_text(where)} {sentence}"


def plain_message(error: ValidationError) -> str:
    """`jsonschema`'s own words with where they apply, cut to `MAX_MESSAGE` characters."""
    place = path_text(error.absolute_path)
    text = f"{place}: {error.message}" if place else error.message
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 1] + "…"


def _nearest_refusal(root: Mapping[str, Any], error: ValidationError) -> tuple[str | None, list[Any]]:
    """The refusal's sentence and where its node is (see `_answering_node`)."""
    node, where, keyword = _answering_node(root, error)
    return _sentence(node, keyword), where


def _answering_node(root: Mapping[str, Any], error: ValidationError) -> tuple[Any, list[Any], str]:
    """Walk the failing keyword's schema path from the root, keeping the deepest node with an
    `x-refusal`, the instance path of that node and the key its refusal answers by (the failing
    keyword at the failing node itself, else `*`); a missing member with no refusal of its node
    for `required` answers with the member's own node, by `required` (its `*` when it states none)."""
    node: Any = root
    instance = list(error.absolute_path)
    depth = 0
    found: tuple[Any, list[Any], str] = (root, [], "*")
    steps = list(error.absolute_schema_path)[:-1]  # the last step is the failing keyword itself
    while steps and isinstance(node, Mapping):
        keyword = steps.pop(0)
        if keyword in _BY_NAME and steps and steps[0] in node.get(keyword, {}):
            node = node[keyword][steps.pop(0)]
            depth += 1
        elif keyword in _BY_POSITION and isinstance(node.get(keyword), Mapping) and depth < len(instance):
            node = node[keyword]
            depth += 1
        elif keyword in _LISTED and steps and keyword in node:
            node = node[keyword][steps.pop(0)]
        elif keyword in _IN_PLACE and keyword in node:
            node = node[keyword]
        else:
            break
        if _sentence(node, "*") is not None:
            found = (node, instance[:depth], "*")
    if not isinstance(node, Mapping):
        return found
    if _sentence(node, str(error.validator)) is not None:
        return node, instance[:depth], str(error.validator)
    if error.validator == "required" and isinstance(error.instance, Mapping):
        missing = next(name for name in error.validator_value if name not in error.instance)
        member = node.get("properties", {}).get(missing, {})
        if _sentence(member, "*") is not None:
            return member, [*instance[:depth], missing], "required"  # its `*` when it states no `required`
    return found


def _sentence(node: Any, keyword: str) -> str | None:
    """A node's refusal for a failing `keyword` (`*`: anything under it): `x-refusal` is one
    sentence for every failure, or an object of sentences by keyword with `*` for the rest."""
    chosen = _keyed(node.get("x-refusal") if isinstance(node, Mapping) else None, keyword)
    return chosen if isinstance(chosen, str) else None


def _keyed(annotation: Any, keyword: str) -> Any:
    """An `x-refusal` or `x-error` for a failing `keyword`: the annotation itself when it is one
    value for every failure, else its entry for the keyword, or for `*`. An `x-error` item is an
    object with `code`; an object without one is an object of items by keyword."""
    if isinstance(annotation, Mapping) and "code" not in annotation:
        return annotation.get(keyword, annotation.get("*"))
    return annotation


def path_text(path: Sequence[Any]) -> str:
    """`queues.default.quorum`, `routes[1].priority`: where a member is in a body."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


__all__ = [
    "EVENT_DATA",
    "MAX_MESSAGE",
    "PRINTABLE_RUN",
    "ErrorItem",
    "EventDataInvalid",
    "check",
    "check_event_data",
    "checked",
    "closed_members",
    "composed",
    "error_items",
    "event_types",
    "event_validator",
    "first_error",
    "openapi_schema",
    "path_text",
    "plain_message",
    "problems",
    "quick_event_check",
    "refusal",
    "resolved",
    "schema",
    "unprintable_class",
    "validator",
]
