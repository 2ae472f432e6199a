"""The gate's signing configuration: which key signs receipts and attestations, and which keys
verify them.

- Ed25519 (default): the keyring file's active key signs receipts, rulebook attestations and
  registry attestations; retired keys stay in the registry so old records keep verifying.
- HMAC (alternative): with a secret from the environment, receipts are signed with
  HMAC-SHA256; attestations are still Ed25519-signed when a keyring is present, else "unsigned".
- When `required` and no receipt key is usable, `decide` answers 503 and stores nothing.

`LiveSigning` follows the keyring file while the server runs: every worker picks up a keyring
written by `gate keys signing-init` or `signing-rotate` within a bounded interval, with no restart.
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from gate.keys.anchors import TrustAnchors
from gate.keys.signing import (
    Ed25519Key,
    HmacKey,
    Keyring,
    KeyringError,
    PublicKeyEntry,
    ReceiptSigner,
    load_keyring,
    receipt_signer_for,
)

log = logging.getLogger("gate.keys.signing")

FIX_MISSING_KEYRING = ("run `gate keys signing-init` (same GATE_HOME / GATE_SIGNING_KEY_FILE as the server), "
                       "or set GATE_RECEIPT_HMAC_SECRET; a running server picks the keyring up without a restart")
FIX_BROKEN_KEYRING = ("restore the keyring file from its backup, or replace it with `gate keys signing-init --force` "
                      "(records signed by the replaced keys then no longer verify against this gate)")


@dataclass(frozen=True)
class SigningSetup:
    keyring: Keyring | None
    hmac_key: HmacKey | None
    required: bool = True
    problem: str | None = None  # why the keyring could not be loaded, for /status
    fix: str | None = None  # the command or step that resolves `problem`, for /status and `serve`

    @classmethod
    def load(cls, keyring_path: Path | None, hmac_secret: bytes | None, hmac_key_id: str,
             required: bool = True) -> SigningSetup:
        keyring, problem, fix = None, None, None
        if keyring_path is not None and Path(keyring_path).exists():
            try:
                keyring = load_keyring(keyring_path)
            except KeyringError as exc:
                problem = f"signing keyring {keyring_path} is unusable: {exc.message}"
                fix = FIX_BROKEN_KEYRING
        elif keyring_path is not None:
            problem = f"signing keyring {keyring_path} does not exist"
            fix = FIX_MISSING_KEYRING
        hmac_key = HmacKey(hmac_key_id, hmac_secret) if hmac_secret else None
        return cls(keyring=keyring, hmac_key=hmac_key, required=required, problem=problem, fix=fix)

    def attestation_key(self) -> Ed25519Key | None:
        return self.keyring.active if self.keyring else None

    def receipt_signer(self) -> ReceiptSigner | None:
        if self.hmac_key is not None:
            return receipt_signer_for(self.hmac_key)
        return receipt_signer_for(self.attestation_key())

    def ready(self) -> bool:
        return self.receipt_signer() is not None or not self.required

    def registry_entries(self) -> list[PublicKeyEntry]:
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


FileIdentity = tuple[int, int, int, int, int] | None


def file_identity(path: Path) -> FileIdentity:
    """What changes when the keyring file is replaced or rewritten: device, inode, size, mtime
    and ctime (`write_keyring` replaces the file atomically, so a rotation is a new inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class LiveSigning:
    """A `SigningSetup` that follows its keyring file, with the same methods and attributes.

    At most once per `check_interval` seconds (per process) it stats the keyring file; when the
    file's identity changed it loads it again. The cost on the decide path is one monotonic clock
    read per request; the stat and the parse happen only on the interval and on a change.

    Rules (docs/operating.md "Signing keys"):
    - A keyring that loads replaces the current one: a rotation's new active key signs from then
      on, and its retired keys (the old active key among them) keep verifying older records.
    - SECURITY: a keyring that is missing or does not load never replaces a working one: the
      worker keeps signing with the keys it holds and logs the problem (fail closed stays: a
      worker without any usable key answers 503 until a good keyring appears).
    - `pin()` fixes the setup for the current request (a context variable), so one decide signs
      its receipt and its attestations with keys of the same keyring.
    """

    def __init__(self, keyring_path: Path | None, hmac_secret: bytes | None, hmac_key_id: str,
                 required: bool = True, *, check_interval: float = 1.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._path = Path(keyring_path) if keyring_path is not None else None
        self._hmac = (hmac_secret, hmac_key_id)
        self._required = required
        self._interval = check_interval
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._identity = file_identity(self._path) if self._path else None
        self._setup = self._load()
        self._next_check = monotonic() + check_interval
        self._pinned: contextvars.ContextVar[SigningSetup | None] = contextvars.ContextVar(
            f"gate_signing_{id(self)}", default=None)

    def _load(self) -> SigningSetup:
        return SigningSetup.load(self._path, self._hmac[0], self._hmac[1], self._required)

    # ------------------------------------------------------------------ following the file

    def current(self) -> SigningSetup:
        """The setup pinned for this request, else the newest one (checking the file when due)."""
        pinned = self._pinned.get()
        if pinned is not None:
            return pinned
        if self._interval > 0 and self._monotonic() >= self._next_check:
            self.check()
        return self._setup

    def check(self) -> bool:
        """Stat the keyring file now; reload it when its identity changed. True if it switched."""
        if self._path is None or not self._lock.acquire(blocking=False):
            return False  # another thread of this worker is checking right now
        try:
            self._next_check = self._monotonic() + self._interval
            identity = file_identity(self._path)
            if identity == self._identity:
                return False
            self._identity = identity  # stat before load: a change during the load is seen next time
            fresh = self._load()
            if fresh.keyring is None and self._setup.keyring is not None:
                log.warning("signing keyring changed but is not usable (%s); still signing with key %s",
                            fresh.problem, self._setup.keyring.active.key_id if self._setup.keyring.active else None)
                return False
            self._setup = fresh
            if fresh.keyring is not None and fresh.keyring.active is not None:
                log.info("signing keyring reloaded; active key %s", fresh.keyring.active.key_id)
            return True
        finally:
            self._lock.release()

    def pin(self) -> contextvars.Token[SigningSetup | None]:
        return self._pinned.set(self.current())

    def unpin(self, token: contextvars.Token[SigningSetup | None]) -> None:
        try:
            self._pinned.reset(token)
        except ValueError:  # reset from another context: clear this one's pin instead
            self._pinned.set(None)

    # ------------------------------------------------------------------ SigningSetup's interface

    @property
    def keyring(self) -> Keyring | None:
        return self.current().keyring

    @property
    def hmac_key(self) -> HmacKey | None:
        return self.current().hmac_key

    @property
    def required(self) -> bool:
        return self._required

    @property
    def problem(self) -> str | None:
        return self.current().problem

    @property
    def fix(self) -> str | None:
        return self.current().fix

    @property
    def anchors(self) -> TrustAnchors:
        return self.current().anchors

    def attestation_key(self) -> Ed25519Key | None:
        return self.current().attestation_key()

    def receipt_signer(self) -> ReceiptSigner | None:
        return self.current().receipt_signer()

    def ready(self) -> bool:
        return self.current().ready()

    def registry_entries(self) -> list[PublicKeyEntry]:
        return self.current().registry_entries()

    def trust_anchors(self) -> TrustAnchors:
        return self.current().trust_anchors()
