"""Train a zstd dictionary for the ledger's at-rest encoding (gate/ledger/codec.py).

    .venv/bin/python benchmarks/train_ledger_dictionary.py --id 2 [--per-request 40] [--size 16384]

Decides every sample request under `gate/data/requests/` except `verdict-yes.json` (the sizing
workload stays out of the training set) `--per-request` times through the app on a throwaway
SQLite ledger, with an outcome receipt for every second decision, and trains one dictionary on
the stored records, requests, chain links and receipts. It writes
`gate/ledger/dictionaries/ledger-<id>.zdict` and prints the line to add to
`codec.DICTIONARIES`. A shipped dictionary is never replaced: rows name the id they were
written with, so a new dictionary takes the next id and `codec.CURRENT_DICTIONARY` moves to it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HELD_OUT = "verdict-yes.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--per-request", type=int, default=40)
    parser.add_argument("--size", type=int, default=16384)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import os

    os.environ["GATE_LEDGER_AT_REST"] = "plain"  # the samples are the texts themselves
    import zstandard
    from bench_storage import fill

    from gate.ledger import Ledger
    from gate.ledger.codec import DICTIONARY_DIR

    target = DICTIONARY_DIR / f"ledger-{args.id}.zdict"
    if target.exists():
        raise SystemExit(f"{target} exists: a shipped dictionary is never replaced")
    samples: list[bytes] = []
    for path in sorted((ROOT / "gate" / "data" / "requests").glob("*.json")):
        if path.name == HELD_OUT:
            continue
        with tempfile.TemporaryDirectory() as home:
            url = f"sqlite:///{home}/gate.db"
            ledger = Ledger(url)
            ledger.upgrade()
            ledger.dispose()
            try:
                fill(url, Path(home), args.per_request, json.loads(path.read_text()))
            except RuntimeError as exc:  # a sample that does not decide (e.g. needs an adapter)
                print(f"skipped {path.name}: {exc}")
                continue
            connection = sqlite3.connect(f"{home}/gate.db")
            for query in ("SELECT record_json FROM decisions", "SELECT request_json FROM decisions",
                          "SELECT link_json FROM chain_links", "SELECT receipt_json FROM lifecycle_receipts"):
                samples.extend(row[0].encode("utf-8") for row in connection.execute(query))
            connection.close()
    dictionary = zstandard.train_dictionary(args.size, samples, level=19)
    data = dictionary.as_bytes()
    target.write_bytes(data)
    print(f"{len(samples)} samples -> {target.relative_to(ROOT)} ({len(data)} bytes)")
    print(f'    {args.id}: ("{target.name}", "{hashlib.sha256(data).hexdigest()}"),')
    return 0


if __name__ == "__main__":
    sys.exit(main())
