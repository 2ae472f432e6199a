"""Public verification of hostile bodies against ASCII bodies of the same size (issue 18, defect 2).

In one process, through the Flask app (no network): `POST /api/decision/verify` with a ~1 MB
body whose record keys are runs of U+07FD (a combining mark without a collation entry; before
the fix each such body cost 3.5 s of collation), against the same request with the keys made of
ASCII letters, same byte size and same structure; then `POST /api/decision/packet/verify` with
a ~16 MB packet of the same two kinds. Each figure is the best of 3; the report is the ratio
hostile / ASCII, with `/proc/loadavg` beside it. Results: benchmarks/results/public_verify.json.

Run: .venv/bin/python benchmarks/bench_public_verify.py [--no-packet]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate.settings import Settings  # noqa: E402
from gate_cli.served_app import create_app  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "public_verify.json"


def body(kind: str, size: int, wrapper: str) -> bytes:
    unit, unit_bytes = ("\u07fd", 2) if kind == "hostile" else ("a", 1)
    run = unit * (4000 * 2 // unit_bytes)
    keys = {f"{run}{index:06d}": index for index in range(size // (4000 * 2 + 20))}
    inner = {"decision_id": "dec_bench", "evaluation": keys}
    # The record verifier hashes `input` (checked against the record's input_hash), the packet
    # verifier the whole packet: both order every object's keys by collation.
    document = ({"record": {"decision_id": "dec_bench"}, "input": inner} if wrapper == "record"
                else {"packet": {"record": inner, "receipts": []}})
    return json.dumps(document, ensure_ascii=False).encode()


def best(client, path: str, data: bytes, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        response = client.post(path, data=data, headers={"Content-Type": "application/json"})
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, response.get_data(as_text=True)[:300]
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-packet", action="store_true", help="skip the 16 MB packet bodies")
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="gate-bench-")
    settings = Settings.from_env({"GATE_HOME": home, "GATE_REQUIRE_SIGNING": "false",
                                  "GATE_PUBLIC_VERIFY_RATE_LIMIT": "1000000"})
    client = create_app(settings).test_client()
    rows = {}
    cases = [("/api/decision/verify", "record", 1_000_000)]
    if not args.no_packet:
        cases.append(("/api/decision/packet/verify", "packet", 16_000_000))
    for path, wrapper, size in cases:
        hostile, plain = body("hostile", size, wrapper), body("ascii", size, wrapper)
        plain_s = best(client, path, plain)
        hostile_s = best(client, path, hostile)
        rows[path] = {"hostile_bytes": len(hostile), "ascii_bytes": len(plain), "hostile_s": round(hostile_s, 4),
                      "ascii_s": round(plain_s, 4), "ratio": round(hostile_s / plain_s, 2)}
    result = {"load": Path("/proc/loadavg").read_text().strip(), "rows": rows}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
