"""How a body's free text is read, as the reference reads it (JavaScript): trimmed by
`String.prototype.trim` and measured by `String.prototype.length`. The schemas' `x-js-max-length`
keyword, the receipts' reading of a body and the record's own limits all use these two, so the
rule a schema states and the code that stores the text cannot drift.
"""

from __future__ import annotations

__all__ = ["JS_WHITESPACE", "js_trim", "utf16_length"]

# JavaScript `String.prototype.trim` white space: WhiteSpace + LineTerminator code points
# (ECMA-262, "White Space" and "Line Terminators"; Zs as of Unicode 15).
JS_WHITESPACE = (
    "\u0009\u000a\u000b\u000c\u000d\u0020\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(text: str) -> str:
    """`text.trim()` as JavaScript does it (Python's `strip` differs on U+001C–U+001F, U+FEFF)."""
    return text.strip(JS_WHITESPACE)


def utf16_length(text: str) -> int:
    """Length as JavaScript's `String.prototype.length` counts it (an astral character is 2)."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)
