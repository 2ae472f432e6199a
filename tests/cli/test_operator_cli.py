"""The CLI as a newcomer meets it, run as subprocesses in empty folders with no GATE_* variables:
a fresh folder, one-line errors (never a traceback), a closed pipe, the version, the help text,
the demo's walkthrough run as printed, and one active demo key however often the demo runs."""

from __future__ import annotations

import inspect
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import tomllib
import urllib.request
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version as installed_version
from pathlib import Path

import pytest

import gate
from gate import settings as settings_module
from gate.keys import apikeys

ROOT = Path(__file__).resolve().parents[2]
GATE = str(Path(sys.executable).parent / "gate")


def clean_env(**extra: str) -> dict:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("GATE_")}, **extra}


def run(args: list[str], cwd: Path, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([GATE, *args], cwd=cwd, env=env or clean_env(), capture_output=True, text=True,
                          timeout=120, **kwargs)


def one_line_failure(done: subprocess.CompletedProcess, *needles: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    for needle in needles:
        assert needle in done.stderr, (needle, done.stderr)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers (a 503 readiness is an answer)
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer")


def get_json(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


# --------------------------------------------------------------------------- a fresh folder


def test_a_fresh_folder_gets_the_embedded_default(tmp_path):
    done = run(["db", "upgrade"], tmp_path)
    assert done.returncode == 0 and "newest revision" in done.stdout, done.stderr
    assert (tmp_path / "var" / "gate.db").is_file()
    created = json.loads(run(["keys", "create", "--scope", "acme", "--json"], tmp_path).stdout)
    assert created["api_key"].startswith("dg_")
    other = tmp_path / "keys-first"
    other.mkdir()
    assert run(["keys", "create", "--scope", "acme"], other).returncode == 0  # no db upgrade before it
    assert run(["keys", "signing-init"], other).returncode == 0
    assert (other / "var" / "signing-keys.json").is_file()


def test_expected_conditions_end_in_one_line_not_a_traceback(tmp_path):
    one_line_failure(run(["keys", "signing-rotate"], tmp_path), "gate keys signing-init")
    missing_folder = clean_env(GATE_DATABASE_URL=f"sqlite:///{tmp_path}/nowhere/gate.db")
    one_line_failure(run(["db", "upgrade"], tmp_path, missing_folder), "does not exist", "GATE_DATABASE_URL")
    one_line_failure(run(["keys", "list"], tmp_path, clean_env(GATE_REQUEST_READ_TIMEOUT="never")),
                     "GATE_REQUEST_READ_TIMEOUT")
    unreachable = clean_env(GATE_DATABASE_URL="postgresql://nobody@127.0.0.1:1/none")
    one_line_failure(run(["keys", "list"], tmp_path, unreachable), "ledger cannot be opened")
    one_line_failure(run(["verify", "nothing.json"], tmp_path), "cannot read record")
    home_is_a_file = tmp_path / "afile"
    home_is_a_file.write_text("x")
    one_line_failure(run(["db", "upgrade"], tmp_path, clean_env(GATE_HOME=str(home_is_a_file))), "GATE_HOME")


def test_serve_in_an_empty_folder_names_the_missing_key_and_takes_it_without_restart(tmp_path):
    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        process = subprocess.Popen([GATE, "serve", "--port", str(port)], cwd=tmp_path, env=clean_env(),
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(base + "/healthz")
        said = log.read_text()
        assert "signing-keys.json does not exist" in said and "gate keys signing-init" in said
        assert "answers 503" in said
        status, body = get_json(base + "/api/decision/status")
        assert status == 503 and body["signing"]["problem"].endswith("does not exist")
        assert "gate keys signing-init" in body["signing"]["fix"]
        assert body["fixes"] == [{"problem": body["signing"]["problem"], "fix": body["signing"]["fix"]}]
        assert get_json(base + "/healthz") == (200, {"ok": True, "status": "alive", "service_version": gate.__version__})

        assert run(["keys", "signing-init"], tmp_path).returncode == 0
        deadline = time.monotonic() + 10
        while get_json(base + "/api/decision/status")[0] != 200:
            assert time.monotonic() < deadline, "the server did not pick up the new keyring"
            time.sleep(0.2)
        assert get_json(base + "/api/decision/status")[1]["signing"]["fix"] is None
    finally:
        process.terminate()
        process.wait(timeout=20)
    assert "Traceback" not in log.read_text()


# --------------------------------------------------------------------------- pipes and registries


@pytest.fixture
def record_file(client, api_key, sample_request, tmp_path):
    record = client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    registry = tmp_path / "keys.json"
    registry.write_text(json.dumps(client.get("/api/decision/receipt-keys").json))
    return path


def test_a_closed_pipe_ends_quietly(record_file, tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte: every write is EPIPE
    try:
        done = subprocess.run([GATE, "verify", str(record_file), "--json"], cwd=tmp_path, env=clean_env(),
                              stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert done.returncode == 141 and done.stderr == ""
    # A shell on purpose: the pipe into `head` is what closes the reader early.
    shell = subprocess.run(f"'{GATE}' verify '{record_file}' --json | head -1", shell=True, cwd=tmp_path,  # noqa: S602
                           env=clean_env(), capture_output=True, text=True, timeout=60)
    assert shell.stdout == "{\n" and "Traceback" not in shell.stderr and "BrokenPipe" not in shell.stderr


def test_a_key_registry_url_is_labelled_a_url(record_file, tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 partial(SimpleHTTPRequestHandler, directory=str(tmp_path)))
    server.RequestHandlerClass.log_message = lambda *args: None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/keys.json"
        by_url = run(["verify", str(record_file), "--key-registry", url, "--json"], tmp_path)
        assert by_url.returncode == 0 and json.loads(by_url.stdout)["key_source"] == "key_registry_url"
        text = run(["verify", str(record_file), "--key-registry", url], tmp_path).stdout
        assert "authenticity valid (key_registry_url)" in text
        by_file = run(["verify", str(record_file), "--key-registry", str(tmp_path / "keys.json"), "--json"], tmp_path)
        assert json.loads(by_file.stdout)["key_source"] == "key_registry_file"
        one_line_failure(run(["verify", str(record_file), "--key-registry", url + ".missing"], tmp_path),
                         "cannot load key registry URL")
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- version and help


def test_one_version_everywhere(client):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "gate.__version__"}
    assert installed_version("decision-gate") == gate.__version__
    shown = run(["--version"], ROOT).stdout.strip()
    assert shown == f"gate {gate.__version__} (decision-gate; interface 1.13.0)"
    status = client.get("/api/decision/status").json
    assert status["service_version"] == gate.__version__ and status["interface_version"] == "1.13.0"
    assert project["project"]["license"] == "Apache-2.0" and project["project"]["license-files"] == ["LICENSE"]
    assert "Apache License" in (ROOT / "LICENSE").read_text() and "Version 2.0" in (ROOT / "LICENSE").read_text()


def test_help_shows_defaults_plans_and_every_setting(tmp_path):
    serve = run(["serve", "--help"], tmp_path).stdout
    for option, default in (("--host", "127.0.0.1"), ("--port", "8080"), ("--workers", "1"), ("--threads", "8")):
        assert re.search(rf"{option} .*?\(default: {re.escape(default)}\)", serve, re.S), option
    for name, default, _ in settings_module.VARIABLES:
        assert re.search(rf"^  {name} .*\[{re.escape(default)}\]$", serve, re.M), name
    create = " ".join(run(["keys", "create", "--help"], tmp_path).stdout.split())
    assert "starter (20/min, 10,000/month)" in create and "growth" in create and "scale" in create
    assert "(default: starter)" in create
    # every permission of the one vocabulary, and which need a holder (issue 56: resolve was left out)
    assert f"among {','.join(apikeys.PERMISSIONS)} " in create
    needing = [p for p in apikeys.PERMISSIONS if p in apikeys.HOLDER_REQUIRED]
    assert f"required with {', '.join(needing[:-1])} or {needing[-1]} (approvals count holders" in create
    demo = " ".join(run(["demo", "--help"], tmp_path).stdout.split())
    assert "(default: 8080)" in demo and "(default 3000; 0: none)" in demo and "(default 5006; 0: none)" in demo
    assert not list(tmp_path.iterdir())  # asking for help creates nothing


def test_the_settings_table_is_every_variable_the_code_reads():
    source = inspect.getsource(settings_module.Settings.from_env) + inspect.getsource(
        settings_module._policycheck_settings) + inspect.getsource(settings_module._channel_settings) + inspect.getsource(
        settings_module._retention_settings) + inspect.getsource(settings_module._privacy_settings)
    read = set(re.findall(r'"(GATE_[A-Z_]+)"', source))
    assert read == {name for name, _, _ in settings_module.VARIABLES}


# --------------------------------------------------------------------------- the demo


def _start_demo(folder: Path, port: int) -> tuple[subprocess.Popen, list[str]]:
    process = subprocess.Popen([GATE, "demo", "--port", str(port), "--seed-decisions", "0", "--workbench-port", "0"],
                               cwd=folder, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith("API reference:"):
            break
    wait_for(f"http://127.0.0.1:{port}/healthz")
    return process, lines


def _stop(process: subprocess.Popen) -> str:
    process.terminate()
    rest, _ = process.communicate(timeout=30)
    return rest


@pytest.mark.slow
def test_the_demo_walkthrough_runs_as_printed_and_one_demo_key_stays_active(tmp_path):
    port = free_port()
    process, printed = _start_demo(tmp_path, port)
    try:
        commands = [line[2:] for line in printed[printed.index(next(shown for shown in printed if shown.startswith("1. "))):]
                    if line.startswith("  ") and not line.startswith("   ")]
        assert len(commands) == 9, printed
        script = "set -e\n" + "\n".join(commands) + "\n"
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=clean_env(), capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        record = json.loads((tmp_path / "record.json").read_text())
        assert record["verdict"] == "yes" and record["c"] == "yes"
        outputs = done.stdout
        assert '"verified": true' in outputs.replace('"verified":true', '"verified": true')
        assert '"execution_status":"executed"' in outputs.replace(" ", "")
        assert '"outcome_status":"succeeded"' in outputs.replace(" ", "")
        assert "VERIFIED" in outputs and "NOT VERIFIED" not in outputs  # gate verify packet.json
        assert record["audit_chain"]["chain_id"] in outputs  # the chain view
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/docs", timeout=5) as page:
            assert page.status == 200 and b"swagger-ui" in page.read()
    finally:
        tail = _stop(process)
    assert "Traceback" not in tail

    port = free_port()
    process, printed_again = _start_demo(tmp_path, port)
    _stop(process)
    assert any("disabled 1 demo key(s)" in line for line in printed_again)
    keys = json.loads(run(["keys", "list", "--json"], tmp_path).stdout)
    demo_keys = [k for k in keys if k["scope"] == "demo"]
    assert [k["status"] for k in demo_keys] == ["disabled", "active"]
