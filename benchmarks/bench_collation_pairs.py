"""The worst text of any kind for `POST /api/decision/verify`, against ASCII (issue 41, defect 3).

The earlier sweep (bench_collation.py) keyed runs of single code points. Contractions (`L` + U+00B7,
a Thai prevowel and its consonant) and characters that decompose into one (U+0439) then cost 45x
ASCII over HTTP. This benchmark sweeps units of one, two and three code points, in one process:

1. sweep: every contraction of the table; every contraction start before every code point that
   continues a contraction; a representative of each behaviour class of single code points (as
   bench_collation.py classes them) alone, before every other class and after it; and the hostile
   mixtures of bench_collation.py. Each unit is keyed as a run of about 4 KB, timed, and ranked
   by its cost per byte;
2. HTTP: the slowest units each fill the keys of a ~1 MB verification body (keys of about 4 KB,
   as in the issue), posted through the Flask app; its CPU time (this thread's, best of 3) is
   divided by that of an ASCII body of the same byte size and shape measured just before it.

It prints the ten worst units with their ratio to ASCII and `/proc/loadavg` before and after.
Results: benchmarks/results/collation_pairs.json. The bound (issue 41): at most 10x.

Run: .venv/bin/python benchmarks/bench_collation_pairs.py [--quick] [--http 25]
(`--quick` samples every 7th start/continuation pair; `--http N` posts the N slowest units.)
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_collation import behaviour_class, hostile_mixtures  # noqa: E402

from gate.protocol import collation  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "collation_pairs.json"
RUN_BYTES = 4000
BODY_BYTES = 1_000_000


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "unknown"


def run_of(unit: str, size: int = RUN_BYTES) -> str:
    return unit * max(1, size // len(unit.encode()))


def contractions() -> list[str]:
    found: list[str] = []

    def walk(node: object, path: list[int]) -> None:
        for cp, child in (node.children or {}).items():  # type: ignore[attr-defined]
            if child.value and path:
                found.append("".join(map(chr, path + [cp])))
            walk(child, path + [cp])

    walk(collation._ROOT, [])
    return found


def class_representatives() -> dict[str, str]:
    """One code point per behaviour class (the first of each; surrogates excluded)."""
    seen: dict[str, str] = {}
    for cp in list(range(0x80, 0x30000)) + [0xE0100, 0xF0000, 0x10FFFD]:
        if 0xD800 <= cp < 0xE000:
            continue
        seen.setdefault(behaviour_class(cp), chr(cp))
    return seen


def units(quick: bool) -> dict[str, str]:
    out = {f"contraction {unit!a}": unit for unit in contractions()}
    starts = sorted(collation._STARTS)
    continues = sorted(collation._CONTINUES)
    for index, (s, c) in enumerate((s, c) for s in starts for c in continues):
        if not quick or index % 7 == 0:
            out.setdefault(f"start+continuation {chr(s) + chr(c)!a}", chr(s) + chr(c))
    representatives = class_representatives()
    for label, char in representatives.items():
        out[f"single {char!a} ({label})"] = char
        for other in representatives.values():
            out[f"pair {char + other!a}"] = char + other
    for name, text in hostile_mixtures().items():
        out[f"mixture: {name}"] = text[:2000]
    return out


def per_byte_ns(text: str, runs: int = 2) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.thread_time_ns()
        collation.collation_key(text)
        best = min(best, time.thread_time_ns() - start)
    return best / len(text.encode())


def verify_body(unit: str, size: int = BODY_BYTES) -> bytes:
    """A ~`size` verification body whose input keys are ~4 KB runs of `unit`, numbered."""
    run = run_of(unit)
    keys = {f"{run}{index:06d}": index for index in range(size // (len(run.encode()) + 12))}
    return json.dumps({"record": {"decision_id": "dec_bench"}, "input": keys}, ensure_ascii=False).encode()


def post_cpu(client: object, data: bytes, runs: int = 3) -> float:
    """This thread's CPU seconds for one verification (the test client answers in this thread)."""
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        start = time.thread_time()
        response = client.post("/api/decision/verify", data=data,  # type: ignore[attr-defined]
                               headers={"Content-Type": "application/json"})
        best = min(best, time.thread_time() - start)
        if response.status_code != 200:
            raise SystemExit(f"verify answered {response.status_code}: {response.get_data(as_text=True)[:300]}")
    return best


def app_client() -> object:
    from gate.settings import Settings
    from gate_cli.served_app import create_app

    settings = Settings.from_env({"GATE_HOME": tempfile.mkdtemp(prefix="gate-bench-"),
                                  "GATE_REQUIRE_SIGNING": "false", "GATE_PUBLIC_VERIFY_RATE_LIMIT": "1000000"})
    return create_app(settings).test_client()


def ascii_twin(unit: str) -> str:
    """ASCII letters of the unit's byte length: the same body size and shape."""
    return "abcdefgh"[: len(unit.encode())] if len(unit.encode()) <= 8 else "a" * len(unit.encode())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="every 7th start/continuation pair")
    parser.add_argument("--http", type=int, default=25, help="post the N slowest units as 1 MB bodies")
    args = parser.parse_args()
    load_before = loadavg()
    started = time.perf_counter()
    ascii_ns = per_byte_ns(run_of("abcdefgh"), runs=5)
    swept = {name: per_byte_ns(run_of(unit)) for name, unit in units(args.quick).items()}
    sweep_s = time.perf_counter() - started
    all_units = units(args.quick)
    slowest = sorted(swept, key=lambda name: -swept[name])[: args.http]
    client = app_client()
    post_cpu(client, verify_body("abcdefgh"))  # warm up
    rows = []
    for name in slowest:
        unit = all_units[name]
        ascii_s = post_cpu(client, verify_body(ascii_twin(unit)))
        hostile_s = post_cpu(client, verify_body(unit))
        rows.append({"unit": name, "sweep_x_ascii_per_byte": round(swept[name] / ascii_ns, 1),
                     "http_cpu_ms": round(hostile_s * 1e3, 1), "ascii_http_cpu_ms": round(ascii_s * 1e3, 1),
                     "http_x_ascii": round(hostile_s / ascii_s, 2)})
    rows.sort(key=lambda row: -row["http_x_ascii"])
    result = {"load_before": load_before, "load_after": loadavg(), "units_swept": len(swept),
              "sweep_seconds": round(sweep_s, 1), "bound": 10, "worst": rows[:10], "rows": rows}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(f"load {result['load_before']} -> {result['load_after']}; swept {len(swept)} units in {sweep_s:.1f} s; "
          f"{len(rows)} posted as ~1 MB bodies")
    print(f"{'unit (ten worst over HTTP)':<60} {'sweep/ASCII':>11} {'ms':>7} {'ASCII ms':>8} {'x ASCII':>8}")
    for row in rows[:10]:
        print(f"{row['unit'][:60]:<60} {row['sweep_x_ascii_per_byte']:>11} {row['http_cpu_ms']:>7} "
              f"{row['ascii_http_cpu_ms']:>8} {row['http_x_ascii']:>8}")
    return 1 if rows and rows[0]["http_x_ascii"] > result["bound"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
