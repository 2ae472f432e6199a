"""What a data subject's export costs (issue 67, item 5; docs/privacy.md §4): one call of
`SubjectService.export` over a seeded ledger, whose scope declares `context.target_object_id` the
subject's key (and `context.actor` personal), for a key the scope holds and one it does not, whole
(every page followed) and per page of `--page` rows.

    gate demo seed --decisions 20000          (GATE_HOME=DIR: the ledger to read)
    GATE_HOME=DIR .venv/bin/python benchmarks/bench_subjects.py [--scope demo] [--page 2000]

Best of three runs, ms; rows read per second; /proc/loadavg beside. The data map is handed to the
service as its cache would hold it (the settings' governed change is not what is timed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _best(call: Callable[[], Any]) -> tuple[float, Any]:
    best, answer = float("inf"), None
    for _ in range(3):
        start = time.perf_counter()
        answer = call()
        best = min(best, time.perf_counter() - start)
    return best * 1000, answer


def main() -> int:
    from gate.ledger import Ledger
    from gate.ledger.stream import iter_decisions
    from gate.privacy.datamap import DataMap, PrivacySettings
    from gate.services import subjects
    from gate.services.governance import SafeguardSettings
    from gate.services.privacy import PrivacyService
    from gate.settings import Settings
    from gate_cli.subject_cmd import whole_export

    parser = argparse.ArgumentParser()
    parser.add_argument("--scope", default="demo")
    parser.add_argument("--page", type=int, default=2000)
    args = parser.parse_args()
    settings = Settings.from_env()
    ledger = Ledger(settings.database_url)
    declared = PrivacySettings(DataMap({"context.actor": "personal"}, "context.target_object_id"))

    class Declared(PrivacyService):
        def settings(self, scope: str) -> PrivacySettings:
            return declared

    privacy = Declared(ledger, SafeguardSettings(ledger), b"k" * 32)
    first = next(iter_decisions(ledger, scope=args.scope, batch_size=1))[0]
    key = json.loads(first["request_json"])["context"]["target_object_id"]
    service = subjects.SubjectService(ledger, privacy)
    for label, subject in (("held key", str(key)), ("absent key", "cus_nobody")):
        ms, whole = _best(lambda s=subject: whole_export(service, args.scope, s))
        rows = whole["scanned"]["decisions"] + whole["scanned"]["events"]
        print(f"{label}: whole export {ms:.0f} ms, {rows:,} rows read ({rows / ms * 1000:,.0f}/s), "
              f"{len(whole['decisions'])} decisions, {len(whole['holds'])} holds, {len(whole['events'])} events")
    paged = subjects.SubjectService(ledger, privacy, page_rows=args.page)
    ms, page = _best(lambda: paged.export(args.scope, str(key)))
    print(f"one page of {args.page:,} rows: {ms:.0f} ms (next: {page['next'] is not None})")
    print("loadavg:", Path("/proc/loadavg").read_text().strip())
    ledger.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
