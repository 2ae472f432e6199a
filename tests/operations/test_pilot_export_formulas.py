"""The pilot export against spreadsheet formula injection (issue 18, item 6), over HTTP: hostile
intakes go in through `POST /api/pilot`, the CSV comes out of `GET /api/pilot-export`, and it is
read with every separator a spreadsheet may pick. No cell of any reading starts a formula."""

from __future__ import annotations

import csv
import io

import pytest

TOKEN = "metrics-token-0123456789abcdef"
INTAKE = {"company": "Acme GmbH", "contact_name": "Ada Example", "contact_email": "ada@acme.example",
          "use_case": "refund_review", "monthly_decisions": 20000, "notes": "Pilot for the EU helpdesk.",
          "consent": True}
SEPARATORS = (",", ";", "\t", "|")
FORMULA_STARTS = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")

# (field, hostile value): the issue's own example first, then variants of each way in.
HOSTILE = [
    ("company", "Acme;=cmd|' /C calc'!A0;@SUM(1+1)"),
    ("company", "=HYPERLINK(\"http://evil.example\")"),
    ("company", "Beta, +1+1"),
    ("company", "Gamma|-2+3"),
    ("company", "Delta; \"@SUM(A1)"),
    ("company", "Eps;'=1+1"),
    ("company", "Zeta \uff1d1+1;\uff20SUM(1)"),
    ("contact_name", "Ada;\"  =1+1"),
    ("notes", "line one\n=cmd|' /C calc'!A0"),
    ("notes", "note:\t=1+1"),
    ("notes", "a\tb\t-3+4\r\n@x"),
]


@pytest.fixture
def ops(make_app):
    return make_app({"GATE_METRICS_TOKEN": TOKEN})


def _export(ops) -> str:
    client = ops.test_client()
    for index, (field, value) in enumerate(HOSTILE):
        intake = {**INTAKE, "contact_email": f"p{index}@acme.example", field: value}
        response = client.post("/api/pilot", json=intake, environ_base={"REMOTE_ADDR": f"10.0.0.{index + 1}"})
        assert response.status_code == 201, response.json
    response = client.get("/api/pilot-export", headers={"x-metrics-token": TOKEN})
    assert response.status_code == 200 and response.mimetype == "text/csv"
    return response.get_data(as_text=True)


def _formula_cells(text: str, separator: str) -> list[str]:
    """Cells of `text` read with `separator` whose first character after spaces and quotes starts
    a formula; each line is read both as CSV and split naively (as a careless import does)."""
    cells = [cell for row in csv.reader(io.StringIO(text, newline=""), delimiter=separator) for cell in row]
    cells += [cell for line in text.splitlines() for cell in line.split(separator)]
    return [cell for cell in cells if cell.lstrip(" \t\"").startswith(FORMULA_STARTS)]


@pytest.mark.parametrize("separator", SEPARATORS, ids=["comma", "semicolon", "tab", "pipe"])
def test_no_cell_starts_a_formula_under_any_separator(ops, separator):
    text = _export(ops)
    assert _formula_cells(text, separator) == []


def test_every_field_is_quoted_and_reads_back_with_the_documented_prefixes(ops):
    text = _export(ops)
    assert text.startswith('"pilot_id","created_at",')
    quoted = io.StringIO()
    csv.writer(quoted, lineterminator="\r\n", quoting=csv.QUOTE_ALL).writerows(
        csv.reader(io.StringIO(text, newline="")))
    assert quoted.getvalue() == text  # every field, numbers and empty ones too, is quoted
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    # Rows are oldest first by (created_at, pilot_id): intakes of the same millisecond come in
    # pilot_id order, so each is found by its own contact_email, not by its position.
    by_email = {row["contact_email"]: row for row in rows}
    exported = {(field, value): by_email[f"p{index}@acme.example"][field] for index, (field, value) in enumerate(HOSTILE)}
    # The exact rule (docs/operations.md): ' in front of a field starting a formula, and after each
    # , ; tab | CR LF inside it that spaces, quotes and then a formula character follow.
    assert exported[HOSTILE[0]] == "Acme;'=cmd|' /C calc'!A0;'@SUM(1+1)"
    assert exported[HOSTILE[1]] == "'=HYPERLINK(\"http://evil.example\")"
    assert exported[HOSTILE[2]] == "Beta,' +1+1"
    assert exported[HOSTILE[5]] == "Eps;''=1+1"
    assert exported[HOSTILE[6]] == "Zeta \uff1d1+1;'\uff20SUM(1)"
    assert exported[HOSTILE[8]] == "line one\n'=cmd|' /C calc'!A0"
    assert exported[HOSTILE[9]] == "note:\t'=1+1"
    assert rows[0]["monthly_decisions"] == "20000" and rows[0]["status"] == "submitted"


def test_plain_text_is_exported_unchanged(ops):
    client = ops.test_client()
    plain = {**INTAKE, "company": "Müller & Söhne; Vertrieb | Nord", "notes": "Price: 3-4 EUR, e-mail a@b.example"}
    assert client.post("/api/pilot", json=plain).status_code == 201
    rows = list(csv.DictReader(io.StringIO(client.get("/api/pilot-export", headers={
        "x-metrics-token": TOKEN}).get_data(as_text=True), newline="")))
    assert rows[0]["company"] == plain["company"] and rows[0]["notes"] == plain["notes"]
