"""The release story end to end through HTTP (issue 20's "Done when"): publish and activate v1,
decide by reference; publish a fix, shadow it on live traffic; start a 10% canary, report failing
outcomes in the canary arm only and watch the guardrail halt it on its own; roll back; verify
every record and every release event offline."""

from __future__ import annotations

import json
import subprocess
import sys

from gate.releases.events import verify_history
from gate.verify import TrustAnchors, verify_record
from tests.releases.support import ALL, Api, by_reference, version


def test_publish_shadow_canary_guardrail_halt_rollback_and_offline_verification(make_app, issue_key, tmp_path,
                                                                                 gate_env):
    app = make_app({"GATE_METRICS_TOKEN": "metrics-secret-token-1"})
    client = app.test_client()
    author = Api(client, issue_key(plan="growth", permissions=ALL)["api_key"])
    releases = app.extensions["gate"].releases
    releases.reader.cache_seconds = 0  # the test reads its own transitions at once (one process anyway)

    # v1 published and activated; decide by reference.
    assert author.publish(version("v1")).status_code == 201
    assert author.act("activate", version="v1", reason="first release").status_code == 201
    records = [author.decide(by_reference(subject="warmup-0")).json]
    assert records[0]["verdict"] == "yes" and records[0]["release_arm"]["arm"] == "active"

    # A fix that sends 15% discounts to review, shadowed on live traffic.
    author.publish(version("v2", approve_limit=10))
    author.act("shadow", version="v2", reason="dry-run said 1 of 3 approvals flips")
    for index in range(20):
        records.append(author.decide(by_reference(subject=f"shadow-{index}")).json)
    shadow = author.status().json["comparison"]["shadow"]
    assert shadow["decisions"] == 20 and shadow["transitions"] == [{"live": "yes", "shadow": "review", "n": 20}]
    assert shadow["agreement"]["rate"] == 0.0 and shadow["flips"][0]["n"] == 20

    # A different candidate (same verdicts, a new action) goes to a 10% canary; halting the
    # shadow first is a transition of its own.
    author.act("halt", reason="shadow seen")
    author.publish(version("v3", action="apply_discount_v3"))
    started = author.act("canary", version="v3", percent=10, reason="canary the new action")
    assert started.status_code == 201 and started.json["state"]["canary"]["percent"] == 10
    arms: dict[str, list[dict]] = {"active": [], "canary": []}
    arm_of: dict[str, str] = {}
    index = 0
    while len(arms["canary"]) < 40:
        record = author.decide(by_reference(subject=f"order-{index}")).json
        arms[record["release_arm"]["arm"]].append(record)
        arm_of[f"order-{index}"] = record["release_arm"]["arm"]
        records.append(record)
        index += 1
    assert 0.04 < len(arms["canary"]) / index < 0.2  # about a tenth of subjects
    assert {r["policy_version"] for r in arms["canary"]} == {"v3"}
    # The same subject stays in its arm.
    for subject in ("order-0", "order-1", "order-2", next(s for s, arm in arm_of.items() if arm == "canary")):
        again = author.decide(by_reference(subject=subject)).json
        assert again["release_arm"]["arm"] == arm_of[subject]

    # Outcomes: the active arm succeeds, the canary arm fails. The guardrail halts on its own.
    trips_before = _failure_rate_trips(client)  # the counter is the process's: other tests may have tripped it
    for record in arms["active"][:60]:
        assert author.outcome(record, "succeeded").status_code == 201
    halted_after = None
    for count, record in enumerate(arms["canary"], start=1):
        assert author.outcome(record, "failed").status_code == 201
        if releases.state("tenant_a", "pricing_exception", fresh=True).canary is None:
            halted_after = count
            break
    assert halted_after is not None and halted_after >= 30  # nothing is judged before 30 an arm
    status = author.status().json
    halt = status["history"][-1]
    assert halt["action"] == "halt" and halt["actor"] == "guardrail"
    assert halt["evidence"]["tripped"] == ["failure_rate"] and halt["evidence"]["canary_version"] == "v3"
    assert status["state"]["canary"] is None and status["state"]["active"]["version"] == "v1"
    after_halt = author.decide(by_reference(subject="order-after")).json
    assert after_halt["release_arm"]["arm"] == "active"
    alerts = client.get("/api/policy-alerts?policy_id=pricing_exception", headers=author.headers()).json
    assert any(a["kind"] == "canary_halted" and a["source"] == "release_guardrail" for a in alerts["alerts"])
    assert _failure_rate_trips(client) == trips_before + 1

    # Activate v2 after all, then roll back to v1 in one call.
    author.act("activate", version="v2", reason="take the fix")
    rolled = author.act("rollback", reason="too many reviews")
    assert rolled.json["state"]["active"]["version"] == "v1"

    # Offline: every record and the whole release history verify with the published keys.
    keys = client.get("/api/decision/receipt-keys").get_data()
    anchors = TrustAnchors.from_registry_body(keys, "key_registry_file")
    for record in records:
        result = verify_record(record, anchors=anchors)
        assert result.verified, result.failed_checks
    history = author.history().json
    check = verify_history(history["events"], anchors)
    assert check.valid, check.problems
    assert [e["action"] for e in history["events"]] == ["activate", "shadow", "halt", "canary", "halt", "activate",
                                                        "rollback"]
    # And with the CLI, as an auditor would, from saved files; a tampered copy fails.
    (tmp_path / "keys.json").write_bytes(keys)
    (tmp_path / "history.json").write_text(json.dumps(history))
    history["events"][4]["evidence"]["tripped"] = []
    (tmp_path / "tampered.json").write_text(json.dumps(history))
    env = dict(gate_env)
    for name, code in (("history.json", 0), ("tampered.json", 1)):
        run = subprocess.run([sys.executable, "-m", "gate_cli.main", "verify", str(tmp_path / name), "--key-registry",
                              str(tmp_path / "keys.json")], capture_output=True, text=True, env={**env, "PATH": ""})
        assert run.returncode == code, run.stdout + run.stderr
    assert "tampered" in run.stdout


def _failure_rate_trips(client) -> float:
    """`gate_release_guardrail_trips_total{guardrail="failure_rate"}` as /metrics shows it (0 before any trip)."""
    metrics = client.get("/metrics", headers={"x-metrics-token": "metrics-secret-token-1"}).get_data(as_text=True)
    line = 'gate_release_guardrail_trips_total{guardrail="failure_rate"} '
    found = [row for row in metrics.splitlines() if row.startswith(line)]
    return float(found[0][len(line):]) if found else 0.0
