"""Issue 12 gaps 2, 3 and 7 (legacy `v`): record verification paths no test pinned. Each test
fails when its guarded check in `gate/verify/` is inverted or short-circuited."""

from __future__ import annotations

import copy

import pytest

from gate.keys.signing import receipt_signer_for
from gate.protocol.records import seal_record
from gate.verify import TrustAnchors, TrustedHmacSecret, verify_record
from tests.crypto.crypto_support import HMAC_KEY_ID, HMAC_SECRET, hmac_key, load_vector

pytestmark = pytest.mark.usefixtures("backend")

HMAC = b"verify-gaps-hmac-secret-of-32-bytes!"


def _verify(client, record):
    response = client.post("/api/decision/verify", json={"record": record})
    assert response.status_code == 200
    return response.json


@pytest.fixture
def hmac_client(make_app):
    return make_app(hmac_secret=HMAC).test_client()


def test_an_hmac_record_with_its_audit_chain_verifies(hmac_client, api_key, sample_request):
    record = hmac_client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    assert record["receipt_signature_algorithm"] == "hmac-sha256"
    assert record["audit_chain_signature"].startswith("hmac-sha256:")
    result = _verify(hmac_client, record)
    assert result["verified"] is True, result["failed_checks"]
    assert result["checks"]["audit_chain_signature"] is True and result["key_source"] == "hmac_secret"


@pytest.mark.parametrize("forge", [
    lambda chain: chain.update(link_hash="f" * 64),
    lambda chain: chain.update(chain_position=2),
    lambda chain: chain.update(chain_id="chain_" + "0" * 32),
])
def test_a_forged_audit_chain_on_an_hmac_record_fails_its_signature(hmac_client, api_key, sample_request, forge):
    # Gap 2: with the `secret is None` test inverted, the forged member would verify.
    record = hmac_client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    forged = copy.deepcopy(record)
    forge(forged["audit_chain"])
    result = _verify(hmac_client, forged)
    assert result["verified"] is False
    assert result["failed_checks"] == ["audit_chain_signature"]


def test_an_hmac_audit_chain_without_the_secret_is_not_checkable(client, hmac_client, api_key, sample_request):
    record = hmac_client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    result = _verify(client, record)  # an app that holds only Ed25519 keys
    assert result["checks"]["audit_chain_signature"] is None
    assert result["verified"] is False and result["checks"]["receipt_signature"] is False


@pytest.mark.parametrize("junk", ["junk", None, 7, ["ed25519"], True])
@pytest.mark.parametrize("signature_first", [True, False])
def test_a_non_object_integrity_signature_fails_the_integrity_block(client, api_key, sample_request, junk,
                                                                    signature_first):
    # Gap 3: returning success early on a non-object `signature` would let the rest of the
    # block (here a bogus record_hash) go unchecked when `signature` comes first.
    record = client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    block = {name: value for name, value in record["integrity"].items() if name != "signature"}
    block["record_hash"] = "0" * 64
    record["integrity"] = {"signature": junk, **block} if signature_first else {**block, "signature": junk}
    result = _verify(client, record)
    assert result["verified"] is False
    assert result["failed_checks"] == ["integrity_block"]


LEGACY_ANCHORS = TrustAnchors(hmac=(TrustedHmacSecret(HMAC_KEY_ID, HMAC_SECRET),))


def _legacy_record_with_application_verdict():
    """The reference legacy vector, given an `application_verdict` and resealed with its secret."""
    record = load_vector("valid-decision-record.json")
    record["application_verdict"] = record["v"]
    return seal_record(record, receipt_signer=receipt_signer_for(hmac_key()))


def test_a_legacy_record_with_an_application_verdict_verifies():
    result = verify_record(_legacy_record_with_application_verdict(), anchors=LEGACY_ANCHORS)
    assert result.record_kind == "legacy"
    assert result.verified is True, result.failed_checks
    assert result.checks["compact_verdict"] is True


@pytest.mark.parametrize("edit", [
    lambda r: r.pop("v"),
    lambda r: r.update(v="rejected"),
    lambda r: r.update(application_verdict="rejected"),
])
def test_a_legacy_record_whose_v_is_gone_or_disagrees_is_caught(edit):
    # Gap 7: `v` must equal `application_verdict` in legacy records that carry one, too.
    record = _legacy_record_with_application_verdict()
    edit(record)
    result = verify_record(record, anchors=LEGACY_ANCHORS)
    assert result.verified is False
    assert result.checks["compact_verdict"] is False and "compact_verdict" in result.failed_checks
