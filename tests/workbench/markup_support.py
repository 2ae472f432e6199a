"""Reading rendered output as a browser would: Markdown through the workbench's renderer, HTML
through a parser; and the check that a dry-run folder's reports hold caller text as text."""

from __future__ import annotations

from html import unescape
from html.parser import HTMLParser
from pathlib import Path

HOSTILE_VERSION = "v2<img src=x onerror=alert(document.domain)>"


def markdown_html(text: str) -> str:
    """`text` rendered by the Markdown renderer of the workbench's panes (markdown-it, gfm-like:
    raw HTML allowed, linkify on)."""
    from panel.pane import Markdown

    return Markdown._get_parser("markdown-it", ()).render(text)


class Elements(HTMLParser):
    """The start tags and the text of an HTML document."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse(html: str) -> Elements:
    parser = Elements()
    parser.feed(html)
    return parser


def visible(html: str) -> str:
    return "".join(parse(html).text).replace("\u2060", "")


def assert_report_is_text(folder: Path) -> None:
    markdown = (folder / "report.md").read_text()
    rendered = markdown_html(markdown)
    tags = parse(rendered).tags
    assert not [t for t in tags if t[0] in {"img", "script", "a"}], rendered
    assert HOSTILE_VERSION in unescape(visible(rendered))
    rows = [line for line in markdown.splitlines() if line.startswith("| Rulebook |")]
    assert rows and rows[0].count(" | ") == 1  # still two cells

    html = (folder / "report.html").read_text()
    parsed = parse(html)
    assert not [t for t in parsed.tags if t[0] in {"img", "script", "a"}]
    assert HOSTILE_VERSION in "".join(parsed.text)
