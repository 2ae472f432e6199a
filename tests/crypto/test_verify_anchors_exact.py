"""`gate.keys.anchors` member by member: what each constructor keeps of the key material, which
registry entries become keys, and how a key or secret is selected from a record's untrusted
key id and fingerprint."""

from __future__ import annotations

import pytest
from crypto_support import HMAC_SECRET, key_a, key_b, make_record

from gate.keys.signing import HmacKey, Keyring, KeyringEntry
from gate.verify import TrustAnchorError, TrustAnchors, verify_record


def _entry(key=None, **members):
    key = key or key_a()
    entry = {"key_id": key.key_id, "algorithm": "ed25519", "public_key": key.public_key_pem}
    entry.update(members)
    return entry


def test_a_key_keeps_its_id_pem_fingerprints_source_and_status():
    key = key_a()
    (trusted,) = TrustAnchors.from_registry_entries(
        [_entry(status="retired", public_key_fingerprint=key.fingerprint)], source="custom").ed25519
    assert (trusted.key_id, trusted.public_key_raw, trusted.public_key_pem) == (
        key.key_id, key.public_key_raw, key.public_key_pem)
    assert trusted.fingerprint == key.fingerprint and trusted.fingerprints == {key.fingerprint}
    assert (trusted.source, trusted.status) == ("custom", "retired")


def test_a_pem_with_escaped_newlines_is_known_by_both_fingerprints():
    from gate.keys.signing import public_key_fingerprint

    escaped = key_a().public_key_pem.strip().replace("\n", "\\n")
    (trusted,) = TrustAnchors.from_public_key_pem(escaped, key_id="k1").ed25519
    assert trusted.key_id == "k1" and trusted.public_key_pem == key_a().public_key_pem
    assert trusted.fingerprint == key_a().fingerprint
    assert trusted.fingerprints == {key_a().fingerprint, public_key_fingerprint(escaped.replace("\\n", "\n"))}


def test_registry_entries_other_than_ed25519_are_skipped_and_the_rest_kept():
    entries = [_entry(algorithm="hmac-sha256"), _entry(key_b(), algorithm="ED25519"),
               {k: v for k, v in _entry().items() if k != "algorithm"}, _entry(key_b(), algorithm=7)]
    keys = TrustAnchors.from_registry_entries(entries).ed25519
    assert [k.key_id for k in keys] == [key_b().key_id, key_a().key_id, key_b().key_id]
    assert TrustAnchors.from_registry_entries([_entry(algorithm="hmac-sha256")]).empty


def test_an_entry_without_a_key_id_is_kept_and_a_stated_fingerprint_that_is_not_text_is_ignored():
    keys = TrustAnchors.from_registry_entries(
        [{"public_key": key_a().public_key_pem}, _entry(public_key_fingerprint=5)]).ed25519
    assert [k.key_id for k in keys] == [None, key_a().key_id]
    assert [k.status for k in keys] == [None, None]


@pytest.mark.parametrize("entry, where", [
    ("junk", "keys[0]"),
    (_entry(public_key=5), "keys[0].public_key"),
    (_entry(key_id=""), "keys[0].key_id"),
    (_entry(key_id=5), "keys[0].key_id"),
    (_entry(public_key_fingerprint="f" * 64), "public_key_fingerprint"),
])
def test_unusable_registry_entries_raise_with_their_place(entry, where):
    with pytest.raises(TrustAnchorError) as raised:
        TrustAnchors.from_registry_entries([entry])
    assert raised.value.code == "VERIFY_TRUST_ANCHOR_INVALID"
    assert where in raised.value.message and raised.value.message == str(raised.value)


def test_a_keyring_gives_every_key_with_its_source_and_status():
    a, b = key_a(), key_b()
    keyring = Keyring((KeyringEntry(a.key_id, "active", a.public_key_pem, a.fingerprint, "2026-01-01", private_key=a),
                       KeyringEntry(b.key_id, "retired", b.public_key_pem, b.fingerprint, "2025-01-01")))
    keys = TrustAnchors.from_keyring(keyring, source="custom").ed25519
    assert [(k.key_id, k.status, k.source) for k in keys] == [(a.key_id, "active", "custom"),
                                                              (b.key_id, "retired", "custom")]
    assert {k.source for k in TrustAnchors.from_keyring(keyring).ed25519} == {"server_key_registry"}


def test_hmac_secrets_keep_their_key_id_bytes_and_source():
    (secret,) = TrustAnchors.from_hmac_secret("sécret", key_id="k1", source="custom").hmac
    assert (secret.key_id, secret.secret, secret.source) == ("k1", "sécret".encode(), "custom")
    (secret,) = TrustAnchors.from_hmac_key(HmacKey("k2", HMAC_SECRET), source="custom").hmac
    assert (secret.key_id, secret.secret, secret.source) == ("k2", HMAC_SECRET, "custom")
    assert TrustAnchors.from_hmac_secret(HMAC_SECRET).hmac[0].source == "hmac_secret"


def test_an_hmac_secret_with_a_key_id_is_not_a_wildcard():
    anchors = TrustAnchors.from_hmac_key(HmacKey("k1", HMAC_SECRET))
    assert anchors.select_hmac("k1").key_id == "k1"
    assert anchors.select_hmac("k2") is None
    assert TrustAnchors.from_hmac_secret(HMAC_SECRET, key_id="k1").select_hmac("k2") is None
    assert TrustAnchors.from_hmac_secret(HMAC_SECRET).select_hmac("k2").key_id is None


def test_an_empty_key_id_never_selects_even_a_key_stored_under_it():
    assert TrustAnchors.from_public_key_pem(key_a().public_key_pem, key_id="").select_ed25519("", None) is None
    assert TrustAnchors.from_hmac_secret(HMAC_SECRET, key_id="").select_hmac("") is None


@pytest.mark.parametrize("fingerprint", [["x"], {"a": 1}, 5, ""])
def test_a_fingerprint_that_is_not_text_selects_nothing_and_does_not_raise(fingerprint):
    anchors = TrustAnchors.from_public_key_pem(key_a().public_key_pem, key_id="k1")
    assert anchors.select_ed25519(None, fingerprint) is None
    assert anchors.select_ed25519("k1", fingerprint).key_id == "k1"  # the key id still selects


def test_a_record_whose_fingerprint_is_a_list_fails_instead_of_raising():
    anchors = TrustAnchors.from_public_key_pem(key_a().public_key_pem, key_id=key_a().key_id)
    record = make_record()
    record["receipt_public_key_fingerprint"] = ["x"]
    result = verify_record(record, anchors=anchors)
    assert result.failed_checks == ("integrity_block", "receipt_public_key_fingerprint")
    assert result.checks["receipt_signature"] is True
