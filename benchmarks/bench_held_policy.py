"""A held decide against a plain one, in one process, with the hold policy read as before issue 68
and as now (issue 68, item 4; docs/operating.md "The hold policy a decide reads").

One app over a SQLite ledger (`--backend postgresql`: a throw-away PostgreSQL database), group
commit on, the scope's hold policy set once through `PUT /api/holds/policy` (`--policy default`:
left at the default). Each round runs three arms in a rotated order, `--decides` each through the
Flask test client, and reads this process's CPU time (every thread, the ledger's writer too):

* `plain`: the sample pricing request, approved (no hold) — the baseline;
* `held`: the same request with a thin margin, which rule `review_thin_margin` holds: the hold
  policy kept by the version the database states (`SafeguardSettings.hold_policy`);
* `held_before`: the same held request with the hold opener reading the policy as it did before
  (`SafeguardSettings.value(scope, HOLD_POLICY)` uncached: the governance head's event and, before
  the chain governs it, the hold chain's newest policy step, on every decide).

Printed per round: µs of CPU per decide per arm and each held arm as a throughput ratio to
`plain` (plain CPU ÷ held CPU: 1.0 means a held decide costs what a plain one does), with the
statements a held decide ran and the CPU of the hold policy's read alone (`HoldOpener.policy`,
`--decides` calls); then the medians over the rounds.

    .venv/bin/python benchmarks/bench_held_policy.py [--decides 500] [--rounds 5] [--backend postgresql]
                                                     [--policy default]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate_app import bench_app, bench_key  # noqa: E402

REQUEST = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())
POLICY = {"default_queue": "default", "four_eyes": True,
          "queues": {"default": {"deadline_seconds": 3600, "quorum": "any", "members": [],
                                 "require_justification": False, "escalate_after_seconds": None,
                                 "escalate_to": None},
                     "finance": {"deadline_seconds": 600, "quorum": "any", "members": [],
                                 "require_justification": False, "escalate_after_seconds": None,
                                 "escalate_to": None}},
          "routes": [{"policy_id": "pricing_exception", "rule_id": "review_thin_margin", "queue": "finance",
                      "priority": "urgent"}]}


def _bodies() -> tuple[bytes, bytes]:
    held = copy.deepcopy(REQUEST)
    held["context"]["inputs"]["margin_percent"] = 12
    return json.dumps(REQUEST).encode(), json.dumps(held).encode()


def _before(opener: Any) -> None:
    """Make `opener` read the hold policy as before issue 68: uncached, every decide."""
    from gate.governance.table import HOLD_POLICY
    from gate.services.governance import SafeguardSettings

    uncached = SafeguardSettings(opener.holds.ledger, cache_seconds=0)
    opener.policy = lambda scope: uncached.value(scope, HOLD_POLICY)


def _run(client: Any, headers: dict[str, str], body: bytes, verdict: str, n: int) -> float:
    """CPU seconds of `n` decides of `body`."""
    start = time.process_time()
    for _ in range(n):
        answer = client.post("/api/decide", data=body, headers=headers)
        assert answer.status_code == 200 and answer.get_json()["verdict"] == verdict, answer.data
    return time.process_time() - start


def _statements(app: Any, client: Any, headers: dict[str, str], body: bytes) -> int:
    from sqlalchemy import event

    engine, seen = app.extensions["gate"].ledger.engine, []
    listener = lambda *_args: seen.append(1)  # noqa: E731
    event.listen(engine, "before_cursor_execute", listener)
    try:
        client.post("/api/decide", data=body, headers=headers)
    finally:
        event.remove(engine, "before_cursor_execute", listener)
    return len(seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decides", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--policy", choices=("governed", "default"), default="governed")
    args = parser.parse_args()
    plain, held = _bodies()
    with tempfile.TemporaryDirectory() as home:
        from bench_http import _database

        database, drop = _database(args.backend, Path(home))
        settings, app = bench_app(Path(home), database, {"GATE_LEDGER_GROUP_COMMIT": "true"})
        key = bench_key(settings)
        client, headers = app.test_client(), {"x-api-key": key, "content-type": "application/json"}
        if args.policy == "governed":
            answer = client.put("/api/holds/policy", json=POLICY, headers={"x-api-key": key})
            assert answer.status_code == 200, answer.get_json()
        pipeline = app.extensions["gate"].service.pipeline
        now_opener = pipeline.holds
        before_opener = type(now_opener)(now_opener.holds.ledger, now_opener.inbox_base)
        _before(before_opener)
        arms = {"plain": (plain, "yes", now_opener), "held": (held, "review", now_opener),
                "held_before": (held, "review", before_opener)}
        for name, (body, verdict, opener) in arms.items():  # warm up every arm
            pipeline.holds = opener
            _run(client, headers, body, verdict, 50)
            print(f"{name}: {_statements(app, client, headers, body)} statements a decide", flush=True)
        for name, opener in (("held", now_opener), ("held_before", before_opener)):
            start = time.process_time()
            for _ in range(args.decides):
                opener.policy("bench")
            print(f"{name}: the hold policy read alone {(time.process_time() - start) / args.decides * 1e6:.0f} µs",
                  flush=True)
        rows: list[dict[str, float]] = []
        for round_no in range(args.rounds):
            names = list(arms)[round_no % 3:] + list(arms)[:round_no % 3]
            cpu: dict[str, float] = {}
            for name in names:
                body, verdict, opener = arms[name]
                pipeline.holds = opener
                cpu[name] = _run(client, headers, body, verdict, args.decides) / args.decides
            row = {"held": cpu["plain"] / cpu["held"], "held_before": cpu["plain"] / cpu["held_before"]}
            rows.append(row)
            print(f"round {round_no + 1} (load {os.getloadavg()[0]:.1f}): "
                  + "  ".join(f"{n} {cpu[n] * 1e6:.0f} µs" for n in arms)
                  + f"  | held ÷ plain {row['held']:.2f}×, held_before ÷ plain {row['held_before']:.2f}×", flush=True)
        pipeline.holds = now_opener
        app.extensions["gate"].ledger.dispose()
        drop()
    print(f"median over {args.rounds} rounds ({args.backend}, {args.policy} policy): "
          f"held {statistics.median(r['held'] for r in rows):.2f}× plain, "
          f"held_before {statistics.median(r['held_before'] for r in rows):.2f}× plain")


if __name__ == "__main__":
    main()
