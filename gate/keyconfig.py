"""The gate's signing configuration: which key signs receipts and attestations, and which keys
verify them.

- Ed25519 (default): the keyring file's active key signs receipts, rulebook attestations and
  registry attestations; retired keys stay in the registry so old records keep verifying.
- HMAC (alternative): with a secret from the environment, receipts are signed with
  HMAC-SHA256; attestations are still Ed25519-signed when a keyring is present, else "unsigned".
- When `required` and no receipt key is usable, `decide` answers 503 and stores nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from gate.verify import TrustAnchors
from gate.signing import (
    Ed25519Key,
    HmacKey,
    Keyring,
    KeyringError,
    ReceiptSigner,
    load_keyring,
    receipt_signer_for,
)


@dataclass(frozen=True)
class SigningSetup:
    keyring: Keyring | None
    hmac_key: HmacKey | None
    required: bool = True
    problem: str | None = None  # why the keyring could not be loaded, for /status

    @classmethod
    def load(cls, keyring_path: Path | None, hmac_secret: bytes | None, hmac_key_id: str,
             required: bool = True) -> "SigningSetup":
        keyring, problem = None, None
        if keyring_path is not None and Path(keyring_path).exists():
            try:
                keyring = load_keyring(keyring_path)
            except KeyringError as exc:
                problem = exc.message
        elif keyring_path is not None:
            problem = f"signing keyring {keyring_path} does not exist"
        hmac_key = HmacKey(hmac_key_id, hmac_secret) if hmac_secret else None
        return cls(keyring=keyring, hmac_key=hmac_key, required=required, problem=problem)

    def attestation_key(self) -> Ed25519Key | None:
        return self.keyring.active if self.keyring else None

    def receipt_signer(self) -> ReceiptSigner | None:
        if self.hmac_key is not None:
            return receipt_signer_for(self.hmac_key)
        return receipt_signer_for(self.attestation_key())

    def ready(self) -> bool:
        return self.receipt_signer() is not None or not self.required

    def registry_entries(self) -> list[dict]:
        return self.keyring.registry_entries() if self.keyring else []

    @cached_property
    def anchors(self) -> TrustAnchors:
        """The keys this gate trusts when verifying: its keyring (active and retired) and its
        HMAC secret. Keys carried by a request or a record are never added here (SECURITY)."""
        anchors = TrustAnchors.from_keyring(self.keyring) if self.keyring else TrustAnchors()
        if self.hmac_key is not None:
            anchors = anchors + TrustAnchors.from_hmac_key(self.hmac_key)
        return anchors

    def trust_anchors(self) -> TrustAnchors:
        return self.anchors
