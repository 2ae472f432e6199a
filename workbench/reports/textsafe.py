"""Caller-supplied text made safe for the workbench's output kinds: HTML, Markdown, Markdown tables.

Everything the workbench shows that a caller chose (decision ids, rulebook versions, actions,
fact names and values, scope and user names, error messages that quote them) is data, never
markup. Escape it at the point of rendering, with the helper for the output it lands in:

- `html_text`: HTML element content and quoted attribute values (`report.html`, SVG labels,
  Panel HTML panes and indicator titles).
- `md_text`: inline Markdown (Panel Markdown panes, `report.md` prose). The characters with an
  inline meaning, and the punctuation that would open a block at the start of the text, are
  backslash-escaped (CommonMark lets any punctuation be), so raw HTML (`<img …>`),
  entities (`&lt;`), links and images (`[x](y)`, `![x](y)`), autolinks (`<https://…>`, and
  bare `https://…`/`www.…`, after whose scheme an invisible word joiner is put), emphasis, code spans, headings, lists, quotes and table pipes all come out as the literal
  characters; line breaks and other control characters become spaces, so one value stays one
  line and cannot open a block of its own.
- `md_cell`: one cell of a GFM table (`md_text`, so its pipes are escaped too).

SECURITY: these are the only escapes the workbench uses for caller text; a template that
interpolates caller text without one of them is a defect (issue 18). The workbench's
Content-Security-Policy (`workbench.app.headers`) stops script even where one is missed.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

__all__ = ["html_text", "md_cell", "md_text"]

# Characters with an inline meaning anywhere in a line: emphasis, code, links and images, raw
# HTML and entities, table pipes, strikethrough, math, escapes themselves, and the `.`, `:` and
# `@` by which a linkifier finds a bare domain, URL or e-mail address (`evil.com`).
_INLINE = re.compile(r"([\\`*_\[\]<>&|!~$@.:])")
# What opens a block when it starts a line (a heading, quote, list item, setext underline, …):
# any leading punctuation, or the `.`/`)` after leading digits (`1.` opens an ordered list).
_BLOCK_START = re.compile(r"^(\s*)(\d+[.)]|[!-/:-@\[-`{-~])")
# C0 and C1 controls, the line and paragraph separators, and DEL: never part of one line of text.
_CONTROLS = re.compile("[\u0000-\u001f\u007f-\u009f\u2028\u2029]+")
# The start of a URL that GFM-style renderers autolink (`https://…`, `www.…`, `mailto:…`) even
# when its punctuation is escaped (GitHub resolves escapes before it autolinks).
_SCHEME = re.compile(r"(?i)\b(https?|ftp|mailto|www)(?=\\[:.])")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def html_text(value: Any) -> str:
    """`value` as HTML text: `& < > " '` escaped, safe in element content and quoted attributes."""
    return escape(_text(value), quote=True)


def md_text(value: Any) -> str:
    """`value` as literal inline Markdown text (see the module docstring for what it neutralises)."""
    flat = _CONTROLS.sub(" ", _text(value))
    head = ""
    start = _BLOCK_START.match(flat)
    if start and not _INLINE.match(start.group(2)):  # (an inline character is escaped below)
        mark = start.group(2)
        head, flat = start.group(1) + mark[:-1] + "\\" + mark[-1], flat[start.end():]
    escaped = head + _INLINE.sub(r"\\\1", flat)
    # An invisible word joiner (U+2060) after the scheme keeps an autolinker from seeing a URL.
    return _SCHEME.sub("\\1\u2060", escaped)


def md_cell(value: Any) -> str:
    """`value` as the literal text of one GFM table cell (pipes included)."""
    return md_text(value)
