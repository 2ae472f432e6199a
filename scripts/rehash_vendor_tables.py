"""Recompute `source_hash` of every row of the vendor policy tables after a reviewed edit.

Usage: python scripts/rehash_vendor_tables.py [directory]   (default gate/data/policychecks)

Run it only after checking the edited rows against their `source_url` and updating
`last_verified`: the loader refuses any row whose hash does not match its sourced material.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gate.policychecks.tables import SERVICES, TABLES_DIR, load_table, row_source_hash  # noqa: E402


def main(argv: list[str]) -> int:
    directory = Path(argv[0]) if argv else TABLES_DIR
    for service in SERVICES:
        path = directory / f"{service}.table.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        changed = 0
        for row in doc["rows"]:
            digest = row_source_hash(row)
            if row.get("source_hash") != digest:
                row["source_hash"] = digest
                changed += 1
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        load_table(path)  # the result must load
        print(f"{path}: {changed} row hash(es) updated")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
