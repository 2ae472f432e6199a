"""Issue 55, "Done when": a temporary git repository driven through the whole path against a served
gate whose CI issuer is the tests' OpenID Connect provider. Init from the live gate, edit a rulebook,
commit, plan (Markdown and JSON, exit 3, the figures `gate dry-run` reports), apply as the CI
principal under require_approval (a pending request, the active version unchanged), approval by a
person signed in through the provider (the workbench's relying party and Releases state), the
version active, and `gate verify` of the release history naming the CI principal and the person."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from gate_cli.main import main
from tests.client.live_gate import LiveGate
from tests.demo_support import GATE, gate_env
from tests.oidc_support import ci_grant, oidc_provider, password, pkce, provider_sign_in  # noqa: F401  # the session fixture
from tests.server.support import free_port

SCOPE = "globex-saas"
RULEBOOK = "pricing_exception"
AUDIENCE = "https://gate.test/ci"
REPO, MAIN = "acme/policies", "refs/heads/main"
CI_MAIN = f"ci:{REPO}@{MAIN}"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A small demo ledger (`gate demo seed`) with a signing keyring."""
    home = tmp_path_factory.mktemp("policy-ci-home")
    env = gate_env(home)
    subprocess.run([GATE, "keys", "signing-init"], env=env, check=True, capture_output=True, timeout=120)
    subprocess.run([GATE, "demo", "seed", "--decisions", "60", "--seed", "7"], env=env, check=True,
                   capture_output=True, timeout=600)
    return home


@pytest.fixture
def in_process(home, monkeypatch):
    for name in [n for n in os.environ if n.startswith("GATE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GATE_HOME", str(home))
    monkeypatch.setenv("GATE_OUTBOUND_ALLOW_HOSTS", "127.0.0.1,localhost")  # the tests' provider on loopback
    return lambda *argv: main(list(argv))


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo, check=True,
                   capture_output=True)


def state_of(in_process, capsys) -> dict:
    capsys.readouterr()
    assert in_process("release", "status", "--scope", SCOPE, "--rulebook-id", RULEBOOK, "--json") == 0
    return json.loads(capsys.readouterr().out)["state"]


def signed_in(provider, user: str):
    """`user` signed in through the provider by the workbench's relying party (discovery, the code
    flow with PKCE, the ID token's checks): the workbench identity."""
    from workbench.app.oidc import OIDCClient, discover
    from workbench.app.oidc_settings import OIDCSettings

    redirect = f"http://127.0.0.1:{free_port()}/login"
    client_id, client_secret = provider.register(redirect)
    settings = OIDCSettings(provider.issuer, client_id, client_secret, "groups", ("openid", "profile", "groups"))
    discovery = discover(settings)
    verifier, challenge = pkce()
    nonce = secrets.token_urlsafe(16)
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect, "scope": "openid profile groups",
             "state": "s", "nonce": nonce, "code_challenge": challenge, "code_challenge_method": "S256"}
    with httpx.Client(timeout=30) as browser:
        back = provider_sign_in(browser, f"{discovery.authorization_endpoint}?{urllib.parse.urlencode(query)}",
                                user, password(user), redirect)
    relying = OIDCClient(settings, discovery, frozenset({"gate-approvers"}))

    async def flow():
        return relying.identity(await relying.verify(await relying.exchange(back.params["code"], redirect, verifier),
                                                     nonce))

    with ThreadPoolExecutor(max_workers=1) as pool:  # an event loop of its own, whatever ran before
        return pool.submit(asyncio.run, flow()).result(timeout=120)


