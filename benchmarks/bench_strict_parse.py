"""How long strict JSON parsing takes a request body: `parse_strict` (orjson's quick path, then the
strict reader for what it declines) against the strict reader alone (what every body paid before
the quick path), same run, each sample body of `gate/data/requests/` as its caller sends it and
with colons in strings added (a timestamp and a URL in the facts, so the quick path's second
count runs). Reported per body: µs per parse of each path, their ratio, and whether the quick path
took the body. The 1-minute load average is printed first.

    .venv/bin/python benchmarks/bench_strict_parse.py [--number 5000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from gate.strict_json import _NOT_QUICK, MAX_JSON_DEPTH, _nesting_depth, _quick, _strict, parse_strict  # noqa: E402


def _strict_alone(data: bytes) -> object:
    """The path before the quick one: UTF-8, the depth's bound, then the strict reader."""
    text = data.decode("utf-8")
    _nesting_depth(text, MAX_JSON_DEPTH)
    return _strict(text)


def _bodies() -> dict[str, bytes]:
    bodies = {}
    for path in sorted((ROOT / "gate" / "data" / "requests").glob("*.json")):
        data = path.read_bytes()
        bodies[path.stem] = data
        value = json.loads(data)
        if isinstance(value.get("context"), dict) and isinstance(value["context"].get("inputs"), dict):
            value["context"]["inputs"].update(seen_at="2026-11-29T10:00:00Z", source="https://crm.example/x")
            bodies[f"{path.stem} (colons in strings)"] = json.dumps(value).encode()
    return bodies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"load1 {os.getloadavg()[0]:.2f}; best of {args.repeat} × {args.number} parses, µs a parse")
    print(f"{'body':48} {'bytes':>6} {'strict alone':>13} {'parse_strict':>13} {'ratio':>6}  quick")
    for name, data in _bodies().items():
        assert parse_strict(data, max_depth=MAX_JSON_DEPTH) == _strict_alone(data)
        alone = min(timeit.repeat(lambda data=data: _strict_alone(data), number=args.number, repeat=args.repeat))
        quick = min(timeit.repeat(lambda data=data: parse_strict(data, max_depth=MAX_JSON_DEPTH),
                                  number=args.number, repeat=args.repeat))
        taken = _quick(data.decode("utf-8")) is not _NOT_QUICK
        print(f"{name[:48]:48} {len(data):>6} {1e6 * alone / args.number:>13.1f} {1e6 * quick / args.number:>13.1f} "
              f"{quick / alone:>6.2f}  {'yes' if taken else 'no'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
