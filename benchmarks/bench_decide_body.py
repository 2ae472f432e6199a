"""What checking the decide body by its schema (gate/bodies/decide.schema.json) would cost, against
today's hand-written check in the same run (issue 66, item 1).

The baseline is `gate.protocol.requests.prepare_decision_request` on a request of
gate/data/requests/ (the hand check the decide runs, its facts' size walk included). Beside it,
the same body through the schema: `jsonschema`'s validator as `gate.bodies` builds it (the
first error), `jsonschema_rs` (Rust, when installed: `is_valid`, and `iter_errors` for the first
error) and `fastjsonschema` (generated Python, when installed). Each figure is the median of 7
rounds in µs per call, with its ratio to the baseline and the 1-minute load average.

    .venv/bin/python benchmarks/bench_decide_body.py [--request verdict-yes] [--calls 500]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate import bodies  # noqa: E402
from gate.protocol.requests import prepare_decision_request  # noqa: E402


def _median_us(call: Callable[[], object], calls: int) -> float:
    rounds = []
    for _ in range(7):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        rounds.append((time.perf_counter_ns() - start) / calls / 1000)
    return statistics.median(rounds)


def _candidates(schema: dict[str, object], body: object) -> dict[str, Callable[[], object]]:
    validator = bodies.validator("decide")
    found: dict[str, Callable[[], object]] = {"jsonschema (gate.bodies), first error": lambda: next(
        validator.iter_errors(body), None)}
    try:
        import jsonschema_rs
    except ImportError:
        pass
    else:
        compiled = jsonschema_rs.validator_for(schema)
        found["jsonschema_rs is_valid"] = lambda: compiled.is_valid(body)
        found["jsonschema_rs first error"] = lambda: next(compiled.iter_errors(body), None)
    try:
        import fastjsonschema
    except ImportError:
        pass
    else:
        generated = fastjsonschema.compile(schema)
        found["fastjsonschema"] = lambda: generated(body)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--request", default="verdict-yes", help="a request of gate/data/requests/ (no .json)")
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    body = json.loads((ROOT / "gate" / "data" / "requests" / f"{args.request}.json").read_text())
    schema = dict(bodies.schema("decide"))
    print(f"{args.request}.json ({len(json.dumps(body))} bytes), load {os.getloadavg()[0]:.2f}")
    base = _median_us(lambda: prepare_decision_request(body), args.calls)
    print(f"  {'hand check (prepare_decision_request), baseline':52} {base:9.2f} µs")
    for name, call in _candidates(schema, body).items():
        took = _median_us(call, max(1, args.calls // 20) if name.startswith("jsonschema (") else args.calls)
        print(f"  {name:52} {took:9.2f} µs  {took / base:6.2f}×")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
