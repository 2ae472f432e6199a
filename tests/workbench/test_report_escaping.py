"""Caller text in the dry-run reports and the workbench's Markdown is text, never markup (issue 18).

A draft's `version` is whatever its author typed (1–80 characters, no control characters), and
the scope and dataset location come from the caller of `gate dry-run`. Rendered by a real
Markdown renderer (the one the workbench uses, raw HTML and linkify on) and parsed as HTML, the
reports must hold that text literally and no element, link or emphasis made from it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html import unescape
from pathlib import Path

import pytest
from dryrun_support import decide, rule, rulebook, write_dataset

from tests.workbench.markup_support import (
    HOSTILE_VERSION,
    assert_report_is_text,
    markdown_html,
    parse,
    visible,
)
from workbench.migration import dry_run, write_dry_run
from workbench.reports.textsafe import html_text, md_cell, md_text

GATE = str(Path(sys.executable).parent / "gate")
HOSTILE_TEXTS = [
    HOSTILE_VERSION,
    "<script>alert(1)</script>",
    "[click](javascript:alert(1)) ![img](x) <https://evil.example> https://evil.example www.evil.example",
    "*strong* _em_ `code` ~~gone~~ $x$ &lt;b&gt; a|b\\|c",
    "# heading",
    "- item",
    "1. item",
    "> quote",
    "line one\nline two\r\n\u2028<b>three</b>",
]
OLD = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 100}, "no", "TOO_BIG")])
DRAFT = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 50}, "no", "TOO_BIG")],
                 version=HOSTILE_VERSION)
FACTS = [{"amount": a} for a in (10, 60, 70, 120, 130)]


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_markdown_text_renders_as_the_literal_text(text):
    html = markdown_html(md_text(text))
    tags = {tag for tag, _ in parse(html).tags}
    assert tags == {"p"}, html  # no img, script, a, em, strong, code, h1, li, blockquote, table, br
    assert visible(html).strip() == re.sub("[\r\n\u2028]+", " ", text)  # one line, every character kept


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_a_markdown_table_cell_stays_one_cell(text):
    table = f"| a | b |\n|---|---|\n| {md_cell(text)} | after |\n"
    parsed = parse(markdown_html(table))
    assert [tag for tag, _ in parsed.tags].count("td") == 2
    assert not {tag for tag, _ in parsed.tags} & {"img", "script", "a", "em", "strong", "code", "del"}
    assert "after" in parsed.text


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_html_text_is_text_in_content_and_in_attributes(text):
    parsed = parse(f'<p title="{html_text(text)}">{html_text(text)}</p>')
    assert parsed.tags == [("p", {"title": text})]
    assert "".join(parsed.text) == text


def test_none_is_empty_and_plain_text_is_unchanged():
    assert md_text(None) == html_text(None) == ""
    assert md_text("pricing_exception 2026 11 01") == "pricing\\_exception 2026 11 01"
    assert html_text("ok") == md_text("ok") == "ok"


@pytest.fixture
def hostile_dataset(tmp_path):
    root = tmp_path / "ds<img src=x onerror=alert('path')>"
    return write_dataset(root, decide(OLD, FACTS), [])


def test_dry_run_reports_show_a_hostile_version_and_path_as_text(hostile_dataset, tmp_path):
    run = dry_run(DRAFT, "refunds", dataset=hostile_dataset, created_at="2026-11-22T00:00:00.000Z")
    write_dry_run(tmp_path / "out", run.manifest, None)
    assert_report_is_text(tmp_path / "out")
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "onerror=alert('path')" in unescape(visible(markdown_html(markdown)))


def test_gate_dry_run_writes_escaped_reports(hostile_dataset, tmp_path):
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps(DRAFT))
    env = {**os.environ, "GATE_HOME": str(tmp_path / "home"), "GATE_REQUIRE_SIGNING": "false"}
    done = subprocess.run([GATE, "dry-run", "--rulebook-id", "refunds", "--draft", str(draft),
                           "--dataset", str(hostile_dataset), "--allow-unsigned", "--out", str(tmp_path / "cli")],
                          check=False, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert_report_is_text(tmp_path / "cli")
