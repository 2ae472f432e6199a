"""Where in a JSON text a value sits: maps validator paths to (line, column) for the editor.

The rulebook validator names errors by path (`draft.rules[0].condition.operator`, or
`draft["odd key"]` for keys that are not plain identifiers); an author needs the line they
typed. `locate(text, base)` scans the text once and returns every value's path with the
0-based line and column where the value (for a member: its key) starts. It only reads text
that `json.loads` accepts; for unparsable text the parse error's own position is used instead.
"""

from __future__ import annotations

import json
import re

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_WS = " \t\r\n"
_SCALAR_END = re.compile(r"[\s,\]}]")


def member_path(path: str, key: str) -> str:
    """The validator's spelling of `path` + member `key`."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.positions: dict[str, int] = {}
        self.decoder = json.JSONDecoder()

    def skip(self) -> None:
        while self.i < len(self.text) and self.text[self.i] in _WS:
            self.i += 1

    def value(self, path: str, at: int | None = None) -> None:
        self.skip()
        self.positions.setdefault(path, self.i if at is None else at)
        char = self.text[self.i]
        if char == "{":
            self.i += 1
            self.skip()
            if self.text[self.i] == "}":
                self.i += 1
                return
            while True:
                self.skip()
                key_at = self.i
                key, self.i = self.decoder.raw_decode(self.text, self.i)
                self.skip()
                self.i += 1  # ':'
                self.value(member_path(path, key), key_at)
                self.skip()
                closing = self.text[self.i]
                self.i += 1
                if closing == "}":
                    return
        elif char == "[":
            self.i += 1
            self.skip()
            if self.text[self.i] == "]":
                self.i += 1
                return
            index = 0
            while True:
                self.value(f"{path}[{index}]")
                index += 1
                self.skip()
                closing = self.text[self.i]
                self.i += 1
                if closing == "]":
                    return
        else:
            _, self.i = self.decoder.raw_decode(self.text, self.i)


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset)
    column = offset - (text.rfind("\n", 0, offset) + 1)
    return line, column


def locate(text: str, base: str) -> dict[str, tuple[int, int]]:
    """Every value path in `text` (rooted at `base`) → (line, column), both 0-based."""
    json.loads(text)  # only well-formed text is scanned
    scanner = _Scanner(text)
    scanner.value(base)
    return {path: _line_col(text, offset) for path, offset in scanner.positions.items()}


def position_of(positions: dict[str, tuple[int, int]], path: str) -> tuple[int, int]:
    """The position of `path`, or of its nearest present ancestor (a missing member is
    reported where its parent object starts)."""
    while path:
        if path in positions:
            return positions[path]
        cut = max(path.rfind("."), path.rfind("["))
        if cut <= 0:
            break
        path = path[:cut]
    return (0, 0)
