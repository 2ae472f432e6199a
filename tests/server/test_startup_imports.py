"""A gate worker starts light: building the app and deciding load no analytics stack; the
first report loads it, and answers as before.

Every `gate serve` worker imports `api.app` and builds the app at boot. Before the reports
were put behind `workbench.reports.live`, that imported Polars, Arrow, pandas and pyiceberg
with the engines: seconds and about twice the memory per worker, and the start-up waits of
the server tests timed out under load.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("polars", "pyarrow", "pandas", "pyiceberg", "duckdb", "dask", "distributed", "panel")

_PROBE = textwrap.dedent("""
    import json, sys, tempfile
    from pathlib import Path
    from gate.keys.signing import generate_keyring
    from gate.ledger import Ledger
    from gate.settings import Settings
    from gate_cli.served_app import create_app

    heavy = {heavy!r}
    with tempfile.TemporaryDirectory() as home:
        keyring = Path(home) / "signing-keys.json"
        generate_keyring(keyring, "2026-11-01T00:00:00.000Z")
        env = {{"GATE_HOME": home, "GATE_DATABASE_URL": f"sqlite:///{{home}}/gate.db",
               "GATE_SIGNING_KEY_FILE": str(keyring)}}
        Ledger(env["GATE_DATABASE_URL"]).upgrade()
        app = create_app(Settings.from_env(env))
        at_boot = sorted(name for name in heavy if name in sys.modules)
        from gate_cli.keys_cmd import create_key
        key = create_key(Settings.from_env(env), "probe", "scale", 1000, None)["api_key"]
        client = app.test_client()
        body = json.loads(Path("gate/data/requests/verdict-yes.json").read_text())
        decided = client.post("/api/decide", json=body, headers={{"x-api-key": key}})
        after_decide = sorted(name for name in heavy if name in sys.modules)
        report = client.get(f"/api/decision/policies/{{decided.json['policy_id']}}/effectiveness",
                            headers={{"x-api-key": key}})
        after_report = sorted(name for name in heavy if name in sys.modules)
        print(json.dumps({{"at_boot": at_boot, "after_decide": after_decide, "decide": decided.status_code,
                          "report": report.status_code, "report_kind": report.json.get("report_version"),
                          "after_report": after_report}}))
        app.extensions["gate"].ledger.dispose()
""")


def test_a_worker_loads_the_analytics_stack_on_its_first_report_not_at_boot() -> None:
    probe = subprocess.run([sys.executable, "-c", _PROBE.format(heavy=HEAVY)], cwd=ROOT, capture_output=True,
                           text=True, timeout=180, check=False)
    assert probe.returncode == 0, probe.stderr[-3000:]
    seen = json.loads(probe.stdout.strip().splitlines()[-1])
    assert seen["at_boot"] == []
    assert seen["after_decide"] == [], "a decide needs no analytics stack"
    assert seen["decide"] == 200
    # The first report loads what it needs, and answers as it always did.
    assert seen["report"] == 200
    assert "polars" in seen["after_report"]
