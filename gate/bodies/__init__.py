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

A node may state `x-error` alone (no `x-refusal`): the receipts' bodies name every problem and
never one sentence. `{field}` in an item's message is the item's field. A member may name a shared
kind of value in its file's `$defs` by `$ref` (its own keywords over it); the walks here follow
it where `jsonschema`'s paths leave it out. `problems` names every problem of a body in the
body's order, at every depth (see there), and `read` gives a passed body as its schema reads it.
Beyond draft 2020-12 the validator reads: `x-js-max-length` (text, trimmed as JavaScript trims
it, of at most that many UTF-16 code units: how the reference counts a receipt's text, in
`gate.bodies.text`), `x-utf16-max-length` (the same count of text as sent: a map's keys), the
format `gate-http-url` (text blank once trimmed, or an absolute URL with a host and a valid port,
as `urllib.parse.urlsplit` reads it), `integer` as a number written without a fraction, and
`number` as a JSON number (finite: NaN and Infinity are none).

A pattern may hold placeholders for what the running interpreter's own text rules are (so the
schema and the code that reads the value cannot drift): `\\u0000unprintable\\u0000` is the contents
of a character class of every code point `str.isprintable` refuses, `\\u0000space\\u0000` of every
one `str.strip` removes, and a whole pattern `\\u0000printable-run\\u0000` is a run of printable
characters. The validator reads them resolved (`resolved`), and so does the served document;
building the first class takes about a fifth of a second, so it is built when first needed.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, NamedTuple, TypedDict, TypeVar, cast
from urllib.parse import urlsplit

from gate.bodies.text import js_trim, utf16_length
from gate.errors import GateError, Signal
from gate.strict_json import JsonValue

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


# The text limits beyond draft 2020-12, by keyword: how the text is read before its UTF-16 code
# units are counted (trimmed as JavaScript trims it: how the reference counts a receipt's text;
# or as sent: a key, which is never trimmed). The validator and the quick check both read them here.
_TEXT_LIMITS: dict[str, Callable[[str], str]] = {"x-js-max-length": js_trim, "x-utf16-max-length": str}


def _within(read: Callable[[str], str], limit: int, instance: Any) -> bool:
    return not isinstance(instance, str) or utf16_length(read(instance)) <= limit


def _text_limit(keyword: str) -> Callable[[Any, int, Any, Any], Iterator[ValidationError]]:
    """The validator's check of one of `_TEXT_LIMITS`."""
    read = _TEXT_LIMITS[keyword]

    def check(_validator: Any, limit: int, instance: Any, _schema: Any) -> Iterator[ValidationError]:
        from jsonschema.exceptions import ValidationError

        if not _within(read, limit, instance):
            yield ValidationError(f"longer than {limit} UTF-16 code units ({keyword})")
    return check


def _finite_number(_checker: Any, instance: Any) -> bool:
    """A JSON number: JSON has no NaN or Infinity, so neither is one (a caller in process could
    pass them; the parser of a request's text refuses them first)."""
    return isinstance(instance, int | float) and not isinstance(instance, bool) and math.isfinite(instance)


_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f]")


def _http_url(instance: object) -> bool:
    """`gate-http-url`: text that, trimmed, is blank or an absolute URL with a host, a valid port
    and no white space or control character (its scheme is its node's `pattern`)."""
    text = js_trim(instance) if isinstance(instance, str) else ""
    if not text:
        return True
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        return False
    return bool(parts.hostname) and not _SPACE_OR_CONTROL.search(text)


# The formats a body schema may name, each asserted (any other name is an annotation only).
HTTP_URL_FORMAT = "gate-http-url"
_FORMATS: dict[str, Callable[[object], bool]] = {HTTP_URL_FORMAT: _http_url}


def _Validator(document: Mapping[str, Any], listing: bool = False) -> Validator:  # of the class built once
    from jsonschema import FormatChecker

    checker = FormatChecker(formats=())
    for name, test in _FORMATS.items():
        checker.checks(name)(test)
    return _validator_class(listing)(document, format_checker=checker)


