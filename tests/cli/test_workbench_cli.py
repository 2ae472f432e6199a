"""`gate workbench` as a subprocess: its access policy is decided before it serves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.browser.conftest import wait_for
from tests.server.support import free_port
from workbench.app.passwords import hash_password

GATE = str(Path(sys.executable).parent / "gate")
pytestmark = pytest.mark.slow


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATE_")}
    env["GATE_HOME"] = str(home)
    return env


def test_a_non_loopback_address_without_authentication_is_refused(tmp_path):
    done = subprocess.run([GATE, "workbench", "--host", "0.0.0.0", "--port", str(free_port())],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "refusing to serve the workbench on 0.0.0.0 without authentication" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "gate.db").exists()  # refused before touching anything


def test_authentication_without_grants_is_refused(tmp_path):
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"ana": hash_password("correct horse battery staple")}))
    done = subprocess.run([GATE, "workbench", "--host", "0.0.0.0", "--basic-auth", str(users)],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "--grants" in done.stderr


@pytest.mark.parametrize("extra, message", [
    (["--oidc-issuer", "http://127.0.0.1:9/"], "--oidc-issuer needs --oidc-client-id"),
    (["--oidc-client-id", "wb"], "need --oidc-issuer"),
    (["--oidc-issuer", "http://127.0.0.1:9", "--oidc-client-id", "wb", "--oidc-scopes", "profile"],
     "must include openid"),
    (["--oidc-issuer", "http://127.0.0.1:9", "--oidc-client-id", "wb", "--oidc-client-secret-file", "absent"],
     "--oidc-client-secret-file absent"),
    (["--oidc-issuer", "http://id.example", "--oidc-client-id", "wb", "--grants", "GRANTS"],
     "must be https (http only on loopback)"),
    (["--oidc-issuer", "http://127.0.0.1:9", "--oidc-client-id", "wb", "--grants", "GRANTS"],
     "cannot read the discovery document http://127.0.0.1:9/.well-known/openid-configuration"),
    (["--oidc-issuer", "http://127.0.0.1:9", "--oidc-client-id", "wb", "--basic-auth", "USERS", "--grants", "GRANTS"],
     "either --basic-auth or --oidc-issuer"),
    (["--oidc-issuer", "http://127.0.0.1:9", "--oidc-client-id", "wb"], "sign-in needs --grants FILE"),
    # a provider's generated id may begin with "-" (oidc-provider's nanoid): given with "=", it parses
    (["--oidc-issuer", "http://127.0.0.1:9", "--oidc-client-id=-wb"], "sign-in needs --grants FILE"),
])
def test_unusable_openid_connect_settings_are_refused_in_one_line(tmp_path, extra, message):
    users, grants = tmp_path / "users.json", tmp_path / "grants.json"
    users.write_text(json.dumps({"ana": hash_password("correct horse battery staple")}))
    grants.write_text(json.dumps({"groups": {"gate-viewers": {"*": ["viewer"]}}}))
    extra = [{"USERS": str(users), "GRANTS": str(grants)}.get(item, item) for item in extra]
    done = subprocess.run([GATE, "workbench", "--host", "0.0.0.0", "--port", str(free_port()), *extra],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "gate.db").exists()  # refused before touching anything


def test_with_authentication_a_visitor_must_sign_in(tmp_path):
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"ana": hash_password("correct horse battery staple")}))
    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"ana": ["acme"]}))
    port = free_port()
    log = tmp_path / "workbench.log"
    # Bound to all interfaces (that is what requires sign-in), probed over loopback only.
    with open(log, "w") as out:  # the workbench writes to its own copy of the file
        process = subprocess.Popen([GATE, "workbench", "--host", "0.0.0.0", "--port", str(port), "--basic-auth",
                                    str(users), "--grants", str(grants)], env=_env(tmp_path),
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(f"http://127.0.0.1:{port}/login", process, log)

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args, **kwargs):
                return None

        opener = urllib.request.build_opener(NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as answer:
            opener.open(f"http://127.0.0.1:{port}/workbench", timeout=30)
        assert answer.value.code in (302, 303)
        assert "/login" in answer.value.headers["Location"]
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.parametrize("host, message", [
    # Issue 18: `[::1]` passed the loopback check, then the server raised a traceback.
    ("[::1]", "cannot serve under an IPv6 address; use 127.0.0.1 or localhost"),
    ("::1", "cannot serve under an IPv6 address; use 127.0.0.1 or localhost"),
    ("[::ffff:127.0.0.1]", "cannot serve under an IPv6 address"),
    ("[::1", "is neither a host name nor an IP address"),
    ("::1::2", "is neither a host name nor an IP address"),
    ("[]", "--host must not be empty"),
])
def test_a_malformed_host_is_one_line_and_exit_2(tmp_path, host, message):
    done = subprocess.run([GATE, "workbench", "--host", host, "--port", str(free_port())],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "gate.db").exists()


def test_an_address_that_is_not_this_machines_is_one_line_and_exit_2(tmp_path):
    # 192.0.2.1 is TEST-NET-1 (documentation only), never this machine's: binding fails.
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"ana": hash_password("correct horse battery staple")}))
    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"ana": ["acme"]}))
    done = subprocess.run([GATE, "workbench", "--host", "192.0.2.1", "--port", str(free_port()),
                           "--basic-auth", str(users), "--grants", str(grants)],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "cannot listen on 192.0.2.1:" in done.stderr and "Traceback" not in done.stderr


def test_a_refused_configuration_is_refused_before_panel_loads(tmp_path):
    """The refusals above come before the workbench's server modules load: Panel (0.7 s of a
    start) is imported only once a sign-in provider is to be asked, and after every check of the
    command line (a refusal took 1.3 s, now 0.2 s)."""
    probe = ("import sys; from gate_cli.main import main; status = main(['workbench', '--host', '::1']); "
             "print(status, 'panel' in sys.modules, 'bokeh' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], env=_env(tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert done.stdout.split() == ["2", "False", "False"], (done.stdout, done.stderr[-2000:])
    assert "cannot serve under an IPv6 address" in done.stderr
