"""Keys and signatures: Ed25519 (PyNaCl), HMAC-SHA256, PEM text, the signing keyring.

Wire formats (reference facts §4, §5):

* Public key PEM: the SubjectPublicKeyInfo DER of an Ed25519 key is the 12-byte prefix
  ``302a300506032b6570032100`` followed by the 32 raw key bytes; it is base64-encoded, wrapped
  at 64 characters and framed as ``-----BEGIN PUBLIC KEY-----`` / ``-----END PUBLIC KEY-----``
  with ``\\n`` line ends and *no* trailing newline. This trimmed text is the one canonical form
  we emit anywhere, because ``public_key_fingerprint`` is the sha256 hex of exactly this text.
* Private key PEM: PKCS#8, DER prefix ``302e020100300506032b657004220420`` + 32-byte seed,
  framed as ``-----BEGIN PRIVATE KEY-----``.
* Parsers accept literal two-character ``\\n`` sequences (as found in environment variables
  and JSON-escaped configs) and surrounding whitespace; they reject anything else that is not
  exactly an Ed25519 key.
* Receipt signature payload = canonical bytes of ``{decision_id, key_id, receipt_hash,
  record_hash}``; Ed25519 → ``"ed25519:" + base64url(signature)`` without padding; HMAC →
  ``"hmac-sha256:" + hex(HMAC-SHA256(secret, payload))``.
* Attestation signatures (rulebook and registry attestations) are Ed25519 over the UTF-8 bytes
  of a 64-character hex hash text, base64url without padding, no prefix.

The keyring file holds the server's Ed25519 keys: one active key (with its private key) and the
retired keys (public halves only) so that records signed before a rotation keep verifying.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, NotRequired, TypedDict

import nacl.exceptions
import nacl.signing

from gate.errors import CodedError
from gate.strict_json import JsonValue
from gate.vocabulary import SIG_ED25519, SIG_HMAC_SHA256

StrPath = str | os.PathLike[str]

__all__ = [
    "ED25519_PKCS8_PREFIX",
    "ED25519_SPKI_PREFIX",
    "KEYRING_VERSION",
    "Ed25519Key",
    "Ed25519ReceiptSigner",
    "HmacKey",
    "HmacReceiptSigner",
    "KeyMaterialError",
    "Keyring",
    "KeyringEntry",
    "KeyringError",
    "KeyringFile",
    "PrivateKeyEntry",
    "PublicKeyEntry",
    "ReceiptSigner",
    "b64url_decode",
    "b64url_encode",
    "canonical_public_key_pem",
    "ed25519_verify",
    "generate_keyring",
    "iso_timestamp",
    "key_id_for_fingerprint",
    "load_keyring",
    "normalize_pem_text",
    "private_key_pem_from_seed",
    "public_key_fingerprint",
    "public_key_pem_from_raw",
    "raw_public_key_from_pem",
    "receipt_signer_for",
    "rotate_keyring",
    "seed_from_private_key_pem",
    "write_keyring",
]

# File format label of the signing keyring (not part of any hash; local to this module).
KEYRING_VERSION = "gate_signing_keyring_v1"

ED25519_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
ED25519_PKCS8_PREFIX = bytes.fromhex("302e020100300506032b657004220420")

_PUBLIC_LABEL = "PUBLIC KEY"
_PRIVATE_LABEL = "PRIVATE KEY"
_KEY_ID_PREFIX = "ed25519-"
_STATUS_ACTIVE = "active"
_STATUS_RETIRED = "retired"


class KeyMaterialError(CodedError):
    """Key text that is not exactly an Ed25519 key in the accepted PEM form."""

    CODE = "SIGNING_KEY_INVALID"


class KeyringError(CodedError):
    """The keyring file is missing, unreadable, corrupt or inconsistent (never read as empty)."""

    CODE = "SIGNING_KEYRING_INVALID"

    def __init__(self, message: str, path: StrPath | None = None) -> None:
        super().__init__(message, path=str(path) if path else None)


# --------------------------------------------------------------------------- base64url


def b64url_encode(data: bytes) -> str:
    """base64url (RFC 4648 §5) without `=` padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