# What `problems` never looks inside: a container over its own count limit is named whole and
# hides what is inside it, so its members are not walked at all (a receipt's 40,000 blank
# evidence references, 160 KB, took 6.3 s to walk one by one and gave one item; now 5 ms). keyword → (the limit
# beside it, the container's Python type).
_Container = type[dict[Any, Any]] | type[list[Any]]
_INSIDE: dict[str, tuple[str, _Container]] = {
    "items": ("maxItems", list), "properties": ("maxProperties", dict),
    "additionalProperties": ("maxProperties", dict), "propertyNames": ("maxProperties", dict),
}


def _unless_over(walk: Callable[..., Iterator[ValidationError]], limit_keyword: str,
                 kind: _Container) -> Callable[..., Iterator[ValidationError]]:
    def check(validator: Any, value: Any, instance: Any, node: Any) -> Iterator[ValidationError]:
        limit = node.get(limit_keyword) if isinstance(node, Mapping) else None
        if isinstance(instance, kind) and isinstance(limit, int) and len(instance) > limit:
            return
        yield from walk(validator, value, instance, node)
    return check


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
def _validator_class(listing: bool = False) -> Any:
    """Draft 2020-12 with ECMA patterns and whole-number integers; `listing`: the one `problems`
    walks, which does not look inside a container over its own count limit (`_INSIDE`).
    `jsonschema` is imported here, when a body is first validated, never by a process that only
    reads a schema (`gate holds list` reads a limit from one: issue 68, item 5)."""
    from jsonschema import Draft202012Validator
    from jsonschema.validators import extend

    # `integer` is a JSON number written without a fraction: 60.0 is refused, as the hand-written
    # checks refused it (`type(value) is int`), where JSON Schema alone would take it.
    # `number` is a JSON number: NaN and Infinity are none. The text limits: `_TEXT_LIMITS`.
    types = Draft202012Validator.TYPE_CHECKER.redefine_many({"integer": _whole_number, "number": _finite_number})
    keywords = {"pattern": _pattern, **{keyword: _text_limit(keyword) for keyword in _TEXT_LIMITS}}
    if listing:
        keywords |= {keyword: _unless_over(Draft202012Validator.VALIDATORS[keyword], *limit)
                     for keyword, limit in _INSIDE.items()}
    return extend(Draft202012Validator, validators=keywords, type_checker=types)


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
def validator(name: str, listing: bool = False) -> Validator:
    """The cached validator of `<name>` (the schema itself is checked against the metaschema once);
    `listing`: the one `problems` walks (`_validator_class`)."""
    _check_schema(name)
    return _Validator(resolved(schema(name)), listing)  # its placeholders, as this interpreter reads text


@cache
def _check_schema(name: str) -> None:
    """`<name>` checked against the metaschema, once, whichever of its validators asks first."""
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(resolved(schema(name)))


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


# The quick acceptance (`accepts`): a schema compiled once into plain-Python checks that take
# exactly what the validator takes, keyword by keyword, so a check is right under `not`, in a
# `oneOf` or as an `if` too (a keyword it does not know or a recursive shape: no quick check at
# all, the validator decides everything). A failing body is always answered by the validator, which
# names the problems; the quick check only spares a passing body the validator's walk (about a
# millisecond for a receipt's body, 20 µs here; the writer thread's 120 µs an event).
_Check = Callable[[Any], bool]
# Keywords the quick check ignores: annotations, and what only the served document reads.
_UNCHECKED = frozenset({"description", "title", "default", "examples", "x-error", "x-refusal", "$schema", "$id",
                        "$comment", "$defs", "deprecated", "readOnly", "writeOnly"})


class _NotQuick(Signal):
    """The schema says something the quick check does not know: the validator decides alone (a
    turn `accepts` catches at once, never a refusal)."""


class _Compiling(NamedTuple):
    """The schema being compiled and the `$defs` entered on the way to a node: one entered again
    is a recursive shape (a JSON value), which the quick check leaves to the validator."""

    document: Mapping[str, JsonValue]
    entered: frozenset[str] = frozenset()


