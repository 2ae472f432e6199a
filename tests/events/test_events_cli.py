"""`gate events …`: subscribe (secret printed once), list (never a secret), a dispatch pass
delivering to a verifying receiver, deliveries, replay, rotation, refusals. The subscription, the
release and the first dispatch run `gate` as subprocesses; the later commands run the same command
lines in this process (`tests.cli_in_process`), ten subprocess start-ups fewer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli_in_process import gate_in_process
from tests.events.receiver import Receiver

GATE = str(Path(sys.executable).parent / "gate")


def run(args, env, check=True, process=False):
    if process:
        done = subprocess.run([GATE, "events", *args], env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=60)
    else:
        done = gate_in_process(["events", *args], env)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def test_the_operator_subscribes_dispatches_and_reads_deliveries(gate_env, sample_rulebook):
    env = {**gate_env, "GATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"}
    receiver = Receiver()
    try:
        made = json.loads(run(["subscribe", "--scope", "acme", "--url", receiver.url, "--from-beginning"], env,
                              process=True).stdout)
        receiver.secrets.append(made["secret"])
        sid = made["subscription"]["subscription_id"]
        assert made["subscription"]["created_by"].startswith("operator:")
        listed = run(["list", "--scope", "acme"], env).stdout
        assert sid in listed and "whsec_" not in listed
        path = Path(gate_env["GATE_HOME"]) / "rulebook.json"
        path.write_text(json.dumps(sample_rulebook))
        done = subprocess.run([GATE, "release", "publish", "--scope", "acme", str(path)], env={**os.environ, **env},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "posted 1 webhook" in run(["dispatch", "--once"], env, process=True).stdout
        assert [e["type"] for e in receiver.accepted] == ["dev.decision-gate.rulebook.published"]
        assert "queued 1 event(s)" in run(["replay", sid, "--scope", "acme", "--seq", "1"], env).stdout
        run(["dispatch", "--once"], env)
        assert len(receiver.accepted) == 2
        report = run(["deliveries", sid, "--scope", "acme"], env).stdout
        assert run(["deliveries", "--scope", "acme", "--id", sid], env).stdout == report  # the deprecated option
        assert "100.0% of 2 attempts succeeded" in report and "lag 0" in report
        rotated = json.loads(run(["rotate", "--scope", "acme", "--id", sid, "--overlap-seconds", "0"], env).stdout)
        assert rotated["secret"] != made["secret"]
        # another scope's subscription reads as absent; an address inside needs the allowance
        done = run(["deliveries", "--scope", "other", sid], env, check=False)
        assert done.returncode == 2 and done.stderr.startswith("gate events: EVENT_SUBSCRIPTION_NOT_FOUND: ")
        for refused in (["deliveries", "--scope", "acme"], ["deliveries", sid, "--scope", "acme", "--id", "other"]):
            done = run(refused, env, check=False)  # no id, or two: a usage error, nothing read
            assert done.returncode == 2 and "SUBSCRIPTION_ID" in done.stderr and done.stdout == ""
        done = run(["subscribe", "--scope", "acme", "--url", receiver.url], gate_env, check=False)
        assert done.returncode == 2 and "EVENT_TARGET_REFUSED" in done.stderr
    finally:
        receiver.close()


def test_the_operator_cannot_subscribe_an_endpoint_while_the_scope_requires_approvals(gate_env):
    """Issue 64/3: `gate events subscribe` states no principal, so while the scope requires
    approvals a new endpoint is refused (asked for through the API instead) and nothing is stored."""
    env = {**gate_env, "GATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"}
    policy = gate_in_process(["release", "policy", "--scope", "acme", "--require-approval"], env)
    assert policy.returncode == 0, policy.stderr
    done = run(["subscribe", "--scope", "acme", "--url", "http://127.0.0.1:9/hook", "--from-beginning"], env,
               check=False)
    assert done.returncode == 2 and done.stderr.startswith("gate events: GOVERNANCE_APPROVAL_REQUIRED: "), done.stderr
    assert "sub_" not in run(["list", "--scope", "acme"], env).stdout
