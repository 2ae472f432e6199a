"""Decide by reference, with a shadow, and with a canary's guardrails, against an inline decide of
the same rulebook, in one process and one run (issue 20's floors).

The app is the real Flask app over an embedded SQLite ledger (no HTTP server: this isolates what a
release adds to a decide from the server's own cost). Each variant decides `--decides` requests
(distinct subjects) per round; the variants run interleaved for `--rounds` rounds so a load trend
favours none. Figures: the median per-decide wall time of each variant over the rounds, and its
ratio to the inline baseline measured in the same run, with the load average beside them.

* `inline`: the rulebook in the request (the spec's decide);
* `by_reference`: `rulebook_ref`, the active version (floor: at most 1.05x inline);
* `with_shadow`: by reference while another version is in shadow (floor: at most 1.3x inline);
* `canary_guard_on` / `canary_guard_off`: by reference during a 10% canary, with the background
  guardrail check every 25 canary decides on, and off (floor: no measurable difference).

Run: .venv/bin/python benchmarks/bench_releases.py [--decides 300] [--rounds 5]
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.releases.support import ALL, Api, by_reference, inline, version  # noqa: E402


def _app(home: Path):
    from benchmarks.gate_app import bench_app, bench_key

    settings, app = bench_app(home, valid_from="2026-11-24T00:00:00.000Z")
    return app, bench_key(settings, ALL, plan="scale")


def _time(api: Api, make, n: int, tag: str) -> float:
    started = time.perf_counter()
    for index in range(n):
        answer = api.decide(make(f"{tag}-{index}"))
        if answer.status_code != 200:
            raise SystemExit(f"decide failed: {answer.status_code} {answer.get_data(as_text=True)[:200]}")
    return (time.perf_counter() - started) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--decides", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import gate.services.release_guards as releases_module

    with tempfile.TemporaryDirectory() as tmp:
        app, key = _app(Path(tmp))
        api = Api(app.test_client(), key)
        # Three rulebook ids, one per release situation, so each variant reads its own state.
        ids = {"active": "rb_active", "shadow": "rb_shadow", "canary": "rb_canary"}
        for rid in ids.values():
            for name, limit in (("v1", 20), ("v2", 10)):
                # The canary's candidate answers the same verdicts with another action, so its
                # guardrails hold for the whole run (a tripped one would halt it mid-benchmark).
                body = version(name, action="apply_discount_v2") if rid == ids["canary"] and name == "v2" \
                    else version(name, approve_limit=limit)
                body["rulebook_id"] = rid
                api.publish(body)
            api.act("activate", rulebook_id=rid, version="v1")
        api.act("shadow", rulebook_id=ids["shadow"], version="v2")
        api.act("canary", rulebook_id=ids["canary"], version="v2", percent=10)
        v1 = version("v1")
        v1["rulebook_id"] = ids["active"]
        variants = {
            "inline": lambda s: inline(v1, subject=s),
            "by_reference": lambda s: by_reference(ids["active"], subject=s),
            "with_shadow": lambda s: by_reference(ids["shadow"], subject=s),
            "canary_guard_on": lambda s: by_reference(ids["canary"], subject=s),
            "canary_guard_off": lambda s: by_reference(ids["canary"], subject=s),
        }
        for make in variants.values():  # warm-up: compile, caches, first snapshots
            _time(api, make, 20, "warm")
        samples: dict[str, list[float]] = {name: [] for name in variants}
        load_before = os.getloadavg()
        for round_index in range(args.rounds):
            order = list(variants) if round_index % 2 == 0 else list(reversed(variants))
            for name in order:
                releases_module.GUARD_EVERY = 10**9 if name == "canary_guard_off" else 25
                samples[name].append(_time(api, variants[name], args.decides, f"{name}-{round_index}"))
        releases_module.GUARD_EVERY = 25
        base = statistics.median(samples["inline"])
        result = {
            "decides_per_variant_per_round": args.decides, "rounds": args.rounds,
            "load_average_before": load_before, "load_average_after": os.getloadavg(),
            "median_ms_per_decide": {k: round(statistics.median(v) * 1000, 3) for k, v in samples.items()},
            "ratio_to_inline": {k: round(statistics.median(v) / base, 3) for k, v in samples.items()},
            "guard_on_over_off": round(statistics.median(samples["canary_guard_on"]) /
                                       statistics.median(samples["canary_guard_off"]), 3),
            "floors": {"by_reference": 1.05, "with_shadow": 1.3, "guard_on_over_off": "no measurable difference"},
        }
        out = ROOT / "benchmarks" / "results"
        out.mkdir(exist_ok=True)
        (out / "releases.json").write_text(json.dumps(result, indent=2))
        print(json.dumps(result, indent=2))
        app.extensions["gate"].ledger.dispose()


if __name__ == "__main__":
    main()
