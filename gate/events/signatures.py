"""Webhook signatures per the Standard Webhooks specification (standard-webhooks/spec,
`spec/standard-webhooks.md`): the signed content is `{webhook-id}.{webhook-timestamp}.{body}`,
signed with HMAC-SHA256 under the secret's bytes (the base64 after the `whsec_` prefix), sent as
`v1,{base64 signature}`; several signatures (a rotation's overlap) are separated by spaces.
Receivers verify with any Standard Webhooks library (the tests use the `standardwebhooks` package).
"""

from __future__ import annotations

import base64
import hmac
import secrets
from typing import Any

SECRET_PREFIX = "whsec_"  # noqa: S105 (the format's prefix, not a secret)
SECRET_BYTES = 32


def new_secret() -> str:
    """A fresh secret: 32 random bytes, base64, with the `whsec_` prefix."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def _key(secret: str) -> bytes:
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError("a webhook secret starts with whsec_")
    return base64.b64decode(secret[len(SECRET_PREFIX):], validate=True)


def sign(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """One `v1,` signature of a delivery."""
    content = f"{webhook_id}.{timestamp}.".encode() + body
    digest = hmac.digest(_key(secret), content, "sha256")  # one-shot: no HMAC object per delivery
    return "v1," + base64.b64encode(digest).decode("ascii")


def sign_ed25519(key: Any, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The specification's asymmetric form: `v1a,` + base64 of the Ed25519 signature of the same
    content, by the gate's attestation key (its public key is in `GET /api/decision/receipt-keys`)."""
    content = f"{webhook_id}.{timestamp}.".encode() + body
    return "v1a," + base64.b64encode(key.sign(content)).decode("ascii")


def signature_header(secrets_in_force: list[str], webhook_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value: one signature per secret in force (newest first)."""
    return " ".join(sign(secret, webhook_id, timestamp, body) for secret in secrets_in_force)
