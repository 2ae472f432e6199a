"""Vendor policy tables: the data the four policy-check services look up before their rulebooks decide.

One JSON file per service (`gate/data/policychecks/<service>.table.json`), each validated at load
against `gate/schemas/vendor-policy-table-v1.schema.json` and against what JSON Schema cannot say:
`(vendor, region, plan)` is unique in a table, and every row's `source_hash` is the sha256 of
the row's sourced material (`row_source_hash`). A table that fails either check is refused
(`VendorTableInvalid`): SECURITY, a hand-edited row whose terms changed without its hash being
recomputed (`scripts/rehash_vendor_tables.py`) never answers a check.

Public interface:

- `load_tables(directory=None) -> dict[str, VendorTable]` keyed by service name
  (`refund`, `cancellation`, `return`, `trial`); cached per directory.
- `VendorTable.lookup(vendor, region, plan) -> VendorRow | None`: exact plan first, then the
  row for any plan (`"*"`); `vendor` and `plan` are matched after `normalize_id`, `region`
  after upper-casing.
- `VendorRow.last_verified` (a `datetime.date`), `.source_url`, `.source()` (the citation).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypedDict

import jsonschema

from gate.errors import CodedError
from gate.protocol.canonical import sha256_bytes_hex, sha256_hex
from gate.resources import data_path, schemas_path

__all__ = [
    "SERVICES",
    "TABLES_DIR",
    "TABLE_SCHEMA_PATH",
    "TABLE_SCHEMA_VERSION",
    "VendorRow",
    "VendorTable",
    "VendorTableInvalid",
    "load_table",
    "load_tables",
    "normalize_id",
    "row_source_hash",
    "table_schema",
]

SERVICES = ("refund", "cancellation", "return", "trial")
TABLE_SCHEMA_VERSION = "vendor_policy_table_v1"
TABLES_DIR = data_path("policychecks")
TABLE_SCHEMA_PATH = schemas_path("vendor-policy-table-v1.schema.json")
ANY_PLAN = "*"
_SOURCED_FIELDS = ("vendor", "region", "plan", "terms", "source_url", "last_verified")
_NOT_ID = re.compile(r"[^a-z0-9_-]+")


class VendorTableInvalid(CodedError):
    """A vendor policy table file is unreadable, off-schema, has duplicate keys or a wrong hash."""

    CODE = "POLICY_TABLE_INVALID"


def normalize_id(value: str) -> str:
    """`"Best Buy"` → `"best-buy"`: lower case, runs of other characters become one hyphen."""
    return _NOT_ID.sub("-", value.strip().lower()).strip("-")


def row_source_hash(row: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of the row's sourced material.

    Covers `vendor, region, plan, terms, source_url, last_verified`: a change of terms, source or
    verification date needs a new hash. `notes` and `vendor_name` are commentary, not covered.
    """
    return sha256_hex({name: row[name] for name in _SOURCED_FIELDS})


class Citation(TypedDict):
    """What a check cites of a row: the vendor, region and plan, where the terms are from, when
    they were last verified, and the row's source hash."""

    vendor: str
    region: str
    plan: str
    source_url: str
    notes: str
    last_verified: str  # ISO date
    source_hash: str


class VendorRowJSON(TypedDict):
    """A row as it stands in the table file."""

    vendor: str
    vendor_name: str
    category: str
    region: str
    plan: str
    terms: dict[str, Any]  # the vendor's terms as the table states them
    source_url: str
    notes: str
    last_verified: str  # ISO date
    source_hash: str


@dataclass(frozen=True, slots=True, eq=False)
class VendorRow:
    vendor: str
    vendor_name: str
    category: str
    region: str
    plan: str
    terms: Mapping[str, Any]
    source_url: str
    notes: str
    last_verified: date
    source_hash: str

    def as_dict(self) -> VendorRowJSON:
        """The row as it stands in the table file."""
        return {
            "vendor": self.vendor, "vendor_name": self.vendor_name, "category": self.category,
            "region": self.region, "plan": self.plan, "terms": dict(self.terms),
            "source_url": self.source_url, "notes": self.notes,
            "last_verified": self.last_verified.isoformat(), "source_hash": self.source_hash,
        }

    def source(self) -> Citation:
        """The citation a check answers with."""
        return {
            "vendor": self.vendor, "region": self.region, "plan": self.plan,
            "source_url": self.source_url, "notes": self.notes,
            "last_verified": self.last_verified.isoformat(), "source_hash": self.source_hash,
        }


