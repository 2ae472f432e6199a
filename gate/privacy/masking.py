"""Masking what leaves: one destination's rule applied to a document (issue 67; docs/privacy.md).

Given what a request holds of the data map (`datamap.Found`) and a destination's `Rule`, a
document that leaves (an event, a message, a dataset row, a log line, an MCP answer) is masked

* at the declared paths, when the document is the request itself (`mask_request`): every value
  there, whatever its type;
* anywhere else, by value (`mask_document`): a string member equal to a declared string value,
  or containing one of at least `MIN_CONTAINED` characters, is masked as that member's rule
  says (the record's `action_binding` copies context strings; an adapter's facts may echo one).
  Numbers and booleans are masked only at their declared paths: equality by value would mask
  every `31` of a record because an age was 31.

`hash` writes `hmac-sha256:<hex>` of the value's canonical JSON under the scope's key
(`scope_key`), so equal values group and join; `drop` removes an object member (an array element
becomes null, so the others keep their places). The strictest action of the members a value
matches applies. Each function also returns the JSON Pointers (RFC 6901) of what it masked.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from gate.privacy.datamap import DROP, HASH, KEEP, Found, Rule, _split, strictness
from gate.protocol.canonical import canonical_text

MIN_CONTAINED = 4
TOKEN_PREFIX = "hmac-sha256:"  # noqa: S105 - the hashed value's label, not a secret
_DROPPED = object()
DROPPED_TEXT = "[dropped]"


def scope_key(master: bytes, scope: str) -> bytes:
    """The scope's HMAC key, derived from the gate's privacy key: one scope's tokens never join
    another's."""
    return hmac.new(master, b"decision-gate/privacy/v1\x00" + scope.encode("utf-8"), hashlib.sha256).digest()


def token(key: bytes, value: Any) -> str:
    """The keyed hash of a JSON value: equal values, equal tokens, within one scope."""
    return TOKEN_PREFIX + hmac.new(key, canonical_text(value).encode("utf-8"), hashlib.sha256).hexdigest()


def pointer(parts: tuple[str | int, ...]) -> str:
    """The JSON Pointer (RFC 6901) of a member reached by `parts`, each escaped (`~0`, `~1`)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class Masker:
    """One destination's rule with one scope's key, for one request's declared values."""

    def __init__(self, rule: Rule, key: bytes, found: Found) -> None:
        self.rule, self.key, self.found = rule, key, found
        self._strings: list[tuple[str, str]] = []  # (value, action), strictest first
        for path, kind, value in found.members:
            action = rule.action(path, kind)
            if isinstance(value, str) and value and action != KEEP:
                self._strings.append((value, action))
        self._strings.sort(key=lambda item: -strictness(item[1]))

    @property
    def active(self) -> bool:
        """Whether anything would be masked (nothing declared, or every rule keep: no work)."""
        return any(self.rule.action(path, kind) != KEEP for path, kind, _ in self.found.members)

    def _apply(self, action: str, value: Any) -> Any:
        return _DROPPED if action == DROP else token(self.key, value) if action == HASH else value

    def _matched(self, text: str) -> str | None:
        for value, action in self._strings:
            if text == value or (len(value) >= MIN_CONTAINED and value in text):
                return action
        return None

    def mask_document(self, document: Any, at: tuple[str | int, ...] = ()) -> tuple[Any, list[str]]:
        """`document` with every string member holding a declared value masked; the pointers."""
        masked: list[str] = []
        return self._walk(document, at, masked), masked

    def _walk(self, node: Any, at: tuple[str | int, ...], masked: list[str]) -> Any:
        if isinstance(node, str):
            action = self._matched(node)
            if action is None:
                return node
            masked.append(pointer(at))
            return self._apply(action, node)
        if isinstance(node, Mapping):
            out = {}
            for name, value in node.items():
                new = self._walk(value, (*at, name), masked)
                if new is not _DROPPED:
                    out[name] = new
            return out
        if isinstance(node, list):
            items = [self._walk(value, (*at, index), masked) for index, value in enumerate(node)]
            return [None if item is _DROPPED else item for item in items]
        return node

    def action_of(self, path: str | None, value: Any) -> str:
        """What this rule does with `value` found at request path `path` (None: a copy whose path
        is not the request's): the declared member's action there, or, for a string, the
        strictest action of the declared values it holds; keep when it holds none."""
        actions = [self.rule.action(p, kind) for p, kind, _ in self.found.members if p == path]
        if isinstance(value, str):
            matched = self._matched(value)
            if matched is not None:
                actions.append(matched)
        return max(actions, key=strictness, default=KEEP)

    def let_out(self, path: str | None, value: Any) -> tuple[bool, Any]:
        """(whether `value` at `path` may leave, what leaves: the value or its token)."""
        action = self.action_of(path, value)
        if action == DROP:
            return False, None
        return True, token(self.key, value) if action == HASH else value

    def mask_text(self, text: str) -> tuple[str, int]:
        """Free text (a log line) with each declared string value of at least `MIN_CONTAINED`
        characters (or the whole text, when equal) replaced: `[dropped]` or its token; how many."""
        count = 0
        for value, action in self._strings:
            if text == value or (len(value) >= MIN_CONTAINED and value in text):
                count += text.count(value)
                text = text.replace(value, DROPPED_TEXT if action == DROP else token(self.key, value))
        return text, count

    def mask_facts(self, facts: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """A decision's facts (its request's `context.inputs`, as a hold keeps them) masked as
        `mask_request` masks them there; pointers into `facts`."""
        masked, pointers = self.mask_request({"context": {"inputs": facts}})
        inputs = masked.get("context", {}).get("inputs", {})
        prefix = "/context/inputs"
        return inputs, [p.removeprefix(prefix) for p in pointers if p.startswith(prefix)]

    def mask_request(self, request: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """A decide body with each declared member masked at its path, then by value elsewhere."""
        out: dict[str, Any] = _copy(request)
        masked: list[str] = []
        for path, kind, value in self.found.members:
            action = self.rule.action(path, kind)
            if action == KEEP:
                continue
            prefix, rest = _split(path)
            parts = prefix + rest
            parent: Any = out
            for part in parts[:-1]:
                parent = parent.get(part) if isinstance(parent, dict) else None
            if isinstance(parent, dict) and parts[-1] in parent:
                masked.append(pointer(parts))
                if action == DROP:
                    del parent[parts[-1]]
                else:
                    parent[parts[-1]] = token(self.key, value)
        rest_masked: list[str] = []
        result = self._walk(out, (), rest_masked)
        return result, masked + rest_masked


def _copy(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {name: _copy(value) for name, value in node.items()}
    if isinstance(node, list):
        return [_copy(value) for value in node]
    return node
