"""A signature made with a receipt key, checked against the trust anchors: True, False (missing,
malformed or wrong), or None when no trusted key can check it.

The record's signature members (`gate.verify.signatures`) and the detached signatures of the
signed chains' events (`gate.chain.sealing`) are checked here alike. It lives with the keys, below
the chains and the verifier, so both can use it; with it the two helpers every check over
untrusted data uses: a constant-time digest compare and a hash computation that answers None.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import Any

from gate.keys.anchors import TrustAnchors
from gate.keys.signing import KeyMaterialError, b64url_decode, ed25519_verify
from gate.strict_json import CanonicalJSONError, JsonValue
from gate.vocabulary import SIG_ED25519, SIG_HMAC_SHA256


def _digest_equal(a: Any, b: Any) -> bool:
    """Constant-time equality of two strings; False unless both are strings."""
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def _safe(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a hash computation over untrusted data; None when the data cannot be hashed."""
    try:
        return fn(*args)
    except (CanonicalJSONError, KeyMaterialError, TypeError, ValueError, AttributeError, RecursionError):
        return None


def _ed25519_signature_holds(public_key_raw: bytes, payload: bytes, raw_signature: bytes | None) -> bool:
    """A decoded 64-byte Ed25519 signature that verifies over `payload`."""
    return bool(raw_signature is not None and len(raw_signature) == 64
                and ed25519_verify(public_key_raw, payload, raw_signature))


def _hmac_signature_holds(secret: bytes, payload: bytes, body: str) -> bool:
    """The hex HMAC-SHA256 of `payload`, compared in constant time."""
    return _digest_equal(hmac.new(secret, payload, "sha256").hexdigest(), body)


def _member_signature(record: Mapping[str, JsonValue], anchors: TrustAnchors, name: str,
                      payload: bytes | None) -> bool | None:
    """A signature member made with the record's receipt key (same algorithm and key id).
    False when missing, malformed or wrong; None when no trusted key can check it."""
    signature = record.get(name)
    algorithm, key_id = record.get("receipt_signature_algorithm"), record.get("receipt_key_id")
    # SECURITY: fail closed — a member without its signature, or signed some other way, fails.
    if payload is None or not isinstance(signature, str) or algorithm not in (SIG_ED25519, SIG_HMAC_SHA256) \
            or not signature.startswith(f"{algorithm}:"):
        return False
    body = signature[len(algorithm) + 1:]
    if algorithm == SIG_HMAC_SHA256:
        secret = anchors.select_hmac(key_id)
        return None if secret is None else _hmac_signature_holds(secret.secret, payload, body)
    key = anchors.select_ed25519(key_id, record.get("receipt_public_key_fingerprint"))
    raw = _safe(b64url_decode, body)
    return None if key is None else _ed25519_signature_holds(key.public_key_raw, payload, raw)


def signature_holds(anchors: TrustAnchors, algorithm: Any, key_id: Any, fingerprint: Any, signature: Any,
                    payload: bytes) -> bool | None:
    """A detached signature made with a receipt key (release events): True, False (missing,
    malformed or wrong), or None when no trusted key can check it."""
    signed = {"signature": signature, "receipt_signature_algorithm": algorithm, "receipt_key_id": key_id,
              "receipt_public_key_fingerprint": fingerprint}
    return _member_signature(signed, anchors, "signature", payload)
