"""A remote gate for `gate plan --gate URL` and `gate apply --gate URL` (docs/policy-as-code.md).

It speaks the gate's HTTP API as one scope's caller: `Authorization: Bearer $GATE_ID_TOKEN` (a CI
workload-identity token, the principal `ci:<repository>@<ref>`) with `x-gate-scope: <scope>` when
that is set, else `x-api-key: $GATE_API_KEY`. The gate never
discloses a rulebook's body (spec "Registries and patterns"), only the version and hash a scope
runs; so the body the plan compares with is the one in this repository's git history of the file
whose hash is that running hash (`gate init-policies` or an earlier apply committed it). A running
version found in no commit is refused: the plan would not know what it compares with.

The dataset the plan replays is trusted by public keys only (`receipt_keys`): the gate's published
key registry, `GET /api/decision/receipt-keys`, of which only the keys whose fingerprints the
caller pins (`--key-fingerprint`) are trusted; a pin the registry does not publish is refused.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import CodedError, GateError, Signal
from gate.protocol.canonical import CanonicalJSONError, parse_strict, sha256_hex
from gate.releases.model import ReleaseStateJSON
from gate.rulebook import RulebookDocument, checked_rulebook
from gate.strict_json import JsonValue
from gate_cli.policy_repo import PolicyFile, PolicyLayoutInvalid, Running

if TYPE_CHECKING:
    from gate.keys.anchors import TrustAnchors

__all__ = ["GateUnreachable", "RemoteGate"]

TIMEOUT_SECONDS = 30
MAX_COMMITS = 200  # of one file's history searched for the running version's body
RATE_RETRIES, MAX_WAIT_SECONDS = 3, 60


class GateUnreachable(CodedError):
    """The remote gate did not answer with its JSON (a transport failure, or not a gate)."""

    CODE = "POLICY_GATE_UNREACHABLE"


class _RateLimited(Signal):
    """A 429 with a Retry-After to wait: a turn of `_call`, never raised out of it."""

    def __init__(self, wait: float) -> None:
        super().__init__(wait)
        self.wait = wait


def _retry_after(header: str | None) -> float | None:
    """The seconds a 429 asks to wait, when it says and they are at most MAX_WAIT_SECONDS."""
    try:
        seconds = float(header) if header is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds <= MAX_WAIT_SECONDS else None


class RemoteGate:
    """One scope of a remote gate (the credential's), asked by reference."""

    def __init__(self, url: str, root: Path, scope: str) -> None:
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise PolicyLayoutInvalid(f"--gate {url}: an http(s) URL of a gate")
        self.base, self.root, self.scope = url.rstrip("/"), root, scope
        self._states: dict[str, ReleaseStateJSON | None] = {}
        token, key = os.environ.get("GATE_ID_TOKEN"), os.environ.get("GATE_API_KEY")
        if token:
            # A CI token names no scope of its own: the scope it acts in is stated (docs/ci-principal.md).
            self.headers = {"authorization": f"Bearer {token}", "x-gate-scope": scope}
        elif key:
            self.headers = {"x-api-key": key}
        else:
            raise PolicyLayoutInvalid("--gate needs a credential: GATE_ID_TOKEN (a CI token) or GATE_API_KEY")

    def _call(self, method: str, path: str, body: Any = None, missing: str | None = None) -> Any:
        """The answer's JSON; None for a 404 of code `missing`; the gate's refusal as a GateError. A
        429 is waited out as its Retry-After says (at most MAX_WAIT_SECONDS, RATE_RETRIES times): a CI
        caller's budget is small, and a plan of many rulebooks reads a release state for each."""
        for _attempt in range(RATE_RETRIES):
            try:
                return self._once(method, path, body, missing, may_wait=True)
            except _RateLimited as limited:
                time.sleep(limited.wait)
        return self._once(method, path, body, missing, may_wait=False)

    def _once(self, method: str, path: str, body: Any, missing: str | None, *, may_wait: bool) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        # SECURITY: the scheme was checked to be http(s) in __init__: never file: or another opener.
        request = urllib.request.Request(self.base + path, data=data, method=method,  # noqa: S310
                                         headers={**self.headers, "content-type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as answer:  # noqa: S310 (http(s) only)
                return json.loads(answer.read())
        except urllib.error.HTTPError as error:
            try:
                refusal = json.loads(error.read())
            except ValueError:
                raise GateUnreachable(f"{self.base}{path}: HTTP {error.code} without the gate's error body") from None
            if error.code == 404 and missing is not None and refusal.get("error") == missing:
                return None
            wait = _retry_after(error.headers.get("Retry-After"))
            if error.code == 429 and wait is not None and may_wait:
                raise _RateLimited(wait) from None
            raise GateError(str(refusal.get("error", "UNEXPECTED_RESPONSE")),
                            str(refusal.get("message", f"HTTP {error.code}"))) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise GateUnreachable(f"{self.base}{path}: {exc}") from None

    def scopes(self) -> frozenset[str]:
        return frozenset({self.scope})

    def receipt_keys(self, pins: list[str]) -> TrustAnchors:
        """The gate's published public keys whose fingerprints are `pins` (sha256 hex of the
        canonical PEM, `public_key_fingerprint` in the registry): only those are trusted, so a
        gate address that answers with other keys vouches for nothing. PolicyLayoutInvalid for a
        pin the registry does not publish or a registry that cannot be read."""
        from gate.keys.anchors import SOURCE_KEY_REGISTRY_URL, TrustAnchorError, TrustAnchors

        try:
            published = TrustAnchors.from_registry_body(self._call("GET", "/api/decision/receipt-keys"),
                                                        SOURCE_KEY_REGISTRY_URL)
        except TrustAnchorError as exc:
            raise PolicyLayoutInvalid(f"{self.base}/api/decision/receipt-keys: {exc.message}") from None
        wanted = {pin.strip().lower() for pin in pins}
        kept = tuple(key for key in published.ed25519 if key.fingerprint in wanted)
        missing = sorted(wanted - {key.fingerprint for key in kept})
        if missing:
            raise PolicyLayoutInvalid(f"--key-fingerprint {missing[0]}: the gate's key registry "
                                      f"({self.base}/api/decision/receipt-keys) publishes no key of that fingerprint")
        return TrustAnchors(ed25519=kept)

    def state(self, scope: str, rulebook_id: str) -> ReleaseStateJSON | None:
        """The release state, read once per rulebook until this gate publishes or moves it."""
        if rulebook_id not in self._states:
            self._states[rulebook_id] = self._state(rulebook_id)
        return self._states[rulebook_id]

    def _state(self, rulebook_id: str) -> ReleaseStateJSON | None:
        status = self._call("GET", f"/api/decision/rulebooks/{urllib.parse.quote(rulebook_id, safe='')}/release",
                            missing="RULEBOOK_NOT_FOUND")
        return status["state"] if status is not None else None

    def published_hash(self, scope: str, rulebook_id: str, version: str) -> str | None:
        query = urllib.parse.urlencode({"rulebook_id": rulebook_id, "version": version})
        found = self._call("GET", f"/api/decision/rulebooks?{query}", missing="RULEBOOK_NOT_FOUND")
        return str(found["rulebook"]["hash"]) if found is not None else None  # the registry entry's `hash`

    def running(self, scope: str, rulebook_id: str, file: PolicyFile) -> Running | None:
        """The active release version's body, found in the git history of `file` by its hash. Where
        the rulebook has no active release, the file itself when the scope has its version with its
        content (what callers send inline; the gate names no newest version), else None."""
        state = self.state(scope, rulebook_id)
        active = state.get("active") if state is not None else None
        if active is None:
            if self.published_hash(scope, rulebook_id, file.version) == file.rulebook_hash:
                return file.rulebook, f"version {file.version}, registered in the scope (no release)"
            return None
        if active["rulebook_hash"] == file.rulebook_hash:
            return file.rulebook, f"active release {active['version']}"
        for commit, body in _history(file.path):
            if sha256_hex(body) == active["rulebook_hash"]:
                return checked_rulebook(body), f"active release {active['version']} (its body from commit {commit[:12]})"
        raise PolicyLayoutInvalid(f"{file.path}: the scope runs version {active['version']!r} (sha256 "
                                  f"{active['rulebook_hash'][:16]}…), which no commit of this file holds: commit it "
                                  "first (gate init-policies on the gate's host writes it)")

    def publish(self, scope: str, rulebook: RulebookDocument) -> bool:
        self._states.pop(rulebook["rulebook_id"], None)
        return bool(self._call("POST", "/api/decision/rulebooks", rulebook)["created"])

    def act(self, scope: str, rulebook_id: str, body: dict[str, JsonValue]) -> dict[str, JsonValue]:
        self._states.pop(rulebook_id, None)
        answer = self._call("POST", f"/api/decision/rulebooks/{urllib.parse.quote(rulebook_id, safe='')}/release", body)
        event: dict[str, JsonValue] = answer["event"]
        return event

    def close(self) -> None:
        return None


def _history(path: Path) -> list[tuple[str, object]]:
    """(commit, the file's JSON there) for the file's last MAX_COMMITS commits, newest first."""
    folder, name = path.parent, path.name
    program = shutil.which("git")
    if program is None:
        raise PolicyLayoutInvalid("--gate reads the running version's body from git history: git is not installed")

    def git(*args: str) -> str:
        # git itself, on this file's folder; a commit id and a path are arguments, never a shell's
        done = subprocess.run([program, "-C", str(folder), *args], check=False,  # noqa: S603
                              capture_output=True, text=True, timeout=60)
        return done.stdout if done.returncode == 0 else ""

    found = []
    for commit in git("log", f"-{MAX_COMMITS}", "--format=%H", "--", name).split():
        try:
            found.append((commit, parse_strict(git("show", f"{commit}:./{name}").encode())))
        except CanonicalJSONError:
            continue
    return found
