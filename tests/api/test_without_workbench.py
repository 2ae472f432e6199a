"""The API without the analytics package (issue 66, item 4): `import api`, building the app and
serving a decide need no `workbench`; a report asked of such an app answers 503
`REPORTS_UNAVAILABLE` through HTTP, after its key and query are checked as always.

The probe runs in a fresh interpreter whose import system refuses `workbench` and everything
under it (a meta-path finder ahead of the path's), and builds its app through the served app's
composition root (`gate_cli.served_app`), which then composes the API alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gate.ledger import Ledger

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

_PROBE = textwrap.dedent("""
    import json, sys


    class Absent:
        '''The workbench is not installed: every import of it, or of a module under it, fails.'''

        tried = []

        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] == "workbench":
                self.tried.append(name)
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None


    sys.meta_path.insert(0, Absent())
    import api
    import api.app
    from gate.settings import Settings
    from gate_cli.served_app import analytics, create_app

    key = {{"x-api-key": {key!r}}}
    app = create_app(Settings.from_env())
    client = app.test_client()
    body = json.loads(open("gate/data/requests/verdict-yes.json").read())
    decided = client.post("/api/decide", json=body, headers=key)
    report_path = f"/api/decision/policies/{{decided.json['policy_id']}}/effectiveness"
    answers = {{
        "decide": [decided.status_code, decided.json.get("verdict")],
        "report": [client.get(report_path, headers=key).status_code, client.get(report_path, headers=key).json],
        "bad_query": client.get(report_path + "?threshold=0.5", headers=key).json.get("error"),
        "anonymous": client.get(report_path).json.get("error"),
        "packet": client.get(f"/api/decision/{{decided.json['decision_id']}}/packet", headers=key).json,
        "plain_packet": client.get(f"/api/decision/{{decided.json['decision_id']}}/packet?include_intelligence=false",
                                   headers=key).status_code,
        "documented": client.get("/openapi.json").json["paths"]["/api/decision/policies/{{policy_id}}/effectiveness"],
        "analytics": repr(analytics()),
        "tried": sorted(set(Absent.tried)),
        "loaded": sorted(name for name in sys.modules if name.partition(".")[0] == "workbench"),
    }}
    app.extensions["gate"].ledger.dispose()
    print(json.dumps(answers))
""")


def test_the_api_serves_without_the_workbench_and_refuses_reports_503(gate_env, issue_key):
    ledger = Ledger(gate_env["GATE_DATABASE_URL"])
    ledger.upgrade()
    ledger.dispose()
    key = issue_key()["api_key"]
    probe = subprocess.run([sys.executable, "-c", _PROBE.format(key=key)], cwd=ROOT, env={**_env(), **gate_env},
                           capture_output=True, text=True, timeout=180, check=False)
    assert probe.returncode == 0, probe.stderr[-3000:]
    seen = json.loads(probe.stdout.strip().splitlines()[-1])
    assert seen["loaded"] == [] and seen["analytics"] == "None"
    assert "workbench" in seen["tried"]  # the root looked for it, and was refused
    assert seen["decide"] == [200, "yes"]
    status, body = seen["report"]
    assert status == 503 and body["error"] == "REPORTS_UNAVAILABLE" and body["c"] == "unclear"
    # The catalogue still checks the key and the query before anything is computed.
    assert seen["bad_query"] == "REQUEST_INVALID"
    assert seen["anonymous"] == "SVC_POLICY_EFFECTIVENESS_UNAUTHORIZED"
    assert seen["packet"]["error"] == "REPORTS_UNAVAILABLE" and seen["plain_packet"] == 200
    documented = seen["documented"]["get"]["responses"]["503"]
    assert "REPORTS_UNAVAILABLE" in json.dumps(documented)


def _env() -> dict[str, str]:
    import os

    return {name: value for name, value in os.environ.items() if not name.startswith("GATE_")}