def _quick(root: _Compiling, node: Any) -> _Check:
    """`node` compiled (see `accepts`): one check per keyword, from `_COMPILERS`; `_NotQuick` for
    a keyword outside it."""
    if isinstance(node, bool):
        return _always if node else _never
    reference = node.get("$ref") if isinstance(node, Mapping) else None
    if isinstance(reference, str):
        if reference in root.entered or not reference.startswith("#/$defs/"):
            raise _NotQuick("$ref")
        definitions = root.document.get("$defs")
        if not isinstance(definitions, dict) or reference.removeprefix("#/$defs/") not in definitions:
            raise _NotQuick("$ref")
        inner = root._replace(entered=root.entered | {reference})
        shared = _quick(inner, definitions[reference.removeprefix("#/$defs/")])
        rest = _quick(inner, {key: value for key, value in node.items() if key != "$ref"})
        return lambda item: shared(item) and rest(item)  # a reference and its siblings both apply
    checks: list[_Check] = []
    closed = node.get("additionalProperties") is False and "patternProperties" not in node
    if closed:
        checks.append(_closed_object(root, node))
    for keyword, value in node.items():
        if keyword in _UNCHECKED or keyword in ("$ref", "then", "else"):  # then/else: read with `if`
            continue
        if closed and keyword in ("properties", "additionalProperties", "required"):
            continue  # `_closed_object`
        compiler = _COMPILERS.get(keyword)
        if compiler is None:
            raise _NotQuick(keyword)
        checks.append(compiler(root, node, value))
    if len(checks) <= 1:
        return checks[0] if checks else _always

    def check(item: Any) -> bool:
        for one in checks:  # noqa: SIM110 - a loop, not a generator: the writer thread calls this per event
            if not one(item):
                return False
        return True
    return check


def _closed_object(root: Any, node: Any) -> _Check:
    """`properties`, `required` and `additionalProperties: false` of one node in one pass over the
    object's members (an event's data on the writer thread: about 1 µs)."""
    members = {name: _quick(root, member) for name, member in node.get("properties", {}).items()}
    required = tuple(node.get("required", ()))

    def check(item: Any) -> bool:
        if not isinstance(item, dict):
            return True
        for name in required:
            if name not in item:
                return False
        for name, value in item.items():
            member = members.get(name)
            if member is None or not member(value):
                return False
        return True
    return check


def _always(_item: Any) -> bool:
    return True


def _never(_item: Any) -> bool:
    return False


# The JSON types the validator reads as Python's own; `integer` and `number` are the type checker's
# own tests (`_validator_class`).
_PYTHON_TYPES: dict[str, type] = {"string": str, "object": dict, "array": list, "boolean": bool, "null": type(None)}
_TYPE_TESTS: dict[str, _Check] = {"integer": lambda value: _whole_number(None, value),
                                  "number": lambda value: _finite_number(None, value)}


def _type(_root: Any, _node: Any, value: Any) -> _Check:
    kinds = [value] if isinstance(value, str) else list(value)
    simple = tuple(_PYTHON_TYPES[kind] for kind in kinds if kind in _PYTHON_TYPES)
    tests = [_TYPE_TESTS[kind] for kind in kinds if kind not in _PYTHON_TYPES]
    if not tests:
        return lambda item: isinstance(item, simple)
    return lambda item: isinstance(item, simple) or any(test(item) for test in tests)


