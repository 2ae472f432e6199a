"""`workbench.migration.manifest` to the exact value (issue 22, item 5): the manifest a dry-run
result builds (every member), how it is signed (HMAC and Ed25519, the fingerprint only for
Ed25519), and `verify_manifest`'s exact checks and problems for each way a manifest, its
signature, the draft or the dataset can be wrong."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json

from dryrun_support import decide, rule, rulebook, write_dataset

from gate.keys.anchors import TrustAnchors
from gate.keys.signing import Ed25519Key, Ed25519ReceiptSigner, HmacKey, HmacReceiptSigner, b64url_encode
from gate.protocol.canonical import canonical_bytes, sha256_bytes_hex, sha256_hex
from workbench.migration import dry_run
from workbench.migration.baseline import HISTORY
from workbench.migration.manifest import build_manifest, sign_manifest, signature_payload, verify_manifest
from workbench.migration.summary import DryRunResult

NOW = "2026-11-24T00:00:00.000Z"
FIELDS = ("status", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id")
HMAC_KEY = HmacKey("hmac-mig-1", b"k" * 32)


def _result(**changes) -> DryRunResult:
    body = {name: [] for name in ("history_versions", "transitions", "rule_transitions", "drift_by_rule",
                                   "drift_by_reason", "rules", "rules_never_fired_in_history",
                                   "rules_never_firing_under_draft")}
    body |= {name: {} for name in ("outcomes", "review_load", "unreplayable", "flips")}
    body |= dict.fromkeys(("decisions_total", "decisions_evaluated", "decisions_unreplayable", "decisions_scalar", "decisions_changed", "decisions_reason_changed", "decisions_rule_changed", "needs_input"), 0)
    body |= {"rulebook_id": "refunds", "scope": "acme",
             "draft": {"rulebook_id": "refunds-draft", "version": "2.0.0", "rulebook_hash": "d" * 64},
             "source": {"kind": "dataset", "hash": "s" * 64},
             "history_versions": [{"policy_version": "1.0.0", "rulebook_hash": "a" * 64, "decisions": 7,
                                   "first": "x", "last": "y"},
                                  {"policy_version": "1.1.0", "rulebook_hash": "b" * 64, "decisions": 3,
                                   "first": "x", "last": "y"}]}
    body |= {"impact": None, "baseline": HISTORY.copy(), "notes": [], "inputs_removed": {"count": 0, "by": {}}}
    return DryRunResult(**(body | changes))


def test_every_member_of_a_built_manifest():
    result = _result()
    manifest = build_manifest(result, {"verdict": 4, "action": 0, "status": 2, "other": 9}, NOW)
    dry = result | {"field_changes": {"status": 2, "verdict": 4, "application_verdict": 0, "action": 0,
                                                "reason_code": 0, "matched_rule_id": 0}}
    dry["result_hash"] = sha256_hex(dry)
    migration_id = "mig_" + sha256_hex({"draft": "d" * 64, "source": "s" * 64, "scope": "acme"})[:24]
    assert len(migration_id) == 28
    assert manifest == {
        "schema_version": "rulebook_migration_v1",
        "migration_id": migration_id,
        "rulebook_id": "refunds",
        "status": "proposed",
        "compatibility_class": "rulebook",
        "from": {"rulebook_id": "refunds",
                 "versions": [{"policy_version": "1.0.0", "rulebook_hash": "a" * 64, "decisions": 7},
                              {"policy_version": "1.1.0", "rulebook_hash": "b" * 64, "decisions": 3}]},
        "to": {"rulebook_id": "refunds-draft", "version": "2.0.0", "rulebook_hash": "d" * 64},
        "expected_drift": {"policy": "requires_approval", "fields": ["status", "verdict"]},
        "approval": {"status": "pending"},
        "created_at": NOW,
        "dry_run": dry,
    }


def test_no_changed_field_needs_no_approval():
    manifest = build_manifest(_result(scope=None), {}, NOW)
    assert manifest["expected_drift"] == {"policy": "none", "fields": []}
    assert manifest["approval"] == {"status": "not_required"}
    assert manifest["dry_run"]["field_changes"] == dict.fromkeys(FIELDS, 0)
    assert manifest["migration_id"] == "mig_" + sha256_hex({"draft": "d" * 64, "source": "s" * 64,
                                                            "scope": None})[:24]


def test_an_hmac_signature():
    manifest = build_manifest(_result(), {"verdict": 1}, NOW)
    signed = sign_manifest({**manifest, "migration_hash": "stale", "signature": {"old": 1}}, HmacReceiptSigner(HMAC_KEY))
    digest = sha256_hex(manifest)
    payload = canonical_bytes({"key_id": "hmac-mig-1", "migration_hash": digest})
    assert signature_payload("hmac-mig-1", digest) == payload
    assert signed == {**manifest, "migration_hash": digest, "signature": {
        "algorithm": "hmac-sha256", "key_id": "hmac-mig-1", "signed_field": "migration_hash",
        "value": "hmac-sha256:" + hmac.new(b"k" * 32, payload, hashlib.sha256).hexdigest()}}
    assert list(signed)[-2:] == ["migration_hash", "signature"]


def test_an_ed25519_signature_names_its_fingerprint():
    key = Ed25519Key.generate()
    signed = sign_manifest(build_manifest(_result(), {}, NOW), Ed25519ReceiptSigner(key))
    digest = sha256_hex(build_manifest(_result(), {}, NOW))
    payload = canonical_bytes({"key_id": key.key_id, "migration_hash": digest})
    assert signed["signature"] == {"algorithm": "ed25519", "key_id": key.key_id, "signed_field": "migration_hash",
                                   "value": "ed25519:" + b64url_encode(key.sign(payload)),
                                   "public_key_fingerprint": key.fingerprint}


# --------------------------------------------------------------------------- verify_manifest

OLD = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 100}, "no", "TOO_BIG")])
DRAFT = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 50}, "no", "TOO_BIG")], version="2.0.0")
ALL_GOOD = {"schema": True, "result_hash": True, "migration_hash": True, "signature": True}


def _dataset(tmp_path, signer=None):
    root = write_dataset(tmp_path / "ds", decide(OLD, [{"amount": 10}, {"amount": 70}, {"amount": 200}]), [],
                         signer=signer)
    return root, (root / "manifest.json").read_bytes()


def _hmac_signed(tmp_path):
    root, raw = _dataset(tmp_path, HmacReceiptSigner(HMAC_KEY))
    manifest = sign_manifest(dry_run(DRAFT, "refunds", dataset=root, created_at=NOW).manifest,
                             HmacReceiptSigner(HMAC_KEY))
    return manifest, root, raw


def test_a_good_manifest_with_every_check(tmp_path):
    manifest, root, raw = _hmac_signed(tmp_path)
    anchors = TrustAnchors.from_hmac_key(HMAC_KEY)
    assert verify_manifest(manifest, anchors) == {"valid": True, "checks": ALL_GOOD, "problems": []}
    full = verify_manifest(manifest, anchors, draft=DRAFT, dataset_manifest=raw, dataset_root=root)
    assert full == {"valid": True, "problems": [], "checks": {**ALL_GOOD, "draft_hash": True, "dataset_hash": True,
                                                               "dataset_signature": True, "dataset_files": True}}
    # Without the dataset's bytes its root is not read.
    assert verify_manifest(manifest, anchors, dataset_root=root)["checks"] == ALL_GOOD


def test_each_wrong_input_fails_its_own_check(tmp_path):
    manifest, _root, raw = _hmac_signed(tmp_path)
    anchors = TrustAnchors.from_hmac_key(HMAC_KEY)
    assert verify_manifest(manifest, anchors, draft=OLD) == {
        "valid": False, "checks": {**ALL_GOOD, "draft_hash": False}, "problems": ["draft_hash does not match"]}
    assert verify_manifest(manifest, anchors, dataset_manifest=raw + b" ") == {
        "valid": False, "checks": {**ALL_GOOD, "dataset_hash": False}, "problems": ["dataset_hash does not match"]}
    # The draft must be the one both the manifest's `to` and its dry-run name.
    other_to = copy.deepcopy(manifest)
    other_to["dry_run"]["draft"]["rulebook_hash"] = "0" * 64
    checks = verify_manifest(other_to, anchors, draft=DRAFT)["checks"]
    assert checks["draft_hash"] is False and checks["result_hash"] is False
    no_to = copy.deepcopy(manifest)
    del no_to["to"]
    assert verify_manifest(no_to, anchors, draft=DRAFT)["checks"]["draft_hash"] is False


def test_tampering_with_the_result_or_the_manifest(tmp_path):
    manifest, _, _ = _hmac_signed(tmp_path)
    anchors = TrustAnchors.from_hmac_key(HMAC_KEY)
    changed = copy.deepcopy(manifest)
    changed["dry_run"]["decisions_changed"] += 1
    assert verify_manifest(changed, anchors) == {
        "valid": False, "checks": {**ALL_GOOD, "result_hash": False, "migration_hash": False, "signature": False},
        "problems": ["result_hash does not match", "migration_hash does not match", "signature does not match"]}
    renamed = copy.deepcopy(manifest)
    renamed["created_at"] = "2026-11-25T00:00:00.000Z"
    assert verify_manifest(renamed, anchors)["checks"] == {**ALL_GOOD, "migration_hash": False, "signature": False}
    # A result hash over the result with its hash left in is not the result hash.
    rehashed = copy.deepcopy(manifest)
    rehashed["dry_run"]["result_hash"] = sha256_hex(rehashed["dry_run"])
    assert verify_manifest(rehashed, anchors)["checks"]["result_hash"] is False


def test_schema_problems_are_named_by_path(tmp_path):
    manifest, _, _ = _hmac_signed(tmp_path)
    anchors = TrustAnchors.from_hmac_key(HMAC_KEY)
    one = verify_manifest(sign_manifest({**manifest, "status": "done"}, HmacReceiptSigner(HMAC_KEY)), anchors)
    assert one == {"valid": False, "checks": {**ALL_GOOD, "schema": False}, "problems": [
        "schema: status: 'done' is not one of ['proposed', 'approved', 'rejected', 'superseded']"]}
    # Six errors: the first five (in the order of their full text) are named, the root as (root).
    body = {k: v for k, v in manifest.items() if k != "approval"}
    body |= {"status": "done", "schema_version": "x", "migration_id": "", "rulebook_id": 5,
             "compatibility_class": None}
    many = verify_manifest(sign_manifest(body, HmacReceiptSigner(HMAC_KEY)), anchors)
    assert many["checks"] == {**ALL_GOOD, "schema": False}
    assert many["problems"] == [
        "schema: migration_id: '' should be non-empty",
        "schema: (root): 'approval' is a required property",
        "schema: status: 'done' is not one of ['proposed', 'approved', 'rejected', 'superseded']",
        "schema: schema_version: 'rulebook_migration_v1' was expected",
        "schema: rulebook_id: 5 is not of type 'string'",
    ]


def test_not_an_object():
    assert verify_manifest([], TrustAnchors.from_hmac_key(HMAC_KEY)) == {
        "valid": False, "checks": {"schema": False}, "problems": ["the manifest is not a JSON object"]}


def _resigned(manifest: dict, signature: object) -> dict:
    return {**manifest, "signature": signature}


def test_each_bad_signature(tmp_path):
    manifest, _, _ = _hmac_signed(tmp_path)
    anchors = TrustAnchors.from_hmac_key(HMAC_KEY)
    good = manifest["signature"]

    def problems(signature: object) -> list[str]:
        report = verify_manifest(_resigned(manifest, signature), anchors)
        assert report["checks"] == {**ALL_GOOD, "signature": False, "schema": report["checks"]["schema"]}
        return [p for p in report["problems"] if not p.startswith("schema: ")]

    # A reason that does not start with the check's name is followed by "signature does not match".
    assert problems(None) == ["the manifest is not signed", "signature does not match"]
    malformed = ["signature fields are malformed"]
    assert problems({**good, "algorithm": "rsa"}) == malformed
    assert problems({**good, "key_id": 7}) == malformed
    assert problems({**good, "value": 7}) == malformed
    assert problems({**good, "value": "ed25519:" + good["value"].split(":", 1)[1]}) == malformed
    assert problems({**good, "value": "hmac-sha256" + good["value"].split(":", 1)[1]}) == malformed
    assert problems({**good, "key_id": "someone"}) == ["no trusted HMAC secret for key id 'someone'",
                                                        "signature does not match"]
    assert problems({**good, "value": good["value"][:-1] + ("0" if good["value"][-1] != "0" else "1")}) == \
        ["signature does not match"]
    # Another trusted secret under the same key id does not verify it.
    other = TrustAnchors.from_hmac_key(HmacKey("hmac-mig-1", b"j" * 32))
    assert verify_manifest(manifest, other)["checks"]["signature"] is False


def test_ed25519_signatures(tmp_path):
    root, _ = _dataset(tmp_path)
    key = Ed25519Key.generate()
    manifest = sign_manifest(dry_run(DRAFT, "refunds", dataset=root, created_at=NOW).manifest,
                             Ed25519ReceiptSigner(key))
    by_id = TrustAnchors.from_public_key_pem(key.public_key_pem, key.key_id)
    assert verify_manifest(manifest, by_id) == {"valid": True, "checks": ALL_GOOD, "problems": []}
    # An anchor under another key id is found by the signature's fingerprint.
    by_fingerprint = TrustAnchors.from_public_key_pem(key.public_key_pem, "another-id")
    assert verify_manifest(manifest, by_fingerprint)["valid"] is True
    unnamed = _resigned(manifest, {k: v for k, v in manifest["signature"].items() if k != "public_key_fingerprint"})
    assert verify_manifest(unnamed, by_fingerprint)["problems"] == [
        f"no trusted Ed25519 key for key id {key.key_id!r}", "signature does not match"]
    # Without a fingerprint the anchor is found by its key id.
    assert verify_manifest(unnamed, by_id) == {"valid": True, "checks": ALL_GOOD, "problems": []}
    good = manifest["signature"]["value"]
    assert verify_manifest(_resigned(manifest, {**manifest["signature"], "value": "ed25519:!!"}), by_id) == {
        "valid": False, "checks": {**ALL_GOOD, "signature": False}, "problems": ["signature is not base64url"]}
    short = "ed25519:" + b64url_encode(b"\0" * 63)
    assert verify_manifest(_resigned(manifest, {**manifest["signature"], "value": short}), by_id)[
        "problems"] == ["signature does not match"]
    assert good.startswith("ed25519:")
    stranger = TrustAnchors.from_public_key_pem(Ed25519Key.generate().public_key_pem, key.key_id)
    assert verify_manifest(manifest, stranger)["checks"]["signature"] is False


def test_the_dataset_checks(tmp_path):
    manifest, root, raw = _hmac_signed(tmp_path)
    anchors = TrustAnchors.from_hmac_key(HMAC_KEY)
    both = {**ALL_GOOD, "dataset_hash": True}

    def report(raw_bytes: bytes, m: dict = manifest) -> dict:
        return verify_manifest(m, anchors, dataset_manifest=raw_bytes, dataset_root=root)

    not_object = report(b"[1]")
    assert not_object["checks"] == {**both, "dataset_hash": False, "dataset_signature": False, "dataset_files": False}
    # dataset_files failed without a reason of its own: "dataset_files does not match".
    assert not_object["problems"] == ["dataset_signature: the dataset manifest is not a JSON object",
                                      "dataset_hash does not match", "dataset_files does not match"]
    assert report(b"\xff")["checks"]["dataset_files"] is False
    assert report(b"{")["problems"][0] == "dataset_signature: the dataset manifest is not a JSON object"
    # Another dataset_hash named by the dry-run.
    other = copy.deepcopy(manifest)
    other["dry_run"]["source"]["dataset_hash"] = "0" * 64
    named = verify_manifest(other, anchors, dataset_manifest=raw, dataset_root=root)
    assert named["checks"]["dataset_signature"] is False and named["checks"]["dataset_files"] is True
    assert "dataset_signature: the dry-run names another dataset_hash" in named["problems"]
    # Signed by a key the verifier does not trust.
    untrusted = verify_manifest(manifest, TrustAnchors.from_hmac_key(HmacKey("hmac-mig-1", b"j" * 32)),
                                dataset_manifest=raw, dataset_root=root)
    assert untrusted["checks"]["dataset_signature"] is False
    assert "dataset_signature: its signature does not verify" in untrusted["problems"]
    # A listed file that changed on disk.
    part = next(root.glob("decisions/**/*.parquet"))
    part.write_bytes(part.read_bytes() + b"x")
    changed = report(raw)
    assert changed["checks"] == {**both, "dataset_signature": True, "dataset_files": False}
    assert len(changed["problems"]) == 1 and changed["problems"][0].startswith("dataset_files: ")


def test_an_unsigned_dataset(tmp_path):
    root, raw = _dataset(tmp_path)
    manifest = sign_manifest(dry_run(DRAFT, "refunds", dataset=root, created_at=NOW).manifest,
                             HmacReceiptSigner(HMAC_KEY))
    report = verify_manifest(manifest, TrustAnchors.from_hmac_key(HMAC_KEY), dataset_manifest=raw, dataset_root=root)
    assert report["checks"] == {**ALL_GOOD, "dataset_hash": True, "dataset_signature": False, "dataset_files": True}
    assert report["problems"] == ["dataset_signature: it is not signed"]
    assert json.loads(raw)["dataset_hash"] == manifest["dry_run"]["source"]["dataset_hash"]
    assert sha256_bytes_hex(raw) == manifest["dry_run"]["source"]["hash"]


def test_a_manifest_without_a_dry_run_object(tmp_path):
    manifest, _, _ = _hmac_signed(tmp_path)
    anchors = TrustAnchors.from_hmac_key(HMAC_KEY)
    for dry in (None, [1], "x"):
        report = verify_manifest(sign_manifest({**manifest, "dry_run": dry}, HmacReceiptSigner(HMAC_KEY)), anchors,
                                 draft=DRAFT, dataset_manifest=b"{}")
        assert report["checks"] == {**ALL_GOOD, "schema": False, "result_hash": False, "draft_hash": False,
                                    "dataset_hash": False}
        assert report["problems"][-3:] == ["result_hash does not match", "draft_hash does not match",
                                           "dataset_hash does not match"]
