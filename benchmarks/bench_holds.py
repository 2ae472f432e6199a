"""Held actions in the analytics (issue 43, item 6): what the hold tables cost the export, and what
the hold report and the dry-run's measured cost of a hold say and cost, on the demo history.

Steps, each timed (wall clock, this process; load average beside):

1. seed the demo scenario (`--decisions`, SQLite; the seed resolves most holds as the scenario's
   reviewers) and resolve the holds it left open through the real hold service on a moving
   clock: for each such hold, in opening order, with a seeded draw, a reviewer
   (one of three API keys) approves (`--approve` share) or denies (`--deny`) it after a
   log-normal wait (median 2 h), or nobody acts and the clock's sweep (run as each later hold
   opens, and once at the end) expires it after its deadline;
2. `export_ledger` into a new location (signed), with the time its hold step takes inside it
   (`export._export_holds`, timed per scope), then a run with nothing new;
3. the hold report of `pricing_exception` in the first scope from the dataset and from the
   ledger (`holds_from_dataset`, `holds_from_ledger`; medians of `--rounds`);
4. the dry-run of the current `pricing_exception` rulebook over the dataset: its cost-of-a-hold line;
5. the engine alone over a synthetic frame of `--synthetic` holds (median of `--rounds`).

Run: .venv/bin/python benchmarks/bench_holds.py [--decisions 20000] [--rounds 5] [--synthetic 200000]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gate.clock import iso_ms  # noqa: E402
from gate.keys.config import SigningSetup  # noqa: E402
from gate.keys.signing import generate_keyring  # noqa: E402
from gate.ledger import Ledger  # noqa: E402
from gate.ledger.tables import holds as holds_table  # noqa: E402
from gate.principals import Principal  # noqa: E402
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS  # noqa: E402
from gate.reports.params import ReportParams  # noqa: E402
from gate.reports.registry import REPORTS, Cohort  # noqa: E402
from gate.services.root import hold_service  # noqa: E402
from workbench.dataset import export as export_module  # noqa: E402
from workbench.dataset.export import export_ledger  # noqa: E402
from workbench.dataset.load import conform, empty, holds_from_dataset, holds_from_ledger  # noqa: E402
from workbench.demo import scenario  # noqa: E402
from workbench.demo.seed import seed_ledger_at  # noqa: E402
from workbench.engines.holds import hold_report  # noqa: E402
from workbench.migration import dry_run  # noqa: E402
from workbench.migration.holdcost import hold_cost_text  # noqa: E402
from workbench.reports.holdtext import health_line  # noqa: E402
from workbench.reports.policy import build_report  # noqa: E402

REVIEWERS = ("key_rev_a", "key_rev_b", "key_rev_c")
POLICY = "pricing_exception"


class Clock:
    def __init__(self) -> None:
        self.at = datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.at


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _timed(label: str, call):
    started = time.perf_counter()
    value = call()
    print(f"{label}: {time.perf_counter() - started:.2f} s (load {_load()})")
    return value


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def resolve(ledger: Ledger, signing: SigningSetup, args: argparse.Namespace) -> dict[str, int]:
    """Approve, deny or leave each hold the seed left open (seeded), then sweep the rest past their
    deadlines. (The demo seed resolves its holds itself, as the scenario's reviewers: then nothing is left.)"""
    clock = Clock()
    service = hold_service(ledger, signing, clock)
    rng = random.Random(args.seed)
    with ledger.read() as connection:
        rows = [dict(r) for r in connection.execute(
            holds_table.select().where(holds_table.c.state == "open")
            .order_by(holds_table.c.opened_at, holds_table.c.decision_id)).mappings()]
    counts = {"approved": 0, "denied": 0, "left": 0}
    for row in rows:
        clock.at = _utc(row["opened_at"])  # the clock's pass as each hold opens: earlier ones past their deadline expire
        service.sweep(limit=500)
        draw = rng.random()
        wait = timedelta(minutes=min(rng.lognormvariate(4.8, 1.0), 23 * 60))  # median about 2 h, within the day
        if draw >= args.approve + args.deny:
            counts["left"] += 1
            continue
        decision = "approve" if draw < args.approve else "deny"
        clock.at = _utc(row["opened_at"]) + wait
        service.resolve(row["scope"], Principal.api_key(rng.choice(REVIEWERS)), frozenset({"resolve"}),
                        row["decision_id"], {"decision": decision, "reason_code": "CHECKED"})
        counts["approved" if decision == "approve" else "denied"] += 1
    clock.at = datetime(2027, 1, 1, tzinfo=UTC)
    while service.sweep(limit=500):
        pass
    return counts


def synthetic(n: int, seed: int) -> pl.LazyFrame:
    """`n` holds over 180 days: 70% approved, 15% denied, 10% expired, 5% open, in 5 queues."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for i in range(n):
        opened = start + timedelta(seconds=rng.randrange(0, 180 * 86_400))
        state = rng.choices(("approved", "denied", "expired", "open"), (70, 15, 10, 5))[0]
        resolved = None if state == "open" else opened + timedelta(seconds=rng.randrange(60, 86_400))
        rows.append({"decision_id": f"d{i:07d}", "opened_at": opened, "policy_id": POLICY, "policy_version": "v1",
                     "rule_id": "r", "reason_code": "R", "queue": f"q{i % 5}", "priority": "normal",
                     "deadline_at": opened + timedelta(days=1), "state": state, "resolved_at": resolved,
                     "resolved_by": None if resolved is None else ("clock" if state == "expired" else f"k{i % 40}"),
                     "approvals": 1 if state == "approved" else 0, "approvals_needed": 1, "record_hash": "1" * 64,
                     "last_event_seq": i, "scope": "s", "month": opened.strftime("%Y-%m")})
    return conform(pl.DataFrame(rows), "holds").collect().lazy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=20_000)
    parser.add_argument("--approve", type=float, default=0.6)
    parser.add_argument("--deny", type=float, default=0.2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--synthetic", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-holds-"))
    keyring = work / "keys.json"
    generate_keyring(keyring, "2026-01-01T00:00:00.000Z")
    signing = SigningSetup.load(keyring, None, "hmac")
    url = f"sqlite:///{work / 'gate.db'}"
    _timed(f"seed {args.decisions:,} demo decisions", lambda: seed_ledger_at(url, signing, decisions=args.decisions))
    ledger = Ledger(url)
    counts = _timed("resolve the holds (reviewers, then the clock)", lambda: resolve(ledger, signing, args))
    print(f"  holds: {counts}")
    root = work / "ds"
    now = datetime(2027, 1, 2, tzinfo=UTC)
    real, spent = export_module._export_holds, [0.0]

    def timed_holds(*args, **kwargs):  # the hold step of each scope, timed inside the export
        started = time.perf_counter()
        real(*args, **kwargs)
        spent[0] += time.perf_counter() - started

    export_module._export_holds = timed_holds
    try:
        first = _timed("export (full)", lambda: export_ledger(ledger, str(root), now=now, settle_seconds=0,
                                                              signer=signing.receipt_signer()))
    finally:
        export_module._export_holds = real
    print(f"  of which the hold step (snapshot, hold states, hold events): {spent[0]:.2f} s")
    print(f"  rows: {first.new_rows}")
    hold_files = sum(f["bytes"] for name in ("holds", "hold_events") for f in first.manifest["tables"][name]["files"])
    print(f"  hold tables: {hold_files:,} bytes in "
          f"{sum(len(first.manifest['tables'][n]['files']) for n in ('holds', 'hold_events'))} files")
    again = _timed("export (nothing new)", lambda: export_ledger(ledger, str(root), now=now, settle_seconds=0,
                                                                 signer=signing.receipt_signer()))
    print(f"  run: {again.run}")
    scope = scenario.SCOPES[0]
    kind, params, anchors = REPORTS["holds"], ReportParams(), signing.trust_anchors()

    def from_dataset():
        return build_report(kind, holds_from_dataset(root, scopes=[scope], policy_id=POLICY, trust=anchors), POLICY, params,
                          Cohort())

    def from_ledger():
        return build_report(kind, holds_from_ledger(ledger, scope, POLICY, limit=1000, as_of=now), POLICY, params, Cohort())

    for label, call in (("hold report from the dataset", from_dataset), ("hold report from the ledger", from_ledger)):
        times = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            report = call()
            times.append(time.perf_counter() - started)
        print(f"{label}: median {statistics.median(times) * 1000:.0f} ms of {args.rounds} (load {_load()})")
    print(f"  window: {report['window']['text']}")
    print(f"  {scope} {POLICY}: {health_line(report['holds'])}")
    later = report["holds"]["later_failed"]
    print(f"  approved, later failed: {later['failed']}/{later['n']} ({later['rate']}, 95% {later['interval_95']}); "
          f"too young {later['too_young']}, no terminal outcome {later['no_terminal_outcome']}")
    draft = scenario.load_rulebook(POLICY, 1)  # its one version, replayed over its own history
    run = _timed("dry-run over the dataset", lambda: dry_run(draft, POLICY, scope=scope, dataset=root,
                                                             created_at=iso_ms(now), anchors=anchors))
    print(f"  cost of a hold: {hold_cost_text(run.result['review_load']['hold_cost'])}")
    frame = synthetic(args.synthetic, args.seed)
    times = []
    for _ in range(args.rounds):
        started = time.perf_counter()
        hold_report(frame, empty("outcomes"), OUTCOME_EFFECTIVENESS_CLASS, as_of=now, limit=None,
                    outcome_window_days=30)
        times.append(time.perf_counter() - started)
    print(f"engine over {args.synthetic:,} synthetic holds: median {statistics.median(times) * 1000:.0f} ms "
          f"(load {_load()})")
    ledger.dispose()


if __name__ == "__main__":
    main()
