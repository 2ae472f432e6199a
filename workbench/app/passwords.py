"""The workbench's password file: scrypt hashes, never passwords.

The file is a JSON object `{"user": "scrypt$n$r$p$salt$hash"}`: each value names its KDF and
parameters, then the 16-byte random salt and the 32-byte derived key, both base64 (standard
alphabet, no padding). New hashes use scrypt with n = 2**15, r = 8, p = 1 (32 MiB of memory and
about 0.1 s of one core per check), so an offline guess costs as much as a sign-in does.

SECURITY: a value that is not such a hash (a plaintext password, as Panel's basic auth file
held) is refused when the file is read, with the command that replaces it by a hash; the
password itself is never echoed. Checking a password compares the derived key with
`hmac.compare_digest`, and a user who is not in the file is checked against a dummy hash of the
same parameters, so the time of an answer does not tell whether the user exists.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gate.errors import CodedError
from gate.strict_json import JsonValue

SCHEME = "scrypt"
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
SALT_BYTES, KEY_BYTES = 16, 32
MAX_PASSWORD_CHARS = 1024
MAX_USER_CHARS = 200
# Bounds on what a stored hash may ask for, so a crafted file cannot make a check unbounded.
_N_RANGE, _R_RANGE, _P_RANGE = (2**10, 2**20), (1, 32), (1, 16)
CONVERT_COMMAND = "gate workbench-passwd FILE --convert"


class PasswordFileError(CodedError):
    """The password file is unusable; the message says what to fix (and never holds a password)."""

    CODE = "WORKBENCH_PASSWORDS_INVALID"


@dataclass(frozen=True)
class ScryptHash:
    """One decoded `scrypt$n$r$p$salt$hash` value."""

    n: int
    r: int
    p: int
    salt: bytes
    key: bytes

    def encode(self) -> str:
        b64 = [base64.b64encode(part).decode("ascii").rstrip("=") for part in (self.salt, self.key)]
        return "$".join([SCHEME, str(self.n), str(self.r), str(self.p), *b64])

    def derive(self, password: str) -> bytes:
        return hashlib.scrypt(password.encode("utf-8"), salt=self.salt, n=self.n, r=self.r, p=self.p,
                              maxmem=129 * self.n * self.r * self.p + (1 << 20), dklen=len(self.key))

    def matches(self, password: str) -> bool:
        return hmac.compare_digest(self.derive(password), self.key)


def _b64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def parse_hash(value: object) -> ScryptHash | None:
    """The hash `value` encodes, or None if it is not a well-formed scrypt hash within bounds."""
    if not isinstance(value, str):
        return None
    parts = value.split("$")
    if len(parts) != 6 or parts[0] != SCHEME or not all(part.isascii() and part.isdigit() for part in parts[1:4]):
        return None
    n, r, p = (int(part) for part in parts[1:4])
    try:
        salt, key = _b64(parts[4]), _b64(parts[5])
    except (binascii.Error, ValueError):
        return None
    in_range = _N_RANGE[0] <= n <= _N_RANGE[1] and n & (n - 1) == 0 and _R_RANGE[0] <= r <= _R_RANGE[1] \
        and _P_RANGE[0] <= p <= _P_RANGE[1]
    if not in_range or len(salt) < SALT_BYTES or len(key) < 16:
        return None
    return ScryptHash(n, r, p, salt, key)


def hash_password(password: str) -> str:
    """A new `scrypt$…` value for `password` with a fresh random salt."""
    check_password(password)
    empty = ScryptHash(SCRYPT_N, SCRYPT_R, SCRYPT_P, secrets.token_bytes(SALT_BYTES), b"\0" * KEY_BYTES)
    return ScryptHash(empty.n, empty.r, empty.p, empty.salt, empty.derive(password)).encode()


def check_password(password: str) -> None:
    """Refuse a password that cannot be stored (empty, too long, or with a control character)."""
    if not password or len(password) > MAX_PASSWORD_CHARS or not password.isprintable():
        raise PasswordFileError(f"a password is 1 to {MAX_PASSWORD_CHARS} printable characters")


def check_user(user: str) -> None:
    if not user or len(user) > MAX_USER_CHARS or not user.isprintable() or user != user.strip():
        raise PasswordFileError(f"a user name is 1 to {MAX_USER_CHARS} printable characters, "
                                "without leading or trailing spaces")


def read_raw(path: Path) -> dict[str, JsonValue]:
    """The JSON object in `path` as it is (a missing file is an empty object)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise PasswordFileError(f"password file {path} is not readable JSON: {exc}") from None
    if not isinstance(data, dict):
        raise PasswordFileError(f"password file {path} must be a JSON object")
    return data