def _json_key(value: Any) -> Any:
    """`value` as JSON compares it, hashable: a boolean is never a number, 1 is 1.0, an object's
    members in no order (what `enum`, `const` and `uniqueItems` compare by)."""
    if isinstance(value, bool) or value is None:
        return ("literal", value)
    if isinstance(value, int | float):
        return ("number", value)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("array", tuple(_json_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((name, _json_key(item)) for name, item in value.items()))
    return ("other", id(value))  # no JSON value: equal to nothing but itself


def _enum(_root: Any, node: Any, value: Any) -> _Check:
    """One of the listed values, by JSON's equality (`_json_key`): exact, so it may stand under
    `not` or in a `oneOf` as well as anywhere else."""
    allowed = value if "enum" in node and value is node["enum"] else [value]
    keys = frozenset(_json_key(choice) for choice in allowed)
    words = frozenset(choice for choice in allowed if isinstance(choice, str))
    return lambda item: item in words if isinstance(item, str) else _json_key(item) in keys


def _unique(_root: Any, _node: Any, value: bool) -> _Check:
    """No two items equal as JSON compares them (`_json_key`)."""
    def check(item: Any) -> bool:
        if not value or not isinstance(item, list):
            return True
        return len({_json_key(member) for member in item}) == len(item)
    return check


def _pattern_check(_root: Any, _node: Any, value: str) -> _Check:
    found = _ecma(value).search
    return lambda item: not isinstance(item, str) or found(item) is not None


def _length(keyword: str) -> Callable[[Any, Any, int], _Check]:
    read = _TEXT_LIMITS[keyword]
    return lambda _root, _node, limit: lambda item: _within(read, limit, item)


def _format(_root: Any, _node: Any, value: str) -> _Check:
    return _FORMATS.get(value, lambda _item: True)  # any other name is an annotation only


def _bound(below: bool) -> Callable[[Any, Any, float], _Check]:
    return lambda _root, _node, bound: lambda item: not _finite_number(None, item) or (
        item >= bound if below else item <= bound)


def _at_most(kind: _Container) -> Callable[[Any, Any, int], _Check]:
    return lambda _root, _node, limit: lambda item: not isinstance(item, kind) or len(item) <= limit


def _at_least(kind: _Container) -> Callable[[Any, Any, int], _Check]:
    return lambda _root, _node, limit: lambda item: not isinstance(item, kind) or len(item) >= limit


def _code_points(longest: bool) -> Callable[[Any, Any, int], _Check]:
    """`maxLength`/`minLength`: JSON Schema counts code points, as `len` does."""
    return lambda _root, _node, limit: lambda item: not isinstance(item, str) or (
        len(item) <= limit if longest else len(item) >= limit)


def _exclusive(below: bool) -> Callable[[Any, Any, float], _Check]:
    return lambda _root, _node, bound: lambda item: not _finite_number(None, item) or (
        item > bound if below else item < bound)


def _multiple_of(_root: Any, _node: Any, value: Any) -> _Check:
    if not isinstance(value, int) or isinstance(value, bool):
        raise _NotQuick("multipleOf")  # a fraction's quotient: the validator's own arithmetic
    return lambda item: not _finite_number(None, item) or not item % value


def _dependent(root: Any, _node: Any, value: Mapping[str, Any]) -> _Check:
    parts = [(name, _quick(root, part)) for name, part in value.items()]
    return lambda item: not isinstance(item, dict) or all(part(item) for name, part in parts if name in item)


def _required(_root: Any, _node: Any, value: Sequence[str]) -> _Check:
    names = tuple(value)
    return lambda item: not isinstance(item, dict) or all(name in item for name in names)


def _properties(root: Any, _node: Any, value: Mapping[str, Any]) -> _Check:
    members = [(name, _quick(root, member)) for name, member in value.items()]

    def check(item: Any) -> bool:
        if isinstance(item, dict):
            for name, member in members:
                if name in item and not member(item[name]):
                    return False
        return True
    return check


def _additional(root: Any, node: Any, value: Any) -> _Check:
    if "patternProperties" in node:
        raise _NotQuick("patternProperties")
    other, declared = _quick(root, value), frozenset(node.get("properties", {}))

    def check(item: Any) -> bool:
        if isinstance(item, dict):
            for name, member in item.items():
                if name not in declared and not other(member):
                    return False
        return True
    return check


def _names(root: Any, _node: Any, value: Any) -> _Check:
    names = _quick(root, value)
    return lambda item: not isinstance(item, dict) or all(names(name) for name in item)


def _items(root: Any, node: Mapping[str, JsonValue], value: Any) -> _Check:
    if "prefixItems" in node or not isinstance(value, (dict, bool)):
        raise _NotQuick("items")
    each = _quick(root, value)
    return lambda item: not isinstance(item, list) or all(each(member) for member in item)


def _not(root: Any, _node: Any, value: Any) -> _Check:
    inner = _quick(root, value)
    return lambda item: not inner(item)


def _any_of(root: Any, _node: Any, value: Sequence[Any]) -> _Check:
    parts = [_quick(root, part) for part in value]
    return lambda item: any(part(item) for part in parts)


def _all_of(root: Any, _node: Any, value: Sequence[Any]) -> _Check:
    parts = [_quick(root, part) for part in value]
    return lambda item: all(part(item) for part in parts)


def _one_of(root: Any, _node: Any, value: Sequence[Any]) -> _Check:
    parts = [_quick(root, part) for part in value]
    return lambda item: sum(1 for part in parts if part(item)) == 1


def _if(root: Any, node: Mapping[str, JsonValue], value: Any) -> _Check:
    condition = _quick(root, value)
    then, otherwise = _quick(root, node.get("then", True)), _quick(root, node.get("else", True))
    return lambda item: then(item) if condition(item) else otherwise(item)


# keyword → its compiler (root, the node, the keyword's value): the quick check knows these alone.
_COMPILERS: dict[str, Callable[[Any, Any, Any], _Check]] = {
    "type": _type, "enum": _enum, "const": _enum, "pattern": _pattern_check,
    **{keyword: _length(keyword) for keyword in _TEXT_LIMITS}, "format": _format,
    "minimum": _bound(True), "maximum": _bound(False), "exclusiveMinimum": _exclusive(True),
    "exclusiveMaximum": _exclusive(False), "multipleOf": _multiple_of, "maxLength": _code_points(True),
    "minLength": _code_points(False), "maxProperties": _at_most(dict), "maxItems": _at_most(list),
    "minProperties": _at_least(dict), "minItems": _at_least(list), "dependentSchemas": _dependent,
    "uniqueItems": _unique,
    "required": _required, "properties": _properties, "additionalProperties": _additional,
    "propertyNames": _names, "items": _items, "not": _not, "anyOf": _any_of, "allOf": _all_of, "oneOf": _one_of,
    "if": _if,
}


@cache
def accepts(name: str) -> _Check | None:
    """A plain-Python acceptance of `<name>` (or of an event type's data, `event:<type>`): True only
    for a body the validator finds no error in (False: the validator decides, and names the
    problems); None where the schema uses a keyword this check does not know."""
    document = _event_node(name.removeprefix("event:")) if name.startswith("event:") else resolved(schema(name))
    root = schema(EVENT_DATA) if name.startswith("event:") else document
    try:
        return _quick(_Compiling(root), document)
    except _NotQuick:
        return None


def quick_event_check(event_type: str) -> Callable[[Any], bool] | None:
    """`accepts` of one event type's data (the decide's announcements, `decision.created` and
    `hold.opened`, among them)."""
    return accepts(f"event:{event_type}")


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
    return [item for _where, item in _placed_items(name, error)]


# An item with where it is in the body (its instance path), for `problems`' order.
_Placed = tuple[list[Any], ErrorItem]


def _placed_items(name: str, error: ValidationError) -> list[_Placed]:
    node, where, keyword = _answering_node(schema(name), error)
    if "propertyNames" in error.absolute_schema_path and len(where) == len(error.absolute_path):
        where = [*where, error.instance]  # an item names the key whose name is wrong (a refusal, its map)
    return _stated_items(node, where, keyword, error.instance)


def _stated_items(node: Any, where: Sequence[Any], keyword: str, instance: Any) -> list[_Placed]:
    """The items `node`'s `x-error` states for a failing `keyword` ([]: none); `{field}` in a
    message is the item's field, as the body names it (`executor.type`, `evidence_refs[3]`)."""
    item = _keyed(node.get("x-error") if isinstance(node, Mapping) else None, keyword)
    if not isinstance(item, Mapping):
        return []
    message = _with_allowed(node, item["message"])
    places = [[*where, member] for member in _unknown(node, instance)] if item.get("field") == "*unknown" \
        else [list(where)]
    placed: list[_Placed] = []
    for place in places:
        field = (item.get("field") if item.get("field") != "*unknown" else None) or path_text(place) or "$"
        placed.append((place, {"field": field, "code": item["code"], "message": message.replace("{field}", field)}))
    return placed


def _with_allowed(node: Mapping[str, Any], text: str) -> str:
    """`text` with `{allowed}` replaced by the members `node` declares, comma-separated, so a
    composed schema's refusal names the members it added too."""
    return text.replace("{allowed}", ", ".join(node.get("properties", {}))) if "{allowed}" in text else text


def problems(name: str, body: Any) -> list[ErrorItem]:
    """Every problem of `body` against `<name>`, one item per field ([]: it passes), for a refusal
    that names them all at once (the policy checks' arguments, the receipts): each failure's item
    is its node's `x-error` (a missing member's is its own node's, by `required`, at any depth),
    each field once (its first failure in the schema's order), and a member wrong as a whole (not an
    object, too many entries) hides what is wrong inside it. Their order is the same for every
    body whose canonical JSON is the same, whatever order a client's JSON library wrote the
    members in; at every depth: first the members an object does not declare (unknown members, a
    map's entries), sorted by name, then its declared members in the schema's order; an array's
    items by index; then what a rule across the top level's members finds (its `allOf`,
    `if`/`then`). A body that is not an object is its top level's one item. A failure whose node states
    no `x-error` is still an item (`invalid_value`, `jsonschema`'s words): a failing body is never
    answered with no problem."""
    quick = accepts(name)
    if quick is not None and quick(body):
        return []
    root, found = schema(name), dict[str, tuple[bool, list[Any], ErrorItem]]()
    for error in validator(name, listing=True).iter_errors(body):
        placed = _items_of(name, error) or [(list(error.absolute_path), {
            "field": path_text(error.absolute_path) or "$", "code": "invalid_value", "message": plain_message(error)})]
        steps = error.absolute_schema_path
        across = bool(steps) and steps[0] in (*_LISTED, *_IN_PLACE)  # a rule across the top level's members
        for where, item in placed:
            found.setdefault(item["field"], (across, where, item))
    named = {tuple(where) for _across, where, _item in found.values() if where}
    kept = [(across, where, item) for across, where, item in found.values()
            if not any(tuple(where[:depth]) in named for depth in range(1, len(where)))]
    return [item for _across, _where, item in
            sorted(kept, key=lambda kept_item: (kept_item[0], _body_order(root, kept_item[1])))]


def _body_order(root: Mapping[str, JsonValue], where: Sequence[Any]) -> tuple[tuple[int, int | str], ...]:
    """Where `where` comes in the refusal's order (see `problems`): per level, (0, its name) for a
    member its object does not declare, (1, rank in the schema) for one it does, (1, index) for an
    array's item."""
    key: list[tuple[int, int | str]] = []
    node: Any = root
    for part in where:
        node = _deref(root, node) if isinstance(node, Mapping) else {}
        if isinstance(part, int):
            key.append((1, part))
            node = node.get("items", {})
            continue
        declared = list(node.get("properties", {}))
        if part in declared:
            key.append((1, declared.index(part)))
            node = node["properties"][part]
        else:
            key.append((0, str(part)))
            node = node.get("additionalProperties", {})
    return tuple(key)


def _items_of(name: str, error: ValidationError) -> list[_Placed]:
    """The items of one failure: a `required` failure, at any depth, one per member missing, each
    answered by its own node as `check` answers the first (`_answering_node`)."""
    if error.validator == "required" and isinstance(error.instance, Mapping):
        root = schema(name)
        where = list(error.absolute_path)
        members = _deref(root, error.schema).get("properties", {}) if isinstance(error.schema, Mapping) else {}
        return [placed for member in error.validator_value if member not in error.instance
                for placed in _stated_items(_deref(root, members.get(member, {})), [*where, member], "required", None)]
    return _placed_items(name, error)


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


def read(name: str, body: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """A body that passed `<name>`, as its schema reads it (the receipts' members as stored): text
    whose node states `x-js-max-length` trimmed as JavaScript trims it, at any depth (an object's
    keys as sent); a top-level member that reads as nothing (null, blank text, an empty object or
    array) left out; then each absent member with a `default` given it, in the schema's order."""
    members, defaults = _top_readers(name)
    members_read: dict[str, JsonValue] = {}
    for member, reader in members:
        if member in body:
            value = reader(body[member])
            if value is not None and value != "" and value != {} and value != []:
                members_read[member] = value
    for member, default in defaults:
        if member not in members_read:
            members_read[member] = default
    return members_read


_Reader = Callable[[Any], Any]


@cache
def _top_readers(name: str) -> tuple[list[tuple[str, _Reader]], list[tuple[str, Any]]]:
    """`<name>`'s top-level members with their readers (`_reader`), and the defaults it states."""
    root = schema(name)
    nodes = [(member, _deref(root, node)) for member, node in root.get("properties", {}).items()]
    return ([(member, _reader(root, node)) for member, node in nodes],
            [(member, node["default"]) for member, node in nodes if "default" in node])


def _reader(root: Mapping[str, JsonValue], node: Any) -> _Reader:
    """How `node` reads a value that passed it: text trimmed where it states `x-js-max-length`, an
    object's and an array's members by their own nodes (built once per schema)."""
    node = _deref(root, node) if isinstance(node, Mapping) else {}
    trims = "x-js-max-length" in node
    declared = {member: _reader(root, child) for member, child in node.get("properties", {}).items()}
    others = node.get("additionalProperties")
    other = _reader(root, others) if isinstance(others, Mapping) else _as_sent
    each = _reader(root, node["items"]) if isinstance(node.get("items"), Mapping) else _as_sent

    def read_value(value: Any) -> Any:
        if isinstance(value, str):
            return js_trim(value) if trims else value
        if isinstance(value, dict):
            return {key: declared.get(key, other)(item) for key, item in value.items()}
        if isinstance(value, list):
            return [each(item) for item in value]
        return value
    return read_value


def _as_sent(value: Any) -> Any:
    return value


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
        node = _deref(root, node)
        if _answers(node, "*"):
            found = (node, instance[:depth], "*")
    if not isinstance(node, Mapping):
        return found
    if _answers(node, str(error.validator)):
        return node, instance[:depth], str(error.validator)
    if error.validator == "required" and isinstance(error.instance, Mapping):
        missing = next(name for name in error.validator_value if name not in error.instance)
        member = _deref(root, node.get("properties", {}).get(missing, {}))
        if _answers(member, "*") or _answers(member, "required"):
            return member, [*instance[:depth], missing], "required"  # its `*` when it states no `required`
    return found


def _deref(root: Mapping[str, Any], node: Any) -> Any:
    """`node`, or where its `$ref` into `root`'s `$defs` points with `node`'s other keywords over
    it (a member that names a shared kind of value and says its own `x-error`): a walk of the
    schema meets the referred node where `jsonschema`'s path, which leaves `$ref` out, has it."""
    if not isinstance(node, Mapping) or "$ref" not in node:
        return node
    reference = node["$ref"]
    if not reference.startswith("#/$defs/"):
        return node
    shared = root["$defs"][reference.removeprefix("#/$defs/")]
    return {**_deref(root, shared), **{key: value for key, value in node.items() if key != "$ref"}}


def _answers(node: Any, keyword: str) -> bool:
    """Whether `node` states what a failing `keyword` under it says: an `x-refusal` sentence, or an
    `x-error` item (a node may state items alone: the receipts' bodies name every problem)."""
    return _sentence(node, keyword) is not None or (
        isinstance(node, Mapping) and isinstance(_keyed(node.get("x-error"), keyword), Mapping))


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
    "HTTP_URL_FORMAT",
    "MAX_MESSAGE",
    "PRINTABLE_RUN",
    "ErrorItem",
    "EventDataInvalid",
    "accepts",
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
    "read",
    "refusal",
    "resolved",
    "schema",
    "unprintable_class",
    "validator",
]
