"""PEM text, fingerprints, Ed25519/HMAC signers, base64url, and the keyring file."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import stat
from datetime import UTC, datetime

import pytest
from crypto_support import SEED_A, key_a

from gate.keys.signing import (
    ED25519_PKCS8_PREFIX,
    ED25519_SPKI_PREFIX,
    Ed25519Key,
    Ed25519ReceiptSigner,
    HmacKey,
    HmacReceiptSigner,
    KeyMaterialError,
    KeyringError,
    b64url_decode,
    b64url_encode,
    canonical_public_key_pem,
    ed25519_verify,
    generate_keyring,
    load_keyring,
    private_key_pem_from_seed,
    public_key_fingerprint,
    public_key_pem_from_raw,
    raw_public_key_from_pem,
    rotate_keyring,
    seed_from_private_key_pem,
)
from gate.protocol.records import receipt_signature_payload

# RFC 8032 §7.1, test 1.
RFC_SEED = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC_PUBLIC = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC_SIG_EMPTY = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)


# --------------------------------------------------------------------------- PEM


def test_public_pem_is_byte_exact_spki():
    raw = bytes(range(32))
    pem = public_key_pem_from_raw(raw)
    lines = pem.split("\n")
    assert lines[0] == "-----BEGIN PUBLIC KEY-----"
    assert lines[-1] == "-----END PUBLIC KEY-----"
    assert not pem.endswith("\n") and pem == pem.strip()
    der = base64.b64decode("".join(lines[1:-1]))
    assert der[:12] == bytes.fromhex("302a300506032b6570032100") == ED25519_SPKI_PREFIX
    assert der[12:] == raw and len(der) == 44
    assert lines[1] == base64.b64encode(ED25519_SPKI_PREFIX + raw).decode()  # 60 chars: one line
    assert all(len(line) <= 64 for line in lines)


def test_rfc8032_vector_public_key_and_signature():
    key = Ed25519Key.from_seed(RFC_SEED)
    assert key.public_key_raw == RFC_PUBLIC
    assert key.sign(b"") == RFC_SIG_EMPTY
    assert raw_public_key_from_pem(key.public_key_pem) == RFC_PUBLIC
    assert ed25519_verify(RFC_PUBLIC, b"", RFC_SIG_EMPTY)
    assert not ed25519_verify(RFC_PUBLIC, b"x", RFC_SIG_EMPTY)


def test_fingerprint_is_sha256_of_trimmed_pem_text():
    key = key_a()
    pem = key.public_key_pem
    assert key.fingerprint == hashlib.sha256(pem.encode("utf-8")).hexdigest()
    assert public_key_fingerprint(pem) == key.fingerprint
    assert public_key_fingerprint("\n  " + pem + "\n\n") == key.fingerprint
    assert public_key_fingerprint(pem.replace("\n", "\\n")) == key.fingerprint
    assert key.key_id == "ed25519-" + key.fingerprint[:16]


def test_parsers_accept_literal_newlines_and_whitespace():
    key = key_a()
    escaped = "  " + key.public_key_pem.replace("\n", "\\n") + "\\n "
    assert raw_public_key_from_pem(escaped) == key.public_key_raw
    assert canonical_public_key_pem(escaped) == key.public_key_pem
    private = private_key_pem_from_seed(SEED_A).replace("\n", "\\n")
    assert seed_from_private_key_pem("\n" + private + "\n") == SEED_A


def test_private_pem_is_pkcs8():
    pem = private_key_pem_from_seed(SEED_A)
    lines = pem.split("\n")
    assert lines[0] == "-----BEGIN PRIVATE KEY-----" and lines[-1] == "-----END PRIVATE KEY-----"
    der = base64.b64decode("".join(lines[1:-1]))
    assert der == bytes.fromhex("302e020100300506032b657004220420") + SEED_A
    assert der.startswith(ED25519_PKCS8_PREFIX)
    assert Ed25519Key.from_private_key_pem(pem).public_key_pem == key_a().public_key_pem


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not a pem",
        "-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----",
        public_key_pem_from_raw(bytes(32)).replace("PUBLIC", "PRIVATE"),
        # An RSA-looking SPKI (wrong prefix)
        "-----BEGIN PUBLIC KEY-----\n" + base64.b64encode(b"\x30\x2a" + bytes(42)).decode() + "\n-----END PUBLIC KEY-----",
        # Truncated key
        "-----BEGIN PUBLIC KEY-----\n" + base64.b64encode(ED25519_SPKI_PREFIX + bytes(31)).decode() + "\n-----END PUBLIC KEY-----",
    ],
)
def test_bad_public_pem_is_rejected(text):
    with pytest.raises(KeyMaterialError):
        raw_public_key_from_pem(text)


# --------------------------------------------------------------------------- base64url


def test_b64url_is_unpadded_and_strict():
    sig = key_a().sign(b"message")
    text = b64url_encode(sig)
    assert "=" not in text and "+" not in text and "/" not in text
    assert len(text) == 86
    assert b64url_decode(text) == sig
    for bad in (text + "=", text.replace(text[0], "+", 1) if text[0] != "+" else "+" + text[1:], text[:-1] + "!"):
        with pytest.raises(ValueError):
            b64url_decode(bad)


def test_b64url_rejects_non_canonical_trailing_bits():
    text = b64url_encode(b"\x00" * 64)  # ends in 'AA'; the last char carries 4 unused bits
    assert text.endswith("AA")
    with pytest.raises(ValueError):
        b64url_decode(text[:-1] + "B")


# --------------------------------------------------------------------------- signers


def test_ed25519_receipt_signer_format():
    key = key_a()
    signer = Ed25519ReceiptSigner(key)
    assert signer.algorithm == "ed25519"
    assert signer.key_id == key.key_id
    assert signer.public_key_fingerprint == key.fingerprint
    payload = receipt_signature_payload("dec_1", key.key_id, "a" * 64, "b" * 64)
    signature = signer.sign_payload(payload)
    assert signature.startswith("ed25519:")
    raw = b64url_decode(signature[len("ed25519:"):])
    assert ed25519_verify(key.public_key_raw, payload, raw)


def test_hmac_receipt_signer_format():
    signer = HmacReceiptSigner(HmacKey("k1", b"secret"))
    assert signer.algorithm == "hmac-sha256" and signer.public_key_fingerprint is None
    payload = receipt_signature_payload("dec_1", "k1", "a" * 64, "b" * 64)
    signature = signer.sign_payload(payload)
    assert signature == "hmac-sha256:" + hmac.new(b"secret", payload, hashlib.sha256).hexdigest()
    with pytest.raises(TypeError):
        signer.sign_attestation_hash("a" * 64)


def test_attestation_hash_signature_is_over_hex_text():
    key = key_a()
    text = "c" * 64
    signature = Ed25519ReceiptSigner(key).sign_attestation_hash(text)
    assert ed25519_verify(key.public_key_raw, text.encode("utf-8"), b64url_decode(signature))
    assert not ed25519_verify(key.public_key_raw, bytes.fromhex(text), b64url_decode(signature))


def test_hmac_key_accepts_text_secret_and_rejects_empty():
    assert HmacKey("k", "s").secret == b"s"
    with pytest.raises(KeyMaterialError):
        HmacKey("k", b"")


# --------------------------------------------------------------------------- keyring

NOW = datetime(2026, 5, 21, 0, 0, tzinfo=UTC)
LATER = datetime(2026, 6, 1, 12, 30, 5, 123000, tzinfo=UTC)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_generate_keyring_writes_0600_file(tmp_path):
    path = tmp_path / "keys" / "keyring.json"
    keyring = generate_keyring(path, NOW)
    assert _mode(path) == 0o600
    body = json.loads(path.read_text())
    assert body["keyring_version"] == "gate_signing_keyring_v1"
    (entry,) = body["keys"]
    assert entry["status"] == "active" and entry["algorithm"] == "ed25519"
    assert entry["not_before"] == "2026-05-21T00:00:00.000Z" and "not_after" not in entry
    assert entry["private_key"].startswith("-----BEGIN PRIVATE KEY-----")
    assert entry["public_key_fingerprint"] == hashlib.sha256(entry["public_key"].encode()).hexdigest()
    assert keyring.active.key_id == entry["key_id"]
    loaded = load_keyring(path)
    assert loaded.active.public_key_pem == keyring.active.public_key_pem
    assert [e["key_id"] for e in loaded.registry_entries()] == [entry["key_id"]]
    assert "private_key" not in loaded.registry_entries()[0]


def test_generate_refuses_to_overwrite(tmp_path):
    path = tmp_path / "keyring.json"
    generate_keyring(path, NOW)
    with pytest.raises(KeyringError):
        generate_keyring(path, NOW)


def test_rotate_retires_old_key_and_drops_its_private_key(tmp_path):
    path = tmp_path / "keyring.json"
    first = generate_keyring(path, NOW).active
    rotated = rotate_keyring(path, LATER)
    assert _mode(path) == 0o600
    assert rotated.active.key_id != first.key_id
    entries = rotated.registry_entries()
    assert [e["status"] for e in entries] == ["active", "retired"]
    assert entries[1]["key_id"] == first.key_id
    assert entries[1]["not_after"] == "2026-06-01T12:30:05.123Z"
    assert entries[1]["not_before"] == "2026-05-21T00:00:00.000Z"
    assert entries[0]["not_before"] == "2026-06-01T12:30:05.123Z"
    body = json.loads(path.read_text())
    retired = [k for k in body["keys"] if k["status"] == "retired"]
    assert retired and all("private_key" not in k for k in retired)
    assert first.private_key_pem not in path.read_text()
    assert rotated.find_public(key_id=first.key_id)["status"] == "retired"
    assert rotated.find_public(fingerprint=first.fingerprint)["key_id"] == first.key_id
    assert rotated.find_public(key_id="nope") is None
    again = rotate_keyring(path, LATER)
    assert [e["status"] for e in again.registry_entries()] == ["active", "retired", "retired"]


def test_rotation_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "keyring.json"
    generate_keyring(path, NOW)
    before = path.read_bytes()
    seen = {}

    def failing_replace(src, dst):
        seen["mode"] = _mode(src)
        with open(src) as written:
            seen["content"] = json.loads(written.read())
        raise OSError("disk full")

    monkeypatch.setattr("gate.keys.signing.os.replace", failing_replace)
    with pytest.raises(OSError):
        rotate_keyring(path, LATER)
    assert path.read_bytes() == before  # old file intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keyring.json"]  # temp removed
    assert seen["mode"] == 0o600  # the temp file was private before it was moved into place
    assert len(seen["content"]["keys"]) == 2


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda body: "{not json", "not JSON"),
        (lambda body: json.dumps({**body, "keyring_version": "v0"}), "keyring_version"),
        (lambda body: json.dumps({**body, "keys": []}), "no keys"),
        (lambda body: json.dumps({"keyring_version": body["keyring_version"],
                                  "keys": [{**body["keys"][0], "public_key_fingerprint": "0" * 64}]}),
         "fingerprint"),
        (lambda body: json.dumps({"keyring_version": body["keyring_version"],
                                  "keys": [{**body["keys"][0], "private_key": private_key_pem_from_seed(bytes(32))}]}),
         "does not match"),
        (lambda body: json.dumps({"keyring_version": body["keyring_version"],
                                  "keys": [{**body["keys"][0], "status": "retired", "not_after": "x"}]}),
         "must not keep"),
        (lambda body: json.dumps({"keyring_version": body["keyring_version"],
                                  "keys": [body["keys"][0], body["keys"][0]]}),
         "duplicate"),
    ],
)
def test_corrupt_keyring_raises_clear_error(tmp_path, mutate, message):
    path = tmp_path / "keyring.json"
    generate_keyring(path, NOW)
    path.write_text(mutate(json.loads(path.read_text())))
    with pytest.raises(KeyringError) as info:
        load_keyring(path)
    assert message in info.value.message
    assert info.value.code == "SIGNING_KEYRING_INVALID"


def test_missing_keyring_raises(tmp_path):
    with pytest.raises(KeyringError, match="not found"):
        load_keyring(tmp_path / "absent.json")