@dataclass(frozen=True, slots=True, eq=False)
class VendorTable:
    service: str
    table_version: str
    illustrative: bool
    notice: str
    rows: tuple[VendorRow, ...]
    table_hash: str  # sha256 of the file's raw bytes
    path: Path
    index: Mapping[tuple[str, str, str], VendorRow] = field(repr=False, compare=False)
    vendor_ids: frozenset[str] = field(repr=False, compare=False)

    def lookup(self, vendor: str, region: str, plan: str) -> VendorRow | None:
        index = self.index
        key_vendor, key_region, key_plan = normalize_id(vendor), region.strip().upper(), normalize_id(plan)
        return index.get((key_vendor, key_region, key_plan)) or index.get((key_vendor, key_region, ANY_PLAN))

    def has_vendor(self, vendor: str) -> bool:
        return normalize_id(vendor) in self.vendor_ids

    def vendors(self) -> tuple[str, ...]:
        return tuple(sorted(self.vendor_ids))

    def policy_version(self) -> str:
        """`<service>@<table_version>`: the version a check reports beside its rulebook's."""
        return f"{self.service}@{self.table_version}"


@functools.lru_cache(maxsize=1)
def table_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(TABLE_SCHEMA_PATH.read_text(encoding="utf-8"))
    return schema


def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(table_schema())


def load_table(path: Path) -> VendorTable:
    """Read, validate and freeze one table file; `VendorTableInvalid` names every problem."""
    try:
        raw = path.read_bytes()
        doc = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise VendorTableInvalid(f"{path.name}: unreadable: {exc}") from exc
    problems = [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}"
        for error in sorted(_validator().iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))
    ]
    if problems:
        raise VendorTableInvalid(f"{path.name}: " + "; ".join(problems))
    seen: set[tuple[str, str, str]] = set()
    rows = []
    for position, item in enumerate(doc["rows"]):
        key = (item["vendor"], item["region"], item["plan"])
        if key in seen:
            problems.append(f"rows/{position}: duplicate (vendor, region, plan) {key}")
        seen.add(key)
        if row_source_hash(item) != item["source_hash"]:
            problems.append(f"rows/{position}: source_hash is not the sha256 of the row's sourced material")
        try:
            verified = date.fromisoformat(item["last_verified"])
        except ValueError:
            problems.append(f"rows/{position}: last_verified is not a calendar date")
            continue
        rows.append(VendorRow(
            vendor=item["vendor"], vendor_name=item["vendor_name"], category=item["category"],
            region=item["region"], plan=item["plan"], terms=MappingProxyType(dict(item["terms"])),
            source_url=item["source_url"], notes=item["notes"], last_verified=verified,
            source_hash=item["source_hash"],
        ))
    if problems:
        raise VendorTableInvalid(f"{path.name}: " + "; ".join(problems))
    return VendorTable(
        service=doc["service"], table_version=doc["table_version"], illustrative=doc["illustrative"],
        notice=doc["notice"], rows=tuple(rows), table_hash=sha256_bytes_hex(raw), path=path,
        index=MappingProxyType({(r.vendor, r.region, r.plan): r for r in rows}),
        vendor_ids=frozenset(r.vendor for r in rows),
    )


@functools.lru_cache(maxsize=8)
def _load_cached(directory: Path) -> Mapping[str, VendorTable]:
    tables: dict[str, VendorTable] = {}
    for service in SERVICES:
        table = load_table(directory / f"{service}.table.json")
        if table.service != service:
            raise VendorTableInvalid(f"{service}.table.json: declares service {table.service!r}")
        tables[service] = table
    return MappingProxyType(tables)


def load_tables(directory: Path | None = None) -> dict[str, VendorTable]:
    """All four tables, validated; read once per directory (files are immutable while serving)."""
    return dict(_load_cached(Path(directory or TABLES_DIR).resolve()))
