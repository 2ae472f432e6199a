"""Issue 18 item 8: what the input-normalisation and contract checks cost, as ratios in one run.

Rows (median of N, wall time, `time.perf_counter`):

- request baseline: `GET /healthz` through the Flask test client (every before_request runs);
- URL check: `api.query.undecodable_url_part` on that request's WSGI environ (the UTF-8 check
  every request now pays), and on a long query (2 KiB of percent-encoded UTF-8);
- printable class: building the `str.isprintable` character class the document's printable
  patterns use (`gate.bodies.unprintable_class`), paid once per process when `/openapi.json` is first served;
- document: `openapi_document()` built from scratch (class included), against the request baseline.

`/proc/loadavg` is printed before and after: the machine is shared, so compare ratios, not times.

Run: .venv/bin/python benchmarks/bench_contract.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _median(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    print("load before:", Path("/proc/loadavg").read_text().strip())
    home = tempfile.mkdtemp(prefix="bench-contract-")
    os.environ.update({"GATE_HOME": home, "GATE_DATABASE_URL": f"sqlite:///{home}/gate.db",
                       "GATE_HMAC_SECRET": "bench-secret-" + "x" * 32, "GATE_AUTO_MIGRATE": "1"})
    from werkzeug.test import EnvironBuilder

    from api import openapi
    from api.query import undecodable_url_part
    from gate import bodies
    from gate_cli.served_app import create_app

    client = create_app().test_client()
    request = _median(lambda: client.get("/healthz"), args.runs)
    environ = EnvironBuilder(path="/healthz").get_environ()
    long_query = EnvironBuilder(path="/healthz", query_string="q=" + "%C3%A9" * 340).get_environ()
    check = _median(lambda: undecodable_url_part(environ), args.runs * 10)
    check_long = _median(lambda: undecodable_url_part(long_query), args.runs * 10)

    def build_class() -> None:
        bodies.unprintable_class.cache_clear()
        bodies.unprintable_class()

    def build_document() -> None:
        openapi.openapi_document.cache_clear()
        openapi.endpoints.cache_clear()  # the routes' declarations, gathered and their charges added
        bodies.unprintable_class.cache_clear()
        openapi.openapi_document()

    printable = _median(build_class, 5)
    document = _median(build_document, 5)
    print(f"GET /healthz (baseline)        {request * 1e6:10.1f} µs")
    print(f"URL check, short / long query  {check * 1e6:10.2f} µs / {check_long * 1e6:.2f} µs"
          f"   ratio to baseline {check / request:.4f} / {check_long / request:.4f}")
    print(f"printable class (once)         {printable * 1e3:10.1f} ms   = {printable / request:.0f} requests")
    print(f"openapi_document() (once)      {document * 1e3:10.1f} ms   = {document / request:.0f} requests")
    print("load after: ", Path("/proc/loadavg").read_text().strip())


if __name__ == "__main__":
    main()
