"""Workbench sign-in (issue 18, item 5) through the real interfaces: `gate workbench-passwd` and
`gate workbench` as subprocesses, the login form over HTTP from several loopback addresses.

The password file holds scrypt hashes only; a plaintext file is refused at startup with the
command that converts it; wrong passwords are throttled per user at an address and per client
address, and slowed per user for addresses that have failed; no flood locks a user out (issue 41)."""

from __future__ import annotations

import http.client
import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.browser.conftest import wait_for
from tests.server.support import free_port
from tests.workbench.signin_support import post_sign_in

GATE = str(Path(sys.executable).parent / "gate")
PASSWORD = "correct horse battery staple"
USERS = ("ana", "bo", "cy", "dee", "eve")
pytestmark = pytest.mark.slow


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATE_")}
    env["GATE_HOME"] = str(home)
    return env


def passwd(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([GATE, "workbench-passwd", *args], check=False, input=stdin, env=_env(home),
                          capture_output=True, text=True, timeout=120)


def start_workbench(home: Path, users: Path, grants: Path) -> tuple[subprocess.Popen, int, Path]:
    port, log = free_port(), home / "workbench.log"
    with open(log, "w") as out:  # the child keeps its own descriptor
        process = subprocess.Popen([GATE, "workbench", "--host", "0.0.0.0", "--port", str(port), "--basic-auth",
                                    str(users), "--grants", str(grants)], env=_env(home),
                                   stdout=out, stderr=subprocess.STDOUT)
    return process, port, log


def sign_in(port: int, user: str, password: str, source: str = "127.0.0.1") -> http.client.HTTPResponse:
    """POST the login form from `source` (any 127.0.0.0/8 address reaches the server)."""
    return post_sign_in(port, user, password, source)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("signin")
    users = home / "users.json"
    for user in USERS:
        assert passwd(home, str(users), user, stdin=PASSWORD + "\n").returncode == 0
    grants = home / "grants.json"
    grants.write_text(json.dumps({user: ["acme"] for user in USERS}))
    process, port, log = start_workbench(home, users, grants)
    try:
        wait_for(f"http://127.0.0.1:{port}/login", process, log)
        yield port
    finally:
        process.terminate()
        process.wait(10)


# --------------------------------------------------------------------------- the password file


def test_passwd_stores_a_scrypt_hash_and_never_the_password(tmp_path):
    users = tmp_path / "users.json"
    done = passwd(tmp_path, str(users), "ana", stdin=PASSWORD + "\n")
    assert done.returncode == 0, done.stderr
    assert "'ana' set" in done.stdout and PASSWORD not in done.stdout + done.stderr
    text = users.read_text()
    assert PASSWORD not in text and "correct" not in text
    stored = json.loads(text)["ana"]
    assert re.fullmatch(r"scrypt\$32768\$8\$1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}", stored)
    assert stat.S_IMODE(users.stat().st_mode) == 0o600
    again = passwd(tmp_path, str(users), "ana", stdin=PASSWORD + "\n")
    assert "'ana' changed" in again.stdout
    assert json.loads(users.read_text())["ana"] != stored  # a fresh salt each time


@pytest.mark.parametrize("args, stdin, message", [
    (["ana", PASSWORD], "", "unrecognized arguments"),  # never a password on the command line
    (["ana"], "", "1 to 1024 printable characters"),  # no password at all
    (["ana"], "tab\there\n", "1 to 1024 printable characters"),
    (["ana"], "x" * 1025 + "\n", "1 to 1024 printable characters"),
    ([" ana"], PASSWORD + "\n", "user name"),
    ([], "", "give either USER or --convert"),
    (["ana", "--convert"], "", "give either USER or --convert"),
])
def test_passwd_refuses_bad_input_and_changes_nothing(tmp_path, args, stdin, message):
    users = tmp_path / "users.json"
    users.write_text('{"bo": "scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}')
    before = users.read_text()
    done = passwd(tmp_path, str(users), *args, stdin=stdin)
    assert done.returncode == 2 and message in done.stderr
    assert "Traceback" not in done.stderr and (PASSWORD in args or PASSWORD not in done.stderr)
    assert users.read_text() == before


def test_a_plaintext_password_file_is_refused_at_startup_then_converted(tmp_path):
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"ana": PASSWORD}))  # the old format: {"user": "password"}
    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"ana": ["acme"]}))
    process, port, log = start_workbench(tmp_path, users, grants)
    try:
        returncode = process.wait(90)
    except subprocess.TimeoutExpired:
        returncode = None
    finally:
        process.kill()
    output = log.read_text()
    assert returncode == 2, f"a plaintext password file must be refused at startup:\n{output}"
    assert "'ana' is not a scrypt hash" in output and "gate workbench-passwd FILE --convert" in output
    assert PASSWORD not in output and "Traceback" not in output
    converted = passwd(tmp_path, str(users), "--convert")
    assert converted.returncode == 0 and "1 plaintext password(s) replaced" in converted.stdout
    assert PASSWORD not in users.read_text()
    process, port, log = start_workbench(tmp_path, users, grants)
    try:
        wait_for(f"http://127.0.0.1:{port}/login", process, log)
        assert sign_in(port, "ana", PASSWORD).status == 302  # the converted hash signs ana in
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.parametrize("entry, message", [
    ("scrypt$2097152$8$1$" + "A" * 22 + "$" + "A" * 43, "neither a usable scrypt hash nor a password"),
    ("tab\tinside", "entry 'bo': a password is 1 to 1024 printable characters"),
    (12345, "neither a usable scrypt hash nor a password"),
])
def test_convert_refuses_what_is_not_a_plaintext_password_and_changes_nothing(tmp_path, entry, message):
    users = tmp_path / "users.json"
    users.write_text(json.dumps({"ana": "plain-password", "bo": entry}))
    before = users.read_text()
    done = passwd(tmp_path, str(users), "--convert")
    assert done.returncode == 2 and message in done.stderr and "plain-password" not in done.stderr
    assert users.read_text() == before


