"""What the data map costs (issue 67), in one process and one run, as ratios to baselines timed
beside them:

* on the decide path, `PrivacyService.masker(scope, "logs", body)` (the settings cached, as a
  serving worker holds them) against `canonical_text(body)` (one canonical encoding of the same
  request, which every decide pays already);
* per delivery, `PrivacyService.event_body(row)` of a `decision.created` row of a scope with a
  data map (the stored request read, the event masked and re-encoded) against the same call for a
  scope that declares nothing (the stored text passed through).

    .venv/bin/python benchmarks/bench_privacy.py [--repeat 2000]

Best of five batches of `--repeat` calls, µs per call; /proc/loadavg beside.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _best(call: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeat):
            call()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2000)
    args = parser.parse_args()
    from gate.keys.signing import generate_keyring
    from gate.protocol.canonical import canonical_text
    from gate.settings import Settings
    from gate_cli.keys_cmd import create_key
    from gate_cli.served_app import create_app
    from tests.privacy.support import customer_request, privacy

    with tempfile.TemporaryDirectory() as home:
        generate_keyring(Path(home) / "signing-keys.json", "2026-11-01T00:00:00.000Z")
        settings = Settings.from_env({"GATE_HOME": home, "GATE_EVENTS_DISPATCH": "false",
                                      "GATE_POLICY_DIR": str(ROOT / "gate" / "data" / "rulebooks")})
        app = create_app(settings)
        runtime = app.extensions["gate"]
        runtime.service.pipeline.mirror.ttl = 0  # each scope's opt-in read at once
        for scope in ("tenant_a", "tenant_b"):
            key = create_key(settings, scope, "starter", 10**6, None, None, "decide,admin", f"service:{scope}")
            client = app.test_client()
            headers = {"x-api-key": key["api_key"]}
            if scope == "tenant_a":
                assert client.put("/api/privacy", json=privacy(), headers=headers).status_code == 200
            on = {"decision_created": True, "anomaly_every_seconds": None}
            assert client.put("/api/events/settings", json=on, headers=headers).status_code == 200
            assert client.post("/api/decide", json=customer_request(), headers=headers).status_code == 200
        body = customer_request()
        privacy_service = runtime.privacy
        rows = {scope: next(r for r in runtime.events.outbox.events_after(scope, 0, 100)
                            if r["event_type"].endswith("decision.created")) for scope in ("tenant_a", "tenant_b")}
        assert b"maskedmembers" in privacy_service.event_body(rows["tenant_a"])
        privacy_service.cache_seconds = 3600.0  # a worker's cache, warm
        privacy_service.masker("tenant_a", "logs", body)
        privacy_service.event_body(rows["tenant_b"])
        figures = {
            "decide: canonical_text(request) (baseline)": _best(lambda: canonical_text(body), args.repeat),
            "decide: masker(scope, logs, request)": _best(lambda: privacy_service.masker("tenant_a", "logs", body),
                                                          args.repeat),
            "delivery: event_body, no data map (baseline)": _best(lambda: privacy_service.event_body(rows["tenant_b"]),
                                                                  args.repeat // 10),
            "delivery: event_body, data map, masked": _best(lambda: privacy_service.event_body(rows["tenant_a"]),
                                                            args.repeat // 10),
            "delivery: of which the stored decision's read": _best(
                lambda: runtime.ledger.decision("tenant_a", rows["tenant_a"]["event_id"] and
                                                json.loads(rows["tenant_a"]["event_json"])["data"]["decision_id"]),
                args.repeat // 10),
        }
    load = Path("/proc/loadavg").read_text().split()[:3]
    names = list(figures)
    print(json.dumps({"load": load, "us_per_call": {k: round(v, 2) for k, v in figures.items()},
                      "ratio_masker_to_canonical": round(figures[names[1]] / figures[names[0]], 2),
                      "ratio_masked_to_unmasked_delivery": round(figures[names[3]] / figures[names[2]], 2)}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
