"""Vendor policy tables: schema, hashes, uniqueness, lookup (gate/policychecks/tables.py)."""

from __future__ import annotations

import json
import shutil
from datetime import date

import jsonschema
import pytest

from gate.policychecks.tables import (
    SERVICES,
    TABLE_SCHEMA_PATH,
    TABLES_DIR,
    VendorTableInvalid,
    load_table,
    load_tables,
    normalize_id,
    row_source_hash,
)


def test_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(json.loads(TABLE_SCHEMA_PATH.read_text()))


@pytest.mark.parametrize("service", SERVICES)
def test_shipped_tables_validate_and_are_marked_illustrative(service):
    doc = json.loads((TABLES_DIR / f"{service}.table.json").read_text())
    jsonschema.Draft202012Validator(json.loads(TABLE_SCHEMA_PATH.read_text())).validate(doc)
    table = load_tables()[service]
    assert table.service == service and table.illustrative is True
    assert "Illustrative" in table.notice
    assert len(table.rows) >= 10
    for row in table.rows:
        assert row.source_url.startswith("https://")
        assert isinstance(row.last_verified, date)
        assert row.source_hash == row_source_hash(row.as_dict())


def test_a_dozen_or_more_vendors_overall():
    vendors = set().union(*(set(t.vendors()) for t in load_tables().values()))
    assert len(vendors) >= 12


def test_lookup_prefers_the_exact_plan_then_any_plan_and_normalizes():
    refund = load_tables()["refund"]
    assert refund.lookup("Microsoft 365", "us", "Monthly").terms["refunds_offered"] is False
    assert refund.lookup("microsoft-365", "US", "annual").terms["refund_window_days"] == 30
    assert refund.lookup("Adobe", "US", "whatever").plan == "*"
    assert refund.lookup("adobe", "DE", "annual") is None
    assert refund.lookup("unknown-vendor", "US", "basic") is None
    assert refund.has_vendor("ADOBE") and not refund.has_vendor("nobody")
    assert normalize_id("  Best   Buy! ") == "best-buy"


def _copy(tmp_path):
    target = tmp_path / "tables"
    shutil.copytree(TABLES_DIR, target)
    return target


def _edit(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def test_changed_terms_without_a_new_hash_are_refused(tmp_path):
    directory = _copy(tmp_path)
    path = directory / "refund.table.json"
    _edit(path, lambda d: d["rows"][0]["terms"].update(refund_window_days=999))
    with pytest.raises(VendorTableInvalid, match="rows/0: source_hash"):
        load_table(path)
    with pytest.raises(VendorTableInvalid):
        load_tables(directory)


def test_notes_are_commentary_outside_the_hash(tmp_path):
    path = _copy(tmp_path) / "trial.table.json"
    _edit(path, lambda d: d["rows"][0].update(notes="reworded"))
    assert load_table(path).rows[0].notes == "reworded"


def test_duplicate_rows_are_refused(tmp_path):
    path = _copy(tmp_path) / "return.table.json"
    _edit(path, lambda d: d["rows"].append(dict(d["rows"][0])))
    with pytest.raises(VendorTableInvalid, match="duplicate"):
        load_table(path)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["rows"][0]["terms"].update(surprise=1), "Additional properties"),
    (lambda d: d["rows"][0].update(source_url="http://insecure.example"), "source_url"),
    (lambda d: d["rows"][0].update(last_verified="2026-13-45"), "calendar date"),
    (lambda d: d["rows"][0]["terms"].pop("refunds_offered"), "refunds_offered"),
    (lambda d: d.update(service="warranty"), "service"),
    (lambda d: d.update(rows=[]), "rows"),
])
def test_off_schema_tables_are_refused(tmp_path, change, message):
    path = _copy(tmp_path) / "refund.table.json"
    _edit(path, change)
    with pytest.raises(VendorTableInvalid, match=message):
        load_table(path)


def test_unreadable_table_is_refused(tmp_path):
    path = _copy(tmp_path) / "refund.table.json"
    path.write_text("{not json")
    with pytest.raises(VendorTableInvalid, match="unreadable"):
        load_table(path)
