"""The OpenID Connect provider the workbench's sign-in tests run against: the `oidc-provider`
package on Node (tests/support/oidc/provider.mjs), installed with `npm ci` from its lock file and
started on a free loopback port for the test session.

Its people: alice (Alice Author, group gate-authors), bob (Bob Approver, gate-approvers) and
carol (Carol Viewer, gate-viewers); each password is `<name>-password`. A test registers a
client for its own redirect URI (`register`, RFC 7591 dynamic registration). It is also the CI
issuer of the CI-principal tests (`ci_token`, docs/ci-principal.md)."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.server.support import free_port

ROOT = Path(__file__).resolve().parents[1]
PROVIDER_DIR = ROOT / "tests" / "support" / "oidc"
PEOPLE = {"alice": ("Alice Author", "gate-authors"), "bob": ("Bob Approver", "gate-approvers"),
          "carol": ("Carol Viewer", "gate-viewers")}


def password(name: str) -> str:
    return f"{name}-password"


def install() -> None:
    """`npm ci` in tests/support/oidc once (several test processes may ask at the same time)."""
    with open(PROVIDER_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = PROVIDER_DIR / "node_modules" / ".package-lock.json"
        lock_file = PROVIDER_DIR / "package-lock.json"
        if marker.exists() and marker.stat().st_mtime >= lock_file.stat().st_mtime:
            return
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--prefix", str(PROVIDER_DIR)],
                       check=True, capture_output=True, timeout=600)


def provider_sign_in(client: httpx.Client, url: str, user: str, secret: str, stop: str) -> httpx.URL:
    """Follow the provider's redirects from `url`, answering its login form as `user`, until a
    redirect leaves for `stop` (the relying party's redirect URI); that URL. Raises on a 4xx."""
    response = client.get(url)
    for _ in range(12):
        location = response.headers.get("location")
        if location is not None:
            target = response.url.join(location)
            if str(target).startswith(stop):
                return target
            response = client.get(target)
            continue
        if response.status_code >= 400:
            raise AssertionError(f"{response.status_code}: {response.text[:300]}")
        form = response.url.join(response.text.split('action="', 1)[1].split('"', 1)[0])
        response = client.post(form, data={"login": user, "password": secret})
    raise AssertionError("the provider never sent the browser back")


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


@dataclass
class Provider:
    issuer: str
    process: subprocess.Popen

    def register(self, redirect_uri: str, auth_method: str = "client_secret_basic") -> tuple[str, str | None]:
        """A new client for `redirect_uri`: (client_id, client_secret or None for a public client).
        Its post-logout redirect URI is the workbench's `/logout` beside it (RP-initiated logout)."""
        logout = redirect_uri.rsplit("/", 1)[0] + "/logout"
        body = {"redirect_uris": [redirect_uri], "grant_types": ["authorization_code"], "response_types": ["code"],
                "token_endpoint_auth_method": auth_method, "post_logout_redirect_uris": [logout]}
        request = urllib.request.Request(f"{self.issuer}/reg", data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:  # loopback http
            client = json.loads(response.read())
        return client["client_id"], client.get("client_secret")

    def ci_token(self, repository: str, ref: str, audience: str, sha: str = "0" * 40, *,
                 ids: tuple[str, str] | None = None, event: str = "push", workflow: str | None = None,
                 lifetime: int | None = None) -> str:
        """A signed JWT access token shaped like a GitHub Actions OIDC token (iss, aud, sub
        `repo:<repository>:ref:<ref>`, repository, ref, sha, repository_id and repository_owner_id
        (`ids`, by default `ci_ids(repository)`), event_name, job_workflow_ref, exp in 10 minutes or
        `lifetime` seconds after iat): a client registered for that run asks for it with client
        credentials and the audience as its resource indicator (RFC 8707)."""
        repository_id, owner_id = ids or ci_ids(repository)
        body = {"grant_types": ["client_credentials"], "response_types": [], "redirect_uris": [],
                "token_endpoint_auth_method": "client_secret_post", "ci_repository": repository, "ci_ref": ref,
                "ci_sha": sha, "ci_repository_id": repository_id, "ci_owner_id": owner_id, "ci_event": event,
                "ci_workflow": workflow or f"{repository}/.github/workflows/policy.yml@{ref}"}
        if lifetime is not None:
            body["ci_lifetime"] = str(lifetime)
        request = urllib.request.Request(f"{self.issuer}/reg", data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:  # loopback http
            client = json.loads(response.read())
        form = urllib.parse.urlencode({"grant_type": "client_credentials", "resource": audience,
                                       "client_id": client["client_id"], "client_secret": client["client_secret"]})
        request = urllib.request.Request(f"{self.issuer}/token", data=form.encode(), method="POST",
                                         headers={"Content-Type": "application/x-www-form-urlencoded"})
        with urllib.request.urlopen(request, timeout=30) as response:  # loopback http
            return str(json.loads(response.read())["access_token"])


def ci_ids(repository: str) -> tuple[str, str]:
    """The repository id and owner id the tests' issuer states for `repository` by default (stable
    digits of the names), as a grants file's `ci` entry must name them."""
    owner = repository.partition("/")[0]
    return str(zlib.crc32(repository.encode())), str(zlib.crc32(owner.encode()))


def ci_grant(repository: str, scopes: dict[str, list[str]]) -> dict[str, object]:
    """A grants file's `ci` entry for `repository` with its default ids (`ci_ids`)."""
    repository_id, owner_id = ci_ids(repository)
    return {"repository_id": repository_id, "owner_id": owner_id, "scopes": scopes}


def start(log: Path) -> Provider:
    port = free_port()
    out = open(log, "w")  # noqa: SIM115  # the provider's output, kept for the test's report
    process = subprocess.Popen(["node", str(PROVIDER_DIR / "provider.mjs")],
                               env={**os.environ, "OIDC_PORT": str(port)}, stdout=out, stderr=subprocess.STDOUT,
                               start_new_session=True)
    issuer = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the OIDC provider exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{issuer}/.well-known/openid-configuration", timeout=5):
                return Provider(issuer, process)
        except OSError:
            time.sleep(0.2)
    process.terminate()
    raise AssertionError(f"the OIDC provider did not answer at {issuer}:\n{log.read_text()}")


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory):
    """The provider for the session (skipped, saying why, only where node or npm is missing)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node and npm are needed for the OpenID Connect provider (apt-get install nodejs npm)")
    install()
    provider = start(tmp_path_factory.mktemp("oidc") / "provider.log")
    yield provider
    provider.process.terminate()
    try:
        provider.process.wait(10)
    except subprocess.TimeoutExpired:
        provider.process.kill()