def test_a_ci_principal_applies_and_a_signed_in_person_approves(home, tmp_path, in_process, capsys, monkeypatch,
                                                                 oidc_provider):  # noqa: F811
    from gate.grants import load_grants
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from workbench.app.access import Rights
    from workbench.app.state.releases import ReleasesState
    from workbench.app.store import WorkbenchStore

    assert in_process("release", "policy", "--scope", SCOPE, "--dry-run-max-age", "31536000",
                      "--require-approval") == 0
    assert in_process("export", "--out", str(tmp_path / "dataset"), "--scope", SCOPE) == 0
    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"groups": {"gate-approvers": {"*": ["approver"]}},
                                  "ci": {f"{REPO}@{MAIN}": ci_grant(REPO, {SCOPE: ["author", "releaser"]})}}))
    served = LiveGate(home, env={"GATE_CI_ISSUER": oidc_provider.issuer, "GATE_CI_AUDIENCE": AUDIENCE,
                                 "GATE_GRANTS_FILE": str(grants)}).start()
    try:
        repo = tmp_path / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        assert in_process("init-policies", str(repo / "policies"), "--scope", SCOPE) == 0
        path = repo / "policies" / SCOPE / f"{RULEBOOK}.json"
        git(repo, "add", ".")
        git(repo, "commit", "-qm", "policies as the gate runs them")
        running = state_of(in_process, capsys)["active"]
        book = json.loads(path.read_text())
        book["version"] = "2026-12-01"
        book["rules"] = book["rules"][1:]  # drop the first rule
        path.write_text(json.dumps(book, indent=2))
        git(repo, "commit", "-qam", "drop a rule")

        # The CI job: its token from the provider, plan and apply in the repository (in this process).
        token = oidc_provider.ci_token(REPO, MAIN, AUDIENCE)
        monkeypatch.setenv("GATE_ID_TOKEN", token)
        monkeypatch.chdir(repo)
        remote = ["--dir", "policies", "--scope", SCOPE, "--gate", served.base, "--dataset", str(tmp_path / "dataset")]
        capsys.readouterr()
        assert in_process("plan", *remote, "--out", str(tmp_path / "plan")) == 3  # something changes
        markdown = capsys.readouterr().out
        assert "pricing\\_exception" in markdown and "Signed manifest" in markdown, markdown
        [change] = json.loads((tmp_path / "plan" / "plan.json").read_text())["changes"]  # what --format json prints
        assert (change["scope"], change["rulebook_id"], change["to_version"]) == (SCOPE, RULEBOOK, "2026-12-01")
        assert in_process("dry-run", "--rulebook-id", RULEBOOK, "--draft", str(path), "--scope", SCOPE,
                          "--dataset", str(tmp_path / "dataset"), "--out", str(tmp_path / "dry"), "--json") == 0
        assert json.loads(capsys.readouterr().out)["decisions_changed"] == change["decisions_changed"]

        capsys.readouterr()
        assert in_process("apply", *remote, "--format", "json", "--out", str(tmp_path / "apply")) == 3
        [change] = json.loads(capsys.readouterr().out)["changes"]
        assert change["applied"]["result"] == "requested", change
        state = state_of(in_process, capsys)
        assert state["active"] == running  # unchanged until a person approves
        [pending] = state["pending"]
        assert pending["version"] == "2026-12-01" and pending["requested_by"] == CI_MAIN

        # Bob signs in through the provider; the workbench's Releases state approves as him.
        identity = signed_in(oidc_provider, "bob")
        access = load_grants(grants)
        store = WorkbenchStore(Ledger(f"sqlite:///{home / 'gate.db'}"),
                               SigningSetup.load(home / "signing-keys.json", None, "hmac"), tmp_path / "wb-dataset")
        try:
            releases = ReleasesState(store, Rights(identity, lambda scope: access.roles(identity, scope)), scope=SCOPE,
                                     rulebook_id=RULEBOOK)
            releases.approve(pending["request_seq"])  # the page asks first (issue 56) ...
            releases.confirm()  # ... and Bob confirms
        finally:
            store.ledger.dispose()
        assert state_of(in_process, capsys)["active"]["version"] == "2026-12-01"

        request = urllib.request.Request(f"{served.base}/api/decision/rulebooks/{RULEBOOK}/release/history",
                                         headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=30) as answer:  # loopback http
            (tmp_path / "history.json").write_bytes(answer.read())
        with urllib.request.urlopen(f"{served.base}/api/decision/receipt-keys", timeout=30) as answer:
            (tmp_path / "keys.json").write_bytes(answer.read())
    finally:
        served.stop()
    capsys.readouterr()
    assert in_process("verify", str(tmp_path / "history.json"), "--key-registry", str(tmp_path / "keys.json")) == 0
    verified = capsys.readouterr().out
    person = f"person:{oidc_provider.issuer}#bob"
    assert f"activate 2026-12-01 by {CI_MAIN} (ci)" in verified, verified
    assert f"approve 2026-12-01 by {person} (person)" in verified, verified


