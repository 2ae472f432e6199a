"""What declaring bodies and event payloads as JSON Schema costs (issue 54, item 2; gate/bodies).

Three figures, each against a baseline measured in the same run, interleaved:

1. A hold-policy PUT's parse (`HoldPolicy.from_json`, 10 queues and 20 routes): whole, and the
   schema check alone (`bodies.check`), against the body's canonical JSON (which the PUT signs).
2. One event's data check (`bodies.check_event_data`) for `hold.opened` and `decision.created`.
3. `POST /api/decide` through the Flask test client on SQLite, a held (`review`) decide, whose
   transaction writes `hold.opened`: with the data check, and with it replaced by a no-op. A
   decide's body is not validated by these schemas (the decide path is unchanged).

    .venv/bin/python benchmarks/bench_bodies.py [--decides 200]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gate.events.cloudevent as cloudevent  # noqa: E402
from gate import bodies  # noqa: E402
from gate.holds.policy import HoldPolicy  # noqa: E402
from gate.keys.signing import generate_keyring  # noqa: E402
from gate.protocol.canonical import canonical_text  # noqa: E402

_DESK = {"deadline_seconds": 7200, "quorum": "any", "members": [], "require_justification": False,
         "escalate_after_seconds": None, "escalate_to": None}
POLICY = {"default_queue": "default", "four_eyes": True,
          "queues": {"default": {**_DESK, "quorum": "two", "require_justification": True,
                                 "escalate_after_seconds": 600, "escalate_to": "desk"},
                     "desk": _DESK, **{f"q{i}": _DESK for i in range(8)}},
          "routes": [{"policy_id": f"refunds.p{i}", "rule_id": None, "queue": "desk", "priority": "high"}
                     for i in range(20)]}
OPENED = {"decision_id": "dec_" + "a" * 24, "record_hash": "a" * 64, "queue": "default", "priority": "normal",
          "deadline_at": "2026-01-01T00:00:00.000Z", "policy_id": "refunds", "rule_id": "r1", "reason_code": "R",
          "inbox_url": None}


def _median_us(call: Callable[[], object], calls: int = 500) -> float:
    rounds = []
    for _ in range(7):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        rounds.append((time.perf_counter_ns() - start) / calls / 1000)
    return statistics.median(rounds)


def per_call() -> dict[str, float]:
    record = json.loads((ROOT / "gate" / "data" / "golden" / "records" / "verdict-yes.json").read_text()) \
        if (ROOT / "gate" / "data" / "golden" / "records" / "verdict-yes.json").exists() else {"record": "x" * 2000}
    created = {"decision_id": "dec_1", "record_hash": "a" * 64, "receipt_hash": "b" * 64, "audit_chain": {},
               "record": record}
    return {"canonical_policy_us": _median_us(lambda: canonical_text(POLICY)),
            "hold_policy_parse_us": _median_us(lambda: HoldPolicy.from_json(POLICY)),
            "hold_policy_schema_us": _median_us(lambda: bodies.check("hold-policy", POLICY, "HOLD_POLICY_INVALID")),
            "hold_opened_check_us": _median_us(lambda: bodies.check_event_data("hold.opened", OPENED)),
            "decision_created_check_us": _median_us(lambda: bodies.check_event_data("decision.created", created))}


def per_decide(home: Path, keyring: Path, decides: int) -> dict[str, float]:
    from gate.settings import Settings
    from gate_cli.keys_cmd import create_key
    from gate_cli.served_app import create_app

    settings = Settings.from_env({"GATE_HOME": str(home), "GATE_SIGNING_KEY_FILE": str(keyring),
                                  "GATE_DECIDE_CONFIDENCE": "false"})
    key = create_key(settings, "bench", "scale", 1_000_000, None)["api_key"]
    body = json.loads((ROOT / "gate" / "data" / "requests" / "verdict-review.json").read_text())
    client = create_app(settings).test_client()
    checked = cloudevent.check_event_data
    times: dict[str, list[float]] = {"checked": [], "unchecked": []}
    for round_ in range(decides):
        for name in (("checked", "unchecked") if round_ % 2 else ("unchecked", "checked")):
            cloudevent.check_event_data = checked if name == "checked" else (lambda _type, _data: None)
            start = time.perf_counter()
            response = client.post("/api/decide", json=body, headers={"x-api-key": key})
            times[name].append(time.perf_counter() - start)
            assert response.status_code == 200 and response.json["verdict"] == "review", response.json
    cloudevent.check_event_data = checked
    with_check, without = statistics.median(times["checked"]), statistics.median(times["unchecked"])
    return {"unchecked_ms": without * 1000, "checked_ms": with_check * 1000, "ratio_checked": with_check / without,
            "decides_each": decides}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decides", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        keyring = home / "signing-keys.json"
        generate_keyring(keyring, "2026-11-01T00:00:00.000Z")
        result = {"load": os.getloadavg(), "per_call": per_call(),
                  "per_decide": per_decide(home, keyring, args.decides)}
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "bodies.json").write_text(json.dumps(result, indent=2))
    calls, decide = result["per_call"], result["per_decide"]
    print(f"load average {result['load'][0]:.2f}")
    print(f"hold-policy PUT (10 queues, 20 routes): parse {calls['hold_policy_parse_us']:.0f} us, of which the "
          f"schema {calls['hold_policy_schema_us']:.0f} us; its canonical JSON {calls['canonical_policy_us']:.0f} us")
    print(f"event data check: hold.opened {calls['hold_opened_check_us']:.0f} us, decision.created "
          f"{calls['decision_created_check_us']:.0f} us")
    print(f"held POST /api/decide (median of {decide['decides_each']} each, interleaved): without the check "
          f"{decide['unchecked_ms']:.2f} ms, with it {decide['checked_ms']:.2f} ms (x{decide['ratio_checked']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