def load_hashes(path: Path) -> dict[str, ScryptHash]:
    """Every user's hash; refuses a missing or empty file and any value that is not a hash."""
    if not path.exists():
        raise PasswordFileError(f"password file {path} does not exist")
    data = read_raw(path)
    if not data:
        raise PasswordFileError(f"password file {path} must be a non-empty JSON object")
    hashes: dict[str, ScryptHash] = {}
    for user, value in data.items():
        parsed = parse_hash(value)
        if parsed is None:
            # SECURITY: never serve with a plaintext (or unknown) entry; never echo the value.
            raise PasswordFileError(
                f"password file {path}: the entry of {user!r} is not a scrypt hash (a plaintext password?); "
                f"replace plaintext entries by hashes with `{CONVERT_COMMAND}`, or set one user's "
                "password with `gate workbench-passwd FILE USER`")
        hashes[user] = parsed
    return hashes


def write_file(path: Path, data: dict[str, JsonValue]) -> None:
    """Replace `path` atomically by `data`, readable by the owner only (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, sort_keys=True)
            out.write("\n")
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def set_password(path: Path, user: str, password: str) -> bool:
    """Store a new hash of `password` for `user`; True if the user was already in the file."""
    check_user(user)
    data = read_raw(path)
    existed = user in data
    data[user] = hash_password(password)
    write_file(path, data)
    return existed


def convert_plaintext(path: Path) -> list[str]:
    """Replace every entry that is not a hash by the hash of its (plaintext) value; the users
    converted. Refuses (changing nothing) if a plaintext value is not a storable password."""
    data = read_raw(path)
    if not data:
        raise PasswordFileError(f"password file {path} does not exist or is empty")
    plain = {user: value for user, value in data.items() if parse_hash(value) is None}
    for user, value in plain.items():
        if not isinstance(value, str) or value.startswith(SCHEME + "$"):
            # A damaged or out-of-bounds hash is not a password: never hash it as one.
            raise PasswordFileError(f"password file {path}: the entry of {user!r} is neither a usable "
                                    "scrypt hash nor a password; set it with `gate workbench-passwd FILE USER`")
        try:
            check_user(user)
            check_password(value)
        except PasswordFileError as exc:
            raise PasswordFileError(f"password file {path}, entry {user!r}: {exc}") from None
    write_file(path, data | {user: hash_password(str(value)) for user, value in plain.items()})
    return sorted(plain)


class PasswordCheck:
    """Checks sign-ins against the password file, re-read when it changes on disk.

    SECURITY: fail closed: when the file changes into something unusable, every sign-in fails
    until it is fixed. An unknown user costs the same scrypt run as a known one."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp = self._stat()
        self._hashes = load_hashes(path)
        # A random key: no password derives it, and checking one costs a full scrypt run.
        self._dummy = ScryptHash(SCRYPT_N, SCRYPT_R, SCRYPT_P, secrets.token_bytes(SALT_BYTES),
                                 secrets.token_bytes(KEY_BYTES))

    def _stat(self) -> tuple[int, int, int] | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino)

    def _current(self) -> dict[str, ScryptHash]:
        stamp = self._stat()
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._hashes = load_hashes(self.path)
            except PasswordFileError:
                self._hashes = {}
        return self._hashes

    def verify(self, user: str, password: str) -> bool:
        """True only for a user in the file with this password; one scrypt run either way."""
        stored = self._current().get(user)
        matched = (stored or self._dummy).matches(password[:MAX_PASSWORD_CHARS])
        return stored is not None and matched and len(password) <= MAX_PASSWORD_CHARS
