"""Trust anchors: the keys a verifier trusts, where they came from, and key selection.

Only keys in `TrustAnchors` can make a record authentic; a key that travels inside a request,
a record or a packet is never one of them (see the `gate.verify` package docstring).

They live with the keys, below the verifier: the key configuration (`gate.keys.config`) builds
the server's own anchors from its keyring, and every verifier (`gate.verify`, the release and
hold events, the dataset's manifests) takes them as a value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gate.errors import CodedError
from gate.keys.signing import (
    HmacKey,
    KeyMaterialError,
    Keyring,
    canonical_public_key_pem,
    normalize_pem_text,
    public_key_fingerprint,
    raw_public_key_from_pem,
)
from gate.strict_json import CanonicalJSONError, parse_strict
from gate.vocabulary import SIG_ED25519

SOURCE_SERVER_KEY_REGISTRY = "server_key_registry"
SOURCE_KEY_REGISTRY_FILE = "key_registry_file"
SOURCE_KEY_REGISTRY_URL = "key_registry_url"
SOURCE_PUBLIC_KEY_PEM = "public_key_pem"
SOURCE_HMAC_SECRET = "hmac_secret"  # noqa: S105 (a key-source label, not a secret)


class TrustAnchorError(CodedError):
    """Operator-supplied key material (registry, PEM, secret) that cannot be used."""

    CODE = "VERIFY_TRUST_ANCHOR_INVALID"


@dataclass(frozen=True, slots=True)
class TrustedEd25519Key:
    """A trusted Ed25519 public key. `fingerprints` holds the canonical-PEM fingerprint and the
    fingerprint of the PEM text exactly as supplied (identical when the canonical form was
    supplied)."""

    key_id: str | None
    public_key_raw: bytes
    public_key_pem: str
    fingerprint: str
    fingerprints: frozenset[str]
    source: str
    status: str | None = None

    @classmethod
    def from_pem(cls, pem: str, *, key_id: str | None, source: str, status: str | None = None,
                 stated_fingerprint: str | None = None) -> TrustedEd25519Key:
        try:
            raw = raw_public_key_from_pem(pem)
            canonical = canonical_public_key_pem(pem)
        except KeyMaterialError as exc:
            label = f"key {key_id!r}" if key_id else "public key"
            raise TrustAnchorError(f"{label}: {exc.message}") from exc
        fingerprint = public_key_fingerprint(canonical)
        fingerprints = {fingerprint, public_key_fingerprint(normalize_pem_text(pem))}
        if stated_fingerprint is not None and stated_fingerprint not in fingerprints:
            raise TrustAnchorError(
                f"key {key_id!r}: public_key_fingerprint does not match its public key"
            )
        return cls(key_id, raw, canonical, fingerprint, frozenset(fingerprints), source, status)


@dataclass(frozen=True, slots=True)
class TrustedHmacSecret:
    """A trusted HMAC secret. `key_id` None means: usable for whatever key id a record names."""

    key_id: str | None
    secret: bytes = field(repr=False)
    source: str = SOURCE_HMAC_SECRET


@dataclass(frozen=True, slots=True)
class TrustAnchors:
    """The keys a verifier trusts. Combine with `+`."""

    ed25519: tuple[TrustedEd25519Key, ...] = ()
    hmac: tuple[TrustedHmacSecret, ...] = ()

    def __add__(self, other: TrustAnchors) -> TrustAnchors:
        return TrustAnchors(self.ed25519 + other.ed25519, self.hmac + other.hmac)

    @property
    def empty(self) -> bool:
        return not self.ed25519 and not self.hmac

    # ---- constructors

    @classmethod
    def from_registry_entries(cls, entries: Iterable[Mapping[str, Any]],
                              source: str = SOURCE_SERVER_KEY_REGISTRY) -> TrustAnchors:
        """From registry dicts ``{key_id, algorithm, public_key, public_key_fingerprint?, status}``.

        Entries whose `algorithm` is present and not "ed25519" are ignored; a bad public key or
        a fingerprint that does not match its key raises `TrustAnchorError`.
        """
        keys = []
        for index, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise TrustAnchorError(f"keys[{index}] must be an object")
            algorithm = entry.get("algorithm", SIG_ED25519)
            if isinstance(algorithm, str) and algorithm.lower() != SIG_ED25519:
                continue
            pem = entry.get("public_key")
            if not isinstance(pem, str):
                raise TrustAnchorError(f"keys[{index}].public_key must be PEM text")
            key_id = entry.get("key_id")
            if key_id is not None and (not isinstance(key_id, str) or not key_id):
                raise TrustAnchorError(f"keys[{index}].key_id must be a non-empty string")
            stated = entry.get("public_key_fingerprint")
            keys.append(
                TrustedEd25519Key.from_pem(
                    pem, key_id=key_id, source=source, status=entry.get("status"),
                    stated_fingerprint=stated if isinstance(stated, str) else None,
                )
            )
        return cls(ed25519=tuple(keys))

    @classmethod
    def from_keyring(cls, keyring: Keyring, source: str = SOURCE_SERVER_KEY_REGISTRY) -> TrustAnchors:
        """Every key of the server keyring, active and retired."""
        return cls.from_registry_entries(keyring.registry_entries(), source)

    @classmethod
    def from_registry_body(cls, body: Any, source: str = SOURCE_KEY_REGISTRY_FILE) -> TrustAnchors:
        """From a key registry body ``{keys: [...]}`` (dict, JSON text or bytes) or a bare list."""
        if isinstance(body, (str, bytes, bytearray)):
            try:
                body = parse_strict(body)
            except CanonicalJSONError as exc:
                raise TrustAnchorError(f"key registry is not valid JSON: {exc.message}") from exc
        if isinstance(body, Mapping):
            body = body.get("keys")
        if not isinstance(body, list):
            raise TrustAnchorError("key registry must be an object with a 'keys' array")
        return cls.from_registry_entries(body, source)

    @classmethod
    def from_public_key_pem(cls, pem: str, key_id: str | None = None,
                            source: str = SOURCE_PUBLIC_KEY_PEM) -> TrustAnchors:
        """An operator-supplied PEM (matched by fingerprint, or by `key_id` when given)."""
        return cls(ed25519=(TrustedEd25519Key.from_pem(pem, key_id=key_id, source=source),))

    @classmethod
    def from_hmac_secret(cls, secret: bytes | str, key_id: str | None = None,
                         source: str = SOURCE_HMAC_SECRET) -> TrustAnchors:
        """An HMAC secret; without `key_id` it applies to any record key id."""
        if isinstance(secret, str):
            secret = secret.encode("utf-8")
        if not secret:
            raise TrustAnchorError("HMAC secret must not be empty")
        return cls(hmac=(TrustedHmacSecret(key_id, bytes(secret), source),))

    @classmethod
    def from_hmac_key(cls, key: HmacKey, source: str = SOURCE_HMAC_SECRET) -> TrustAnchors:
        return cls(hmac=(TrustedHmacSecret(key.key_id, key.secret, source),))

    # ---- selection

    def select_ed25519(self, key_id: Any, fingerprint: Any) -> TrustedEd25519Key | None:
        """By key id first (preferring a key whose fingerprint also matches), then by fingerprint.

        Both come from untrusted JSON: only a non-empty string selects (a list must not raise)."""
        if isinstance(key_id, str) and key_id:
            matches = [k for k in self.ed25519 if k.key_id == key_id]
            if matches:
                for key in matches:
                    if isinstance(fingerprint, str) and fingerprint in key.fingerprints:
                        return key
                return matches[0]
        if isinstance(fingerprint, str) and fingerprint:
            for key in self.ed25519:
                if fingerprint in key.fingerprints:
                    return key
        return None

    def select_hmac(self, key_id: Any) -> TrustedHmacSecret | None:
        """By key id; else the one secret supplied without a key id."""
        if isinstance(key_id, str) and key_id:
            for secret in self.hmac:
                if secret.key_id == key_id:
                    return secret
        wildcards = [s for s in self.hmac if s.key_id is None]
        return wildcards[0] if len(wildcards) == 1 else None