def _no_private_key_under(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            assert b"PRIVATE KEY" not in text and b'"private_key' not in text, path


def test_the_ci_plan_runs_from_a_home_with_no_private_key(home, tmp_path, in_process, oidc_provider):  # noqa: F811
    """Issue 63, defect 7: the CI path of docs/policy-as-code.md (`gate plan --gate URL --dataset D`)
    from a home holding no key at all: the dataset's signature verifies with the gate's published
    key registry pinned by fingerprint (`--key-fingerprint`), or a saved one (`--key-registry`);
    without either it is refused, and a pin the gate does not publish is refused."""
    from tests.client.live_gate import clean_env

    assert in_process("export", "--out", str(tmp_path / "dataset"), "--scope", SCOPE) == 0
    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"ci": {f"{REPO}@{MAIN}": ci_grant(REPO, {SCOPE: ["author", "releaser"]})}}))
    served = LiveGate(home, env={"GATE_CI_ISSUER": oidc_provider.issuer, "GATE_CI_AUDIENCE": AUDIENCE,
                                 "GATE_GRANTS_FILE": str(grants)}).start()
    try:
        repo = tmp_path / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        assert in_process("init-policies", str(repo / "policies"), "--scope", SCOPE) == 0
        git(repo, "add", ".")
        git(repo, "commit", "-qm", "policies as the gate runs them")
        path = repo / "policies" / SCOPE / f"{RULEBOOK}.json"
        book = json.loads(path.read_text())
        book["version"], book["rules"] = "2026-12-09", book["rules"][1:]
        path.write_text(json.dumps(book, indent=2))
        git(repo, "commit", "-qam", "drop a rule")
        with urllib.request.urlopen(f"{served.base}/api/decision/receipt-keys", timeout=30) as answer:
            registry = json.loads(answer.read())
        (tmp_path / "receipt-keys.json").write_text(json.dumps(registry))
        [active] = [key for key in registry["keys"] if key["status"] == "active"]

        empty = tmp_path / "ci-home"  # the CI runner: HOME and GATE_HOME hold nothing, no key at all
        empty.mkdir()
        env = clean_env(HOME=str(empty), GATE_HOME=str(empty / "gate"), GATE_REQUIRE_SIGNING="false",
                        GATE_ID_TOKEN=oidc_provider.ci_token(REPO, MAIN, AUDIENCE))

        def plan(*trust: str) -> subprocess.CompletedProcess:
            return subprocess.run([GATE, "plan", "--dir", "policies", "--scope", SCOPE, "--gate", served.base,
                                   "--dataset", str(tmp_path / "dataset"), "--format", "json", *trust],
                                  cwd=repo, env=env, capture_output=True, text=True, timeout=600)

        for trust in (["--key-fingerprint", active["public_key_fingerprint"]],
                      ["--key-registry", str(tmp_path / "receipt-keys.json")]):
            done = plan(*trust, "--out", str(tmp_path / f"plan-{trust[0][6:]}"))
            assert done.returncode == 3, done.stdout + done.stderr  # something changes
            [change] = json.loads(done.stdout)["changes"]
            assert (change["rulebook_id"], change["to_version"]) == (RULEBOOK, "2026-12-09"), change
            manifest = json.loads((tmp_path / f"plan-{trust[0][6:]}" / SCOPE / RULEBOOK / "migration.json").read_text())
            source = manifest["dry_run"]["source"]
            assert source["dataset_key_id"] == active["key_id"], source  # its signature verified
        untrusted = plan("--out", str(tmp_path / "plan-none"))
        assert untrusted.returncode == 2 and "DATASET_INVALID" in untrusted.stderr, untrusted.stderr
        assert "no trusted Ed25519 key" in untrusted.stderr, untrusted.stderr
        wrong = plan("--key-fingerprint", "0" * 64, "--out", str(tmp_path / "plan-wrong"))
        assert wrong.returncode == 2, wrong.stderr
        assert f"POLICY_LAYOUT_INVALID: --key-fingerprint {'0' * 64}: the gate's key registry" in wrong.stderr
        report = subprocess.run([GATE, "report", "effectiveness", "--policy", RULEBOOK, "--dataset",
                                 str(tmp_path / "dataset"), "--key-registry", str(tmp_path / "receipt-keys.json"),
                                 "--json"], cwd=repo, env=env, capture_output=True, text=True, timeout=600)
        assert report.returncode == 0, report.stderr
        assert json.loads(report.stdout)["source"]["key_id"] == active["key_id"]
    finally:
        served.stop()
    _no_private_key_under(empty)