_B64URL_RE = re.compile(r"^[A-Za-z0-9_-]*$")


def b64url_decode(text: str) -> bytes:
    """Strict inverse of `b64url_encode`: padding-free alphabet only, canonical trailing bits.

    A text that decodes but would not be re-encoded to itself (non-zero unused trailing bits,
    `=` padding, `+`/`/`) is rejected, so no two signature strings are accepted for one value.
    Raises ValueError.
    """
    if not isinstance(text, str) or not _B64URL_RE.fullmatch(text) or len(text) % 4 == 1:
        raise ValueError("not unpadded base64url text")
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:  # pragma: no cover - regex guards most cases
        raise ValueError("not unpadded base64url text") from exc
    if b64url_encode(data) != text:
        raise ValueError("non-canonical base64url text")
    return data


# --------------------------------------------------------------------------- PEM


def normalize_pem_text(text: str) -> str:
    """What verifiers do to key text before anything else: literal ``\\n`` → newline, trim."""
    if not isinstance(text, str):
        raise KeyMaterialError("key text must be a string")
    return text.replace("\\r\\n", "\n").replace("\\n", "\n").strip()


def _pem_encode(label: str, der: bytes) -> str:
    body = base64.b64encode(der).decode("ascii")
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"])


def _pem_decode(text: str, label: str) -> bytes:
    normalized = normalize_pem_text(text)
    lines = [line.strip() for line in normalized.replace("\r\n", "\n").split("\n")]
    lines = [line for line in lines if line]
    begin, end = f"-----BEGIN {label}-----", f"-----END {label}-----"
    if len(lines) < 3 or lines[0] != begin or lines[-1] != end:
        raise KeyMaterialError(f"expected a PEM block framed by '{begin}' and '{end}'")
    body = "".join(lines[1:-1])
    if not re.fullmatch(r"[A-Za-z0-9+/]+={0,2}", body):
        raise KeyMaterialError("PEM body is not base64")
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise KeyMaterialError("PEM body is not valid base64") from exc


def public_key_pem_from_raw(raw: bytes) -> str:
    """Canonical SubjectPublicKeyInfo PEM of a raw 32-byte Ed25519 public key."""
    if not isinstance(raw, (bytes, bytearray)) or len(raw) != 32:
        raise KeyMaterialError("an Ed25519 public key is exactly 32 bytes")
    return _pem_encode(_PUBLIC_LABEL, ED25519_SPKI_PREFIX + bytes(raw))


def raw_public_key_from_pem(text: str) -> bytes:
    """The 32 raw key bytes of an Ed25519 SubjectPublicKeyInfo PEM (tolerant framing)."""
    der = _pem_decode(text, _PUBLIC_LABEL)
    if len(der) != 44 or not der.startswith(ED25519_SPKI_PREFIX):
        raise KeyMaterialError("PEM is not an Ed25519 SubjectPublicKeyInfo")
    return der[len(ED25519_SPKI_PREFIX) :]


def canonical_public_key_pem(text: str) -> str:
    """Re-encode any accepted public key PEM text in the one canonical form."""
    return public_key_pem_from_raw(raw_public_key_from_pem(text))


def private_key_pem_from_seed(seed: bytes) -> str:
    """PKCS#8 PEM of a 32-byte Ed25519 seed."""
    if not isinstance(seed, (bytes, bytearray)) or len(seed) != 32:
        raise KeyMaterialError("an Ed25519 seed is exactly 32 bytes")
    return _pem_encode(_PRIVATE_LABEL, ED25519_PKCS8_PREFIX + bytes(seed))


def seed_from_private_key_pem(text: str) -> bytes:
    """The 32-byte seed of an Ed25519 PKCS#8 PEM (tolerant framing)."""
    der = _pem_decode(text, _PRIVATE_LABEL)
    if len(der) != 48 or not der.startswith(ED25519_PKCS8_PREFIX):
        raise KeyMaterialError("PEM is not an Ed25519 PKCS#8 private key")
    return der[len(ED25519_PKCS8_PREFIX) :]