# --------------------------------------------------------------------------- signing in


def test_the_right_password_signs_in_and_a_wrong_one_does_not(server):
    answer = sign_in(server, "cy", PASSWORD, "127.0.0.40")
    assert answer.status == 302 and "user=" in (answer.getheader("Set-Cookie") or "")
    for user, password in (("cy", "wrong"), ("nobody", PASSWORD), ("cy", PASSWORD + " "), ("cy", "")):
        wrong = sign_in(server, user, password, "127.0.0.41")
        assert wrong.status == 401 and "Invalid username or password." in wrong.text
        assert "user=" not in (wrong.getheader("Set-Cookie") or "")


def test_wrong_passwords_for_one_user_are_throttled_at_the_address_that_sent_them(server):
    for attempt in range(6):  # 5 free failures, the 6th starts a 30 s block for this address
        wrong = sign_in(server, "bo", f"guess-{attempt}", "127.0.0.10")
        assert wrong.status == 401, (attempt, wrong.status)
    started = time.monotonic()
    blocked = [sign_in(server, "bo", password, "127.0.0.10") for password in ("guess-7", PASSWORD)]
    assert [answer.status for answer in blocked] == [429, 429]  # even the right password waits there
    assert 1 <= int(blocked[1].getheader("Retry-After")) <= 30
    assert "Too many failed sign-ins" in blocked[1].text
    assert "user=" not in (blocked[1].getheader("Set-Cookie") or "")
    assert time.monotonic() - started < 30
    assert sign_in(server, "bo", PASSWORD, "127.0.0.20").status == 302  # bo, from an address that has not failed
    assert sign_in(server, "ana", PASSWORD, "127.0.0.20").status == 302  # other users are not held up


def test_a_flood_of_wrong_passwords_cannot_lock_the_user_out(server):
    # Issue 41, defect 4: after 1,200 failed sign-ins for one user from one address, that user's
    # right password got 429 from everywhere. Now the flood is throttled where it comes from.
    statuses = [sign_in(server, "dee", f"guess-{attempt}", "127.0.0.50").status for attempt in range(1200)]
    assert statuses.count(401) == 6 and statuses.count(429) == 1194  # 6 checked: 5 free, 1 starts the block
    assert sign_in(server, "dee", PASSWORD, "127.0.0.50").status == 429
    answer = sign_in(server, "dee", PASSWORD, "127.0.0.51")  # the owner, from an address that has not failed
    assert answer.status == 302 and "user=" in (answer.getheader("Set-Cookie") or "")


def test_guesses_from_many_addresses_are_slowed_per_user_but_never_lock_it(server):
    # One guess from each of 25 fresh addresses: no address has failed yet, so each is checked.
    sources = [f"127.0.1.{index}" for index in range(1, 26)]
    assert [sign_in(server, "eve", f"spread-{n}", source).status for n, source in enumerate(sources)] == [401] * 25
    # eve is past her 20 free failures: addresses that have failed now share one slot every few
    # seconds (2 s, 4 s, ... at most 60 s), however many of them there are.
    started = time.monotonic()
    burst = [sign_in(server, "eve", f"again-{n}", sources[n % 25]) for n in range(100)]
    elapsed = time.monotonic() - started
    checked = [answer.status for answer in burst].count(401)
    assert {answer.status for answer in burst} <= {401, 429}
    assert 1 <= checked <= 1 + elapsed / 2, (checked, elapsed)  # the first slot after 25 failures: 32 s
    assert all(1 <= int(a.getheader("Retry-After")) <= 60 for a in burst if a.status == 429)
    answer = sign_in(server, "eve", PASSWORD, "127.0.1.200")  # the owner, from an address that has not failed
    assert answer.status == 302 and "user=" in (answer.getheader("Set-Cookie") or "")
    slowed = sign_in(server, "eve", PASSWORD, sources[0])  # from a failed address: a wait, never a lock
    assert slowed.status in (302, 429)
    if slowed.status == 429:
        assert 1 <= int(slowed.getheader("Retry-After")) <= 60


def test_wrong_passwords_from_one_address_are_throttled_for_every_user(server):
    source = "127.0.0.30"
    for attempt in range(21):  # 20 free failures per address, spread so no user reaches its own limit
        wrong = sign_in(server, f"spray-{attempt % 7}", f"guess-{attempt}", source)
        assert wrong.status == 401, (attempt, wrong.status)
    blocked = sign_in(server, "ana", PASSWORD, source)
    assert blocked.status == 429 and int(blocked.getheader("Retry-After")) >= 1
    assert sign_in(server, "ana", PASSWORD, "127.0.0.31").status == 302  # another address is not
