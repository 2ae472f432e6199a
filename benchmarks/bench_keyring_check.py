"""Cost of following the keyring file (`LiveSigning`) on the decide path.

Two figures, each against a baseline measured in the same run:

1. Per call: `LiveSigning.receipt_signer()` (+ `pin`/`unpin` once per request) vs a fixed
   `SigningSetup.receipt_signer()`, with the default 1000 ms check interval and with the
   worst case interval 0 < 1 ms (a stat on every call).
2. Per decide: `POST /api/decide` through the Flask test client on a SQLite ledger, an app built
   with `LiveSigning` (the default) vs the same app with a fixed `SigningSetup`, interleaved.

    .venv/bin/python benchmarks/bench_keyring_check.py [--decides N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gate.keys.config import LiveSigning, SigningSetup
from gate.keys.signing import generate_keyring

ROOT = Path(__file__).resolve().parent.parent


def per_call(keyring: Path, calls: int = 200_000) -> dict:
    fixed = SigningSetup.load(keyring, None, "h")
    live = LiveSigning(keyring, None, "h", check_interval=1.0)
    every = LiveSigning(keyring, None, "h", check_interval=1e-9)

    def run(target, pin=False) -> float:
        best = []
        for _ in range(5):
            start = time.perf_counter_ns()
            for _ in range(calls):
                if pin:
                    token = target.pin()
                    target.receipt_signer()
                    target.unpin(token)
                else:
                    target.receipt_signer()
            best.append((time.perf_counter_ns() - start) / calls)
        return statistics.median(best)

    base, followed = run(fixed), run(live)
    return {"fixed_ns": base, "live_ns": followed, "live_pinned_request_ns": run(live, pin=True),
            "stat_every_call_ns": run(every), "ratio_live": followed / base}


def per_decide(home: Path, keyring: Path, decides: int) -> dict:
    from gate.settings import Settings
    from gate_cli.keys_cmd import create_key
    from gate_cli.served_app import create_app

    settings = Settings.from_env({"GATE_HOME": str(home), "GATE_SIGNING_KEY_FILE": str(keyring),
                                  "GATE_DECIDE_CONFIDENCE": "false"})
    key = create_key(settings, "bench", "scale", 1_000_000, None)["api_key"]
    body = json.loads((ROOT / "gate" / "data" / "requests" / "verdict-yes.json").read_text())
    apps = {"live": create_app(settings),
            "fixed": create_app(settings, signing=SigningSetup.load(keyring, None, "hmac-receipt-v1"))}
    clients = {name: app.test_client() for name, app in apps.items()}
    times: dict[str, list[float]] = {name: [] for name in apps}
    for round_ in range(decides):
        for name in (("live", "fixed") if round_ % 2 else ("fixed", "live")):
            start = time.perf_counter()
            response = clients[name].post("/api/decide", json=body, headers={"x-api-key": key})
            times[name].append(time.perf_counter() - start)
            assert response.status_code == 200, response.json
    fixed, live = statistics.median(times["fixed"]), statistics.median(times["live"])
    return {"fixed_ms": fixed * 1000, "live_ms": live * 1000, "ratio_live": live / fixed, "decides_each": decides}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decides", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        keyring = home / "signing-keys.json"
        generate_keyring(keyring, "2026-11-01T00:00:00.000Z")
        result = {"load": os.getloadavg(), "per_call": per_call(keyring),
                  "per_decide": per_decide(home, keyring, args.decides)}
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "keyring_check.json").write_text(json.dumps(result, indent=2))
    calls, decide = result["per_call"], result["per_decide"]
    print(f"load average {result['load'][0]:.2f}")
    print(f"receipt_signer(): fixed {calls['fixed_ns']:.0f} ns, live {calls['live_ns']:.0f} ns "
          f"(x{calls['ratio_live']:.2f}), live with pin/unpin {calls['live_pinned_request_ns']:.0f} ns, "
          f"stat on every call {calls['stat_every_call_ns']:.0f} ns")
    print(f"POST /api/decide (median of {decide['decides_each']} each, interleaved): fixed {decide['fixed_ms']:.2f} ms, "
          f"live {decide['live_ms']:.2f} ms (x{decide['ratio_live']:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