def public_key_fingerprint(pem: str) -> str:
    """sha256 hex of the trimmed PEM text (after literal ``\\n`` → newline).

    The fingerprint is over the text as given, not over the key bytes, so it only matches
    across systems when the canonical PEM form (`public_key_pem_from_raw`) is used everywhere.
    """
    return hashlib.sha256(normalize_pem_text(pem).encode("utf-8")).hexdigest()


def key_id_for_fingerprint(fingerprint: str) -> str:
    """Our key id format: ``ed25519-`` + the first 16 hex characters of the fingerprint."""
    return _KEY_ID_PREFIX + fingerprint[:16]


def ed25519_verify(public_raw: bytes, message: bytes, signature: bytes) -> bool:
    """True when `signature` is a valid Ed25519 signature of `message`; never raises."""
    try:
        nacl.signing.VerifyKey(bytes(public_raw)).verify(bytes(message), bytes(signature))
        return True
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, ValueError, TypeError):
        return False


def iso_timestamp(now: datetime | str) -> str:
    """ISO 8601 UTC with milliseconds and `Z` (``2026-05-21T00:00:00.000Z``); strings pass through."""
    if isinstance(now, str):
        text = now.strip()
        if not text:
            raise ValueError("timestamp must not be empty")
        return text
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    now = now.astimezone(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


# --------------------------------------------------------------------------- keys


class _DerivedKey(NamedTuple):
    """What an `Ed25519Key` derives from its seed once: the signing key and the public key forms."""

    signing_key: nacl.signing.SigningKey
    public_key_raw: bytes
    public_key_pem: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class Ed25519Key:
    """An Ed25519 signing key: `key_id` plus the 32-byte `seed` (the private key)."""

    key_id: str
    seed: bytes = field(repr=False)
    _cache: _DerivedKey | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.seed, (bytes, bytearray)) or len(self.seed) != 32:
            raise KeyMaterialError("an Ed25519 seed is exactly 32 bytes")
        if not isinstance(self.key_id, str) or not self.key_id.strip():
            raise KeyMaterialError("key_id must be a non-empty string")
        object.__setattr__(self, "seed", bytes(self.seed))

    @classmethod
    def generate(cls) -> Ed25519Key:
        return cls.from_seed(os.urandom(32))

    @classmethod
    def from_seed(cls, seed: bytes, key_id: str | None = None) -> Ed25519Key:
        """Key from a seed; `key_id` defaults to ``ed25519-`` + 16 hex of the fingerprint."""
        raw = bytes(nacl.signing.SigningKey(bytes(seed)).verify_key)
        fingerprint = public_key_fingerprint(public_key_pem_from_raw(raw))
        return cls(key_id or key_id_for_fingerprint(fingerprint), seed)

    @classmethod
    def from_private_key_pem(cls, pem: str, key_id: str | None = None) -> Ed25519Key:
        return cls.from_seed(seed_from_private_key_pem(pem), key_id)

    @property
    def _signing_key(self) -> nacl.signing.SigningKey:
        # Derived once per key object: deriving the key pair costs as much as a signature.
        return self._derived().signing_key

    def _derived(self) -> _DerivedKey:
        derived = self._cache
        if derived is None:
            signing_key = nacl.signing.SigningKey(self.seed)
            raw = bytes(signing_key.verify_key)
            pem = public_key_pem_from_raw(raw)
            derived = _DerivedKey(signing_key, raw, pem, public_key_fingerprint(pem))
            object.__setattr__(self, "_cache", derived)
        return derived

    @property
    def public_key_raw(self) -> bytes:
        return self._derived().public_key_raw

    @property
    def public_key_pem(self) -> str:
        return self._derived().public_key_pem

    @property
    def private_key_pem(self) -> str:
        return private_key_pem_from_seed(self.seed)

    @property
    def fingerprint(self) -> str:
        return self._derived().fingerprint

    def sign(self, message: bytes) -> bytes:
        """The 64-byte detached Ed25519 signature of `message`."""
        return self._signing_key.sign(bytes(message)).signature


