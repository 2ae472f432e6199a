"""Guarded activation (issue 42, build item 5) end to end: a real dry-run of the version over the
ledger's history (`gate dry-run`, a subprocess), accepted by `gate migration check` (it failed on
status `proposed` before), required by the scope's policy for activate and a canary above the
stated share, bound to the exact version hash, fresh enough, and recorded in the signed event."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from datetime import timedelta

from gate.releases.events import verify_history
from gate.verify import TrustAnchors
from tests.cli_in_process import gate_in_process
from tests.releases.support import ALL, Api, by_reference, version

SCOPE = "tenant_a"


def _gate(gate_env, *args: str, process: bool = True) -> subprocess.CompletedProcess:
    """`gate ARGS` as a subprocess; `process=False` in process (tests.cli_in_process), for the two
    repeats of `gate migration check` after its first run here as a subprocess."""
    if not process:
        return gate_in_process(args, gate_env)
    environment = {**gate_env, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", "")}
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=300)


def _dry_run(gate_env, tmp_path, rulebook: dict) -> dict:
    draft = tmp_path / f"draft-{rulebook['version']}.json"
    draft.write_text(json.dumps(rulebook))
    out = tmp_path / f"dry-run-{rulebook['version']}"
    run = _gate(gate_env, "dry-run", "--rulebook-id", "pricing_exception", "--draft", str(draft), "--scope", SCOPE,
                "--out", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads((out / "migration.json").read_text())


def test_a_dry_run_manifest_guards_activation(app, client, issue_key, gate_env, tmp_path):
    admin = Api(client, issue_key(scope=SCOPE, permissions=ALL)["api_key"])
    for name, limit in (("v1", 20), ("v2", 10), ("v3", 12)):
        admin.publish(version(name, approve_limit=limit))
    admin.act("activate", version="v1")
    for index in range(6):
        assert admin.decide(by_reference(subject=f"order-{index}")).status_code == 200
    manifest = _dry_run(gate_env, tmp_path, version("v2", approve_limit=10))
    assert manifest["status"] == "proposed" and manifest["expected_drift"]["fields"]

    # `gate migration check` accepts the dry-run's own manifest (it refused it for status proposed).
    checked = _gate(gate_env, "migration", "check", str(tmp_path / "dry-run-v2" / "migration.json"), "--json")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert json.loads(checked.stdout)["checked_against"] == "dry_run"
    edited_file = tmp_path / "edited.json"
    edited_file.write_text(json.dumps({**manifest, "expected_drift": {"policy": "none", "fields": []}}))
    refused = _gate(gate_env, "migration", "check", str(edited_file), process=False)
    assert refused.returncode == 1 and "migration_hash does not match the manifest (edited)" in refused.stdout
    untrusted = _gate({**gate_env, "GATE_SIGNING_KEY_FILE": str(tmp_path / "no-keyring.json")}, "migration",
                      "check", str(tmp_path / "dry-run-v2" / "migration.json"), process=False)
    assert untrusted.returncode == 1 and "signature: not checked (no trusted key" in untrusted.stdout

    policy = client.patch("/api/decision/release-policy", json={"require_dry_run": True, "dry_run_canary_percent": 5},
                          headers=admin.headers())
    assert policy.status_code == 200 and policy.json["policy"]["require_dry_run"] is True
    for body in ({"version": "v2"}, {"version": "v2", "action": "canary", "percent": 20}):
        action = body.pop("action", "activate")
        refused = admin.act(action, **body)
        assert refused.status_code == 409 and refused.json["error"] == "RELEASE_DRY_RUN_REQUIRED", refused.json
    small = admin.act("canary", version="v2", percent=5)  # at or below the stated share: no manifest needed
    assert small.status_code == 201
    admin.act("halt", reason="a small canary only")

    other = admin.act("activate", version="v3", migration_manifest=manifest)
    assert other.status_code == 422 and other.json["error"] == "RELEASE_DRY_RUN_REJECTED"
    assert any("another rulebook" in p for p in other.json["problems"])
    edited = copy.deepcopy(manifest)
    edited["expected_drift"]["fields"] = []
    edited["expected_drift"]["policy"] = "none"
    tampered = admin.act("activate", version="v2", migration_manifest=edited)
    assert tampered.status_code == 422 and "migration_hash does not match" in tampered.json["message"]
    unsigned = {k: v for k, v in manifest.items() if k != "signature"}
    assert "not signed" in admin.act("activate", version="v2", migration_manifest=unsigned).json["message"]

    clock = app.extensions["gate"].service.clock
    original = clock.now
    clock.now = lambda: original() + timedelta(days=8)
    try:
        stale = admin.act("activate", version="v2", migration_manifest=manifest)
    finally:
        clock.now = original
    assert stale.status_code == 422 and "staler than the scope's bound" in stale.json["message"]
    assert admin.status().json["state"]["active"]["version"] == "v1"  # no refusal changed anything

    # The operator's CLI passes the manifest with the activation; the event records its hash.
    moved = _gate(gate_env, "release", "activate", "--scope", SCOPE, "--rulebook-id", "pricing_exception",
                  "--version", "v2", "--manifest", str(tmp_path / "dry-run-v2" / "migration.json"), "--json")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    event = json.loads(moved.stdout)
    assert event["migration_manifest_hash"] == manifest["migration_hash"]
    assert event["state"]["active"]["version"] == "v2"
    history = admin.history().json
    anchors = TrustAnchors.from_registry_body(client.get("/api/decision/receipt-keys").get_data(), "key_registry_file")
    assert verify_history(history["events"], anchors, history["governance"]).valid
    # An activation without the manifest the policy in force required fails verification.
    forged = copy.deepcopy(history)
    forged["events"][-1]["migration_manifest_hash"] = None
    from gate.chain.sealing import event_hash

    forged["events"][-1]["event_hash"] = event_hash(forged["events"][-1])
    check = verify_history(forged["events"], None, forged["governance"])
    assert check.problems == ((f"event {len(forged['events'])}: activate without the dry-run manifest the policy in "
                               "force required"),)


def test_a_dry_run_of_another_scope_or_of_every_scope_does_not_guard_this_one(client, issue_key, gate_env, tmp_path):
    """Issue 64/5: the manifest is bound to the scope it ran over (its signed `dry_run.scope`) and to
    the scope's chain head it read (`dry_run.source.scope_head`): one of a one-decision scope, or
    of every scope's history, no longer activates the version here."""
    admin = Api(client, issue_key(scope=SCOPE, permissions=ALL)["api_key"])
    small = Api(client, issue_key(scope="tenant_small", permissions=ALL)["api_key"])
    for api in (admin, small):
        for name, limit in (("v1", 20), ("v2", 10)):
            api.publish(version(name, approve_limit=limit))
        api.act("activate", version="v1")
    for index in range(6):
        assert admin.decide(by_reference(subject=f"order-{index}")).status_code == 200
    assert small.decide(by_reference(subject="order-0")).status_code == 200
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps(version("v2", approve_limit=10)))
    manifests = {}
    for name, scope_args in (("small", ["--scope", "tenant_small"]), ("every", []), ("ours", ["--scope", SCOPE])):
        run = _gate(gate_env, "dry-run", "--rulebook-id", "pricing_exception", "--draft", str(draft), *scope_args,
                    "--out", str(tmp_path / name), process=False)
        assert run.returncode == 0, run.stdout + run.stderr
        manifests[name] = json.loads((tmp_path / name / "migration.json").read_text())
    assert manifests["ours"]["dry_run"]["source"]["scope_head"]["size"] == 6
    assert client.patch("/api/decision/release-policy", json={"require_dry_run": True},
                        headers=admin.headers()).status_code == 200
    for name, words in (("small", "another scope's history"), ("every", "every scope's history")):
        refused = admin.act("activate", version="v2", migration_manifest=manifests[name])
        assert refused.status_code == 422 and refused.json["error"] == "RELEASE_DRY_RUN_REJECTED", refused.json
        assert words in refused.json["message"]
    assert admin.status().json["state"]["active"]["version"] == "v1"
    # signed by this gate's key, but stating a head this scope's chain does not hold (another
    # ledger's history of a scope of the same name): refused
    for head in ({"size": 7}, {"head_link_hash": "0" * 64}, {"chain_id": "chain_elsewhere"}):
        foreign = _resigned(client, manifests["ours"], head)
        refused = admin.act("activate", version="v2", migration_manifest=foreign)
        assert refused.status_code == 422 and refused.json["error"] == "RELEASE_DRY_RUN_REJECTED", refused.json
        assert "does not hold" in refused.json["message"]
    moved = admin.act("activate", version="v2", migration_manifest=manifests["ours"])
    assert moved.status_code == 201, moved.json


def _resigned(client, manifest: dict, head: dict) -> dict:
    """`manifest` with its stated scope head changed, hashed and signed again by this gate's key."""
    from gate.protocol.canonical import sha256_hex
    from workbench.migration.manifest import sign_manifest

    edited = copy.deepcopy(manifest)
    edited["dry_run"]["source"]["scope_head"].update(head)
    edited["dry_run"]["result_hash"] = sha256_hex({k: v for k, v in edited["dry_run"].items() if k != "result_hash"})
    signer = client.application.extensions["gate"].service.signing.receipt_signer()
    return sign_manifest(edited, signer)