@dataclass(frozen=True, slots=True)
class HmacKey:
    """A shared HMAC-SHA256 secret with its `key_id`; str secrets are taken as UTF-8."""

    key_id: str
    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        secret = self.secret
        if isinstance(secret, str):
            secret = secret.encode("utf-8")
        if not isinstance(secret, (bytes, bytearray)) or not secret:
            raise KeyMaterialError("an HMAC secret must be non-empty bytes")
        if not isinstance(self.key_id, str) or not self.key_id.strip():
            raise KeyMaterialError("key_id must be a non-empty string")
        object.__setattr__(self, "secret", bytes(secret))

    def digest_hex(self, message: bytes) -> str:
        return hmac.new(self.secret, bytes(message), hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------- receipt signer


class ReceiptSigner:
    """Signs Decision Record receipts. Subclasses: `Ed25519ReceiptSigner`, `HmacReceiptSigner`."""

    algorithm: str
    key_id: str
    public_key_fingerprint: str | None

    def sign_payload(self, payload: bytes) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def sign_attestation_hash(self, hex_text: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError


class Ed25519ReceiptSigner(ReceiptSigner):
    algorithm = SIG_ED25519

    def __init__(self, key: Ed25519Key) -> None:
        self.key = key
        self.key_id = key.key_id
        self.public_key_fingerprint = key.fingerprint
        self.public_key_pem = key.public_key_pem

    def sign_payload(self, payload: bytes) -> str:
        return f"{SIG_ED25519}:" + b64url_encode(self.key.sign(payload))

    def sign_attestation_hash(self, hex_text: str) -> str:
        """base64url (no padding) Ed25519 signature over the UTF-8 bytes of `hex_text`."""
        return b64url_encode(self.key.sign(hex_text.encode("utf-8")))

    def __repr__(self) -> str:
        return f"Ed25519ReceiptSigner(key_id={self.key_id!r})"


class HmacReceiptSigner(ReceiptSigner):
    algorithm = SIG_HMAC_SHA256
    public_key_fingerprint = None

    def __init__(self, key: HmacKey) -> None:
        self.key = key
        self.key_id = key.key_id

    def sign_payload(self, payload: bytes) -> str:
        return f"{SIG_HMAC_SHA256}:" + self.key.digest_hex(payload)

    def sign_attestation_hash(self, hex_text: str) -> str:
        raise TypeError("attestations are signed with Ed25519 only; HMAC cannot sign them")

    def __repr__(self) -> str:
        return f"HmacReceiptSigner(key_id={self.key_id!r})"


def receipt_signer_for(key: Ed25519Key | HmacKey | None) -> ReceiptSigner | None:
    """The signer for a key (None → None)."""
    if key is None:
        return None
    if isinstance(key, Ed25519Key):
        return Ed25519ReceiptSigner(key)
    if isinstance(key, HmacKey):
        return HmacReceiptSigner(key)
    raise TypeError(f"no receipt signer for {type(key).__name__}")


# --------------------------------------------------------------------------- keyring


class PublicKeyEntry(TypedDict):
    """A key as the public receipt key registry lists it (no private material); `not_after` only
    on a retired key."""

    key_id: str
    algorithm: str
    public_key: str
    public_key_fingerprint: str
    status: str
    not_before: str
    not_after: NotRequired[str]


class PrivateKeyEntry(PublicKeyEntry):
    """A key as the keyring file holds it: the active key's private key PEM beside its public parts."""

    private_key: NotRequired[str]


class KeyringFile(TypedDict):
    """The keyring file's document (`write_keyring`)."""

    keyring_version: str
    keys: list[PrivateKeyEntry]


@dataclass(frozen=True, slots=True)
class KeyringEntry:
    """One key of the keyring. `private_key` is set only for the active key."""

    key_id: str
    status: str
    public_key: str
    public_key_fingerprint: str
    not_before: str
    not_after: str | None = None
    private_key: Ed25519Key | None = field(default=None, repr=False)
    algorithm: str = SIG_ED25519

    def public_dict(self) -> PublicKeyEntry:
        return self._members()

    def file_dict(self) -> PrivateKeyEntry:
        entry = self._members()
        if self.private_key is not None:
            entry["private_key"] = self.private_key.private_key_pem
        return entry

    def _members(self) -> PrivateKeyEntry:
        """The public members, in the registry's order; `file_dict` adds the private key after them."""
        entry: PrivateKeyEntry = {
            "key_id": self.key_id,
            "algorithm": self.algorithm,
            "public_key": self.public_key,
            "public_key_fingerprint": self.public_key_fingerprint,
            "status": self.status,
            "not_before": self.not_before,
        }
        if self.not_after is not None:
            entry["not_after"] = self.not_after
        return entry


@dataclass(frozen=True, slots=True)
class Keyring:
    """Active key first, then retired keys (newest first)."""

    entries: tuple[KeyringEntry, ...]

    @property
    def active(self) -> Ed25519Key | None:
        for entry in self.entries:
            if entry.status == _STATUS_ACTIVE:
                return entry.private_key
        return None

    def registry_entries(self) -> list[PublicKeyEntry]:
        """Public registry dicts, active first (no private material)."""
        ordered = sorted(self.entries, key=lambda e: 0 if e.status == _STATUS_ACTIVE else 1)
        return [entry.public_dict() for entry in ordered]

    def find_public(self, key_id: str | None = None, fingerprint: str | None = None) -> PublicKeyEntry | None:
        """The public entry for `key_id`, else for `fingerprint`; None when neither matches."""
        if key_id:
            for entry in self.entries:
                if entry.key_id == key_id:
                    return entry.public_dict()
        if fingerprint:
            for entry in self.entries:
                if entry.public_key_fingerprint == fingerprint:
                    return entry.public_dict()
        return None

    def to_json_dict(self) -> KeyringFile:
        return {"keyring_version": KEYRING_VERSION, "keys": [e.file_dict() for e in self.entries]}


def _new_active_entry(now: str) -> KeyringEntry:
    key = Ed25519Key.generate()
    return KeyringEntry(
        key_id=key.key_id,
        status=_STATUS_ACTIVE,
        public_key=key.public_key_pem,
        public_key_fingerprint=key.fingerprint,
        not_before=now,
        private_key=key,
    )


def write_keyring(path: StrPath, keyring: Keyring) -> None:
    """Write atomically (temp file in the same directory, fsync, `os.replace`) with mode 0600."""
    target = Path(path)
    directory = target.parent if str(target.parent) else Path(".")
    directory.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(keyring.to_json_dict(), indent=2, sort_keys=False) + "\n").encode("utf-8")
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    os.chmod(target, 0o600)
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(dir_fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(dir_fd)


def generate_keyring(path: StrPath, now: datetime | str, *, overwrite: bool = False) -> Keyring:
    """Create a keyring file with one new active key. Refuses to overwrite unless asked."""
    if Path(path).exists() and not overwrite:
        raise KeyringError("keyring file already exists; refusing to overwrite keys", path)
    keyring = Keyring((_new_active_entry(iso_timestamp(now)),))
    write_keyring(path, keyring)
    return keyring


def _retired(entry: KeyringEntry, stamp: str) -> KeyringEntry:
    """The entry retired at `stamp`: public parts kept, private key dropped."""
    return KeyringEntry(
        key_id=entry.key_id,
        status=_STATUS_RETIRED,
        public_key=entry.public_key,
        public_key_fingerprint=entry.public_key_fingerprint,
        not_before=entry.not_before,
        not_after=stamp,
        private_key=None,
    )


def rotate_keyring(path: StrPath, now: datetime | str) -> Keyring:
    """New active key; the old active key becomes retired (not_after=now, private key dropped)."""
    stamp = iso_timestamp(now)
    current = load_keyring(path)
    retired = [_retired(entry, stamp) if entry.status == _STATUS_ACTIVE else entry for entry in current.entries]
    fresh = _new_active_entry(stamp)
    while any(e.key_id == fresh.key_id for e in retired):  # pragma: no cover - 2^-64 chance
        fresh = _new_active_entry(stamp)
    retired_sorted = [e for e in retired if e.status != _STATUS_ACTIVE]
    keyring = Keyring((fresh, *retired_sorted))
    write_keyring(path, keyring)
    return keyring


def _require_str(entry: Mapping[str, JsonValue], name: str, index: int, path: StrPath | None) -> str:
    value = entry.get(name)
    if not isinstance(value, str) or not value.strip():
        raise KeyringError(f"keys[{index}].{name} must be a non-empty string", path)
    return value


def _parse_entry(entry: Any, index: int, path: StrPath | None) -> KeyringEntry:
    if not isinstance(entry, dict):
        raise KeyringError(f"keys[{index}] must be an object", path)
    known = {"key_id", "algorithm", "status", "private_key", "public_key",
             "public_key_fingerprint", "not_before", "not_after"}
    unknown = sorted(set(entry) - known)
    if unknown:
        raise KeyringError(f"keys[{index}] has unknown members {unknown}", path)
    key_id = _require_str(entry, "key_id", index, path)
    if entry.get("algorithm") != SIG_ED25519:
        raise KeyringError(f"keys[{index}].algorithm must be 'ed25519'", path)
    status = entry.get("status")
    if status not in (_STATUS_ACTIVE, _STATUS_RETIRED):
        raise KeyringError(f"keys[{index}].status must be 'active' or 'retired'", path)
    public_text = _require_str(entry, "public_key", index, path)
    try:
        public_pem = canonical_public_key_pem(public_text)
    except KeyMaterialError as exc:
        raise KeyringError(f"keys[{index}].public_key: {exc.message}", path) from exc
    fingerprint = public_key_fingerprint(public_pem)
    if entry.get("public_key_fingerprint") != fingerprint:
        raise KeyringError(f"keys[{index}].public_key_fingerprint does not match its public key", path)
    not_before = _require_str(entry, "not_before", index, path)
    not_after = entry.get("not_after")
    private: Ed25519Key | None = None
    if status == _STATUS_ACTIVE:
        if not_after is not None:
            raise KeyringError(f"keys[{index}]: an active key has no not_after", path)
        private_text = _require_str(entry, "private_key", index, path)
        try:
            private = Ed25519Key.from_private_key_pem(private_text, key_id)
        except KeyMaterialError as exc:
            raise KeyringError(f"keys[{index}].private_key: {exc.message}", path) from exc
        if private.public_key_pem != public_pem:
            raise KeyringError(f"keys[{index}].private_key does not match its public key", path)
    else:
        if "private_key" in entry:
            raise KeyringError(f"keys[{index}]: a retired key must not keep its private key", path)
        if not isinstance(not_after, str) or not not_after.strip():
            raise KeyringError(f"keys[{index}].not_after is required for a retired key", path)
    return KeyringEntry(key_id, status, public_pem, fingerprint, not_before, not_after, private)


def load_keyring(path: StrPath) -> Keyring:
    """Read and validate a keyring file. Raises `KeyringError`; never returns an empty keyring."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise KeyringError("keyring file not found", path) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyringError(f"keyring file cannot be read: {exc}", path) from exc
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KeyringError(f"keyring file is not JSON: {exc.msg}", path) from exc
    if not isinstance(body, dict) or body.get("keyring_version") != KEYRING_VERSION:
        raise KeyringError(f"keyring_version must be {KEYRING_VERSION!r}", path)
    keys = body.get("keys")
    if not isinstance(keys, list) or not keys:
        raise KeyringError("keyring has no keys", path)
    entries = tuple(_parse_entry(entry, i, path) for i, entry in enumerate(keys))
    ids = [e.key_id for e in entries]
    if len(set(ids)) != len(ids):
        raise KeyringError("keyring has duplicate key ids", path)
    if sum(1 for e in entries if e.status == _STATUS_ACTIVE) > 1:
        raise KeyringError("keyring has more than one active key", path)
    return Keyring(entries)

