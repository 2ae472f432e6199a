"""Policy as code (issue 55; docs/policy-as-code.md): `gate init-policies`, `gate plan`, `gate apply`
driven over a temporary git repository and a small demo ledger, the CLI as a subprocess where the
path is walked and in process (`gate_cli.main.main`) for the refusals and the checks between steps."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from gate_cli.main import main
from tests.demo_support import GATE, gate_env

SCOPE = "demo"
RULEBOOK = "refund_approval"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A demo ledger of a few dozen decisions per scope (`gate demo seed`), with a signing keyring."""
    home = tmp_path_factory.mktemp("policy-home")
    env = gate_env(home)
    subprocess.run([GATE, "keys", "signing-init"], env=env, check=True, capture_output=True, timeout=120)
    subprocess.run([GATE, "demo", "seed", "--decisions", "120", "--seed", "7"], env=env, check=True,
                   capture_output=True, timeout=600)
    return home


@pytest.fixture
def in_process(home, monkeypatch):
    """`gate …` in this process, against the module's home (its output captured by capsys)."""
    for name in [n for n in os.environ if n.startswith("GATE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GATE_HOME", str(home))
    return lambda *argv: main(list(argv))


def gate(home: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([GATE, *args], env=gate_env(home), cwd=cwd, capture_output=True, text=True, timeout=600)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo, check=True,
                   capture_output=True)


def edit(path: Path, version: str, limit: int) -> None:
    """A new version of the refund rulebook that sends refunds above `limit` to review."""
    book = json.loads(path.read_text())
    book["version"] = version
    rule = next(r for r in book["rules"] if r["rule_id"] == "review_large_amount")
    rule["condition"]["value"] = limit
    path.write_text(json.dumps(book, indent=2))


def status(in_process, capsys) -> dict:
    capsys.readouterr()
    assert in_process("release", "status", "--scope", SCOPE, "--rulebook-id", RULEBOOK, "--json") == 0
    return json.loads(capsys.readouterr().out)["state"]


def test_init_plan_apply_and_approval_over_a_git_repository(home, tmp_path, in_process, capsys):
    # The demo's history ends weeks before now: the scope accepts a dry-run over it (require_dry_run is on).
    assert in_process("release", "policy", "--scope", SCOPE, "--dry-run-max-age", "31536000") == 0
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    done = gate(home, "init-policies", "policies", "--scope", SCOPE, cwd=repo)
    assert done.returncode == 0, done.stderr
    path = repo / "policies" / SCOPE / f"{RULEBOOK}.json"
    assert path.is_file() and (repo / "policies" / SCOPE / "release.toml").is_file()
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "policies as the gate runs them")
    edit(path, "2026-12-01", 300)
    git(repo, "commit", "-qam", "review refunds above 300")

    out = tmp_path / "plan"
    planned = gate(home, "plan", "--dir", "policies", "--scope", SCOPE, "--out", str(out), cwd=repo)
    assert planned.returncode == 3, planned.stdout + planned.stderr  # something changes
    body = json.loads((out / "plan.json").read_text())  # what --format json prints
    [change] = body["changes"]
    assert (change["scope"], change["rulebook_id"], change["from_version"], change["to_version"]) == (
        SCOPE, RULEBOOK, "2026-08-01", "2026-12-01")
    assert change["decisions_changed"] > 0 and change["flips"] and change["semantic_diff"]["verdict"] == "different"
    assert change["manifest_hash"] == json.loads((out / SCOPE / RULEBOOK / "migration.json").read_text())[
        "migration_hash"]
    text = planned.stdout
    assert "### demo / refund\\_approval: 2026-08-01 → 2026-12-01" in text and "| from \\\\ to | yes | no | review |" in text
    assert "Review-load forecast" in text and "Signed manifest\\: migration hash " + change["manifest_hash"] in text

    # The figures are gate dry-run's for the same draft and dataset (the live ledger, the scope's baseline).
    capsys.readouterr()
    assert in_process("dry-run", "--rulebook-id", RULEBOOK, "--draft", str(path), "--scope", SCOPE,
                      "--out", str(tmp_path / "dry"), "--json") == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["decisions_changed"] == change["decisions_changed"]
    assert dry["transitions"] == json.loads((out / SCOPE / RULEBOOK / "migration.json").read_text())[
        "dry_run"]["transitions"]

    capsys.readouterr()
    assert in_process("apply", "--dir", str(repo / "policies"), "--scope", SCOPE, "--out", str(tmp_path / "a1"),
                      "--format", "json") == 3
    [change] = json.loads(capsys.readouterr().out)["changes"]
    assert change["applied"]["result"] == "applied" and change["applied"]["action"] == "activate"
    assert status(in_process, capsys)["active"]["version"] == "2026-12-01"
    capsys.readouterr()
    assert in_process("apply", "--dir", str(repo / "policies"), "--scope", SCOPE, "--out", str(tmp_path / "a2")) == 0
    assert "0 changed" in capsys.readouterr().out  # re-running changes nothing

    # Under require_approval (and require_dry_run) apply only asks: a pending request naming the plan.
    assert in_process("release", "policy", "--scope", SCOPE, "--require-approval") == 0
    edit(path, "2026-12-02", 250)
    git(repo, "commit", "-qam", "review refunds above 250")
    requested = gate(home, "apply", "--dir", "policies", "--scope", SCOPE, "--out", str(tmp_path / "a3"),
                     "--format", "json", cwd=repo)
    assert requested.returncode == 3, requested.stdout + requested.stderr
    [change] = json.loads(requested.stdout)["changes"]
    assert change["applied"]["result"] == "requested"
    state = status(in_process, capsys)
    assert state["active"]["version"] == "2026-12-01"  # unchanged until a second principal approves
    [pending] = state["pending"]
    assert pending["version"] == "2026-12-02" and pending["request_seq"] == change["applied"]["event_seq"]
    capsys.readouterr()
    assert in_process("release", "history", "--scope", SCOPE, "--rulebook-id", RULEBOOK) == 0
    events = json.loads(capsys.readouterr().out)["events"]
    request = next(e for e in events if e["seq"] == pending["request_seq"])
    assert request["migration_manifest_hash"] == change["manifest_hash"] and change["manifest_hash"] in request["reason"]
    assert in_process("apply", "--dir", str(repo / "policies"), "--scope", SCOPE, "--out", str(tmp_path / "a4")) == 0
    assert f"demo/refund\\_approval 2026-12-02 (requested (request {pending['request_seq']}))" in \
        capsys.readouterr().out
    assert len(status(in_process, capsys)["pending"]) == 1  # asked once

    # A second principal (a signed-in person) approves: the version is active, the history names both.
    approved = approve_as_a_person(pending)
    assert approved["actor"] == "person:https://idp.example#alice"
    assert status(in_process, capsys)["active"]["version"] == "2026-12-02"
    assert in_process("release", "history", "--scope", SCOPE, "--rulebook-id", RULEBOOK) == 0
    actors = {e["seq"]: e["actor"] for e in json.loads(capsys.readouterr().out)["events"]}
    assert actors[pending["request_seq"]].startswith("operator:") and actors[approved["seq"]] == approved["actor"]


def approve_as_a_person(pending: dict) -> dict:
    """`approve` by a person through the release service (what the workbench does for a signed-in approver)."""
    from gate.ledger import Ledger
    from gate.principals import Principal
    from gate.services.root import decision_services, signing_setup
    from gate.settings import Settings

    settings = Settings.from_env()
    ledger = Ledger(settings.database_url)
    try:
        releases = decision_services(ledger, signing_setup(settings)).release_service()
        event, _created = releases.act(SCOPE, Principal.person("https://idp.example", "alice"), frozenset({"approve"}),
                                       RULEBOOK, {"action": "approve", "request_seq": pending["request_seq"],
                                                  "version": pending["version"],
                                                  "rulebook_hash": pending["rulebook_hash"]})
        return event
    finally:
        ledger.dispose()


def _layout(tmp_path: Path, in_process, capsys) -> Path:
    root = tmp_path / "policies"
    capsys.readouterr()
    assert in_process("init-policies", str(root), "--scope", "acme-retail") == 0
    capsys.readouterr()
    return root


@pytest.mark.parametrize(("damage", "expected"), [
    (lambda root: (root / "acme-retail" / "refund_approval.json").write_text("{not json"), "is not valid JSON"),
    (lambda root: (root / "acme-retail" / "refund_approval.json").write_text('{"rulebook_id": "refund_approval"}'),
     "is not a valid Rulebook v1"),
    (lambda root: (root / "acme-retail" / "refund_approval.json").rename(root / "acme-retail" / "other.json"),
     "is named refund_approval.json"),
    (lambda root: (root / "nowhere").mkdir(), "the gate knows no scope 'nowhere'"),
    (lambda root: (root / "acme-retail" / "release.toml").write_text('strategy = "canary"\n'),
     "a canary needs percent"),
    (lambda root: (root / "acme-retail" / "release.toml").write_text('strategy = "yolo"\n'), "strategy must be one of"),
    (lambda root: (root / "acme-retail" / "release.toml").write_text('percentage = 5\n'), "unknown key 'percentage'"),
    (lambda root: edit(root / "acme-retail" / "refund_approval.json", "2026-08-01", 10),
     "already published in 'acme-retail' with other content"),
])
def test_a_bad_layout_is_refused_and_nothing_is_published(tmp_path, in_process, capsys, damage, expected):
    root = _layout(tmp_path, in_process, capsys)
    damage(root)
    before = status_of(in_process, capsys, "acme-retail")
    for command in ("plan", "apply"):
        assert in_process(command, "--dir", str(root), "--out", str(tmp_path / "out")) == 2
        err = capsys.readouterr().err
        assert "POLICY_LAYOUT_INVALID" in err and expected in err, err
    assert status_of(in_process, capsys, "acme-retail") == before


def status_of(in_process, capsys, scope: str) -> tuple:
    """The scope's published versions of the rulebook and its release state, read from the ledger."""
    from gate.ledger import Ledger
    from gate.settings import Settings

    ledger = Ledger(Settings.from_env().database_url)
    try:
        return tuple(ledger.rulebook_versions(scope, RULEBOOK)), ledger.latest_rulebook_snapshot(scope, RULEBOOK)["version"]
    finally:
        ledger.dispose()


@pytest.mark.parametrize("condition", ["lost_failures", "lost_failures>", "nope>0", "lost_failures>0;rm",
                                       "lost_failures>1.5", ",".join(["lost_failures>0"] * 9)])
def test_a_bad_fail_on_is_refused(tmp_path, in_process, capsys, condition):
    root = _layout(tmp_path, in_process, capsys)
    assert in_process("plan", "--dir", str(root), "--fail-on", condition) == 2
    assert "POLICY_LAYOUT_INVALID: --fail-on" in capsys.readouterr().err


def test_a_met_fail_on_fails_the_plan_and_apply_publishes_nothing(tmp_path, in_process, capsys):
    root = _layout(tmp_path, in_process, capsys)
    version = "2026-12 [see](https://evil.example) <img src=x onerror=alert(1)> | *x*"  # the author's text
    edit(root / "acme-retail" / "refund_approval.json", version, 50)
    before = status_of(in_process, capsys, "acme-retail")
    assert in_process("apply", "--dir", str(root), "--out", str(tmp_path / "o"), "--fail-on",
                      "decisions_changed>0,lint_warnings>1000") == 1
    out = capsys.readouterr().out
    assert "--fail-on met" in out and "decisions\\_changed\\>0" in out and "nothing applied" in out
    # The version is text in the comment: no link, no HTML, no table cell break, no emphasis.
    for markup in (r"\]\(https", r"<img", r"\| \*x\*"):
        assert re.search(r"(?<!\\)" + markup, out) is None, markup
    assert "2026-12 \\[see\\](https\u2060\\:" in out and "\\<img" in out
    assert status_of(in_process, capsys, "acme-retail") == before


def test_plan_and_apply_against_a_remote_gate(home, tmp_path, in_process, capsys):
    """`--gate URL`: the scope's state by reference over HTTP with an API key, the running version's body
    found in the repository's git history, the dry-run over a signed export, the publish and the move
    made by the key (its holder is the principal of the signed event)."""
    from tests.client.live_gate import LiveGate

    scope = "globex-saas"
    assert in_process("release", "policy", "--scope", scope, "--dry-run-max-age", "31536000") == 0
    capsys.readouterr()
    assert in_process("keys", "create", "--scope", scope, "--plan", "growth", "--permissions", "publish,release",
                      "--holder",
                      "service:policy-ci", "--json") == 0
    key = json.loads(capsys.readouterr().out)["api_key"]
    assert in_process("export", "--out", str(tmp_path / "dataset"), "--scope", scope) == 0
    served = LiveGate(home).start()
    try:
        repo = tmp_path / "repo"
        repo.mkdir()
        git(repo, "init", "-q")
        assert in_process("init-policies", str(repo / "policies"), "--scope", scope) == 0
        path = repo / "policies" / scope / "pricing_exception.json"
        book = json.loads(path.read_text())
        book["version"] = "2026-12-01"
        book["rules"] = book["rules"][1:]  # drop the first rule
        path.write_text(json.dumps(book))
        git(repo, "add", ".")
        git(repo, "commit", "-qm", "drop a rule")
        env = {**gate_env(home), "GATE_API_KEY": key}
        remote = ["--dir", "policies", "--scope", scope, "--gate", served.base, "--dataset", str(tmp_path / "dataset"),
                  "--format", "json"]
        first = subprocess.run([GATE, "apply", *remote, "--out", str(tmp_path / "r1")], env=env, cwd=repo,
                               capture_output=True, text=True, timeout=600)
        assert first.returncode == 3, first.stdout + first.stderr
        [change] = json.loads(first.stdout)["changes"]
        assert change["applied"]["result"] == "applied" and change["applied"]["actor"].startswith("key_")
        book["version"] = "2026-12-02"
        book["rules"] = book["rules"][1:]
        path.write_text(json.dumps(book))
        git(repo, "commit", "-qam", "drop another rule")
        second = subprocess.run([GATE, "plan", *remote, "--out", str(tmp_path / "r2")], env=env, cwd=repo,
                                capture_output=True, text=True, timeout=600)
        assert second.returncode == 3, second.stdout + second.stderr
        [change] = json.loads(second.stdout)["changes"]
        assert change["from_version"] == "2026-12-01" and "its body from commit" in change["baseline"]
        assert change["semantic_diff"]["verdict"] == "different" and change["manifest_hash"]
        without = subprocess.run([GATE, "plan", *remote], env=gate_env(home), cwd=repo, capture_output=True,
                                 text=True, timeout=120)
        assert without.returncode == 2 and "GATE_API_KEY" in without.stderr
    finally:
        served.stop()


def test_the_demo_prints_a_policy_as_code_tour_whose_commands_parse(tmp_path):
    """`gate demo` (scripts/demo) prints how to try policy as code on the demo's scopes: each gate
    command it prints is one the command line accepts, against the demo's home."""
    import shlex

    from gate_cli.demo_cmd import policy_as_code_tour
    from gate_cli.main import build_parser

    tour = policy_as_code_tour(tmp_path / "demo home")
    commands = [shlex.split(line.split("#")[0]) for line in tour.splitlines() if "GATE_HOME=" in line]
    assert [c[2] for c in commands] == ["release", "init-policies", "plan", "apply"]
    for command in commands:
        assert command[0] == f"GATE_HOME={tmp_path / 'demo home'}" and command[1] == GATE
        argv = command[2:command.index("&&")] if "&&" in command else command[2:]
        assert build_parser().parse_args(argv).func is not None


def test_a_new_rulebook_is_planned_without_a_history_to_replay(tmp_path, in_process, capsys):
    root = _layout(tmp_path, in_process, capsys)
    book = json.loads((root / "acme-retail" / "refund_approval.json").read_text())
    book["rulebook_id"] = "refund_approval_v2"
    (root / "acme-retail" / "refund_approval_v2.json").write_text(json.dumps(book))
    assert in_process("plan", "--dir", str(root), "--out", str(tmp_path / "o"), "--format", "json") == 3
    [change] = json.loads(capsys.readouterr().out)["changes"]
    assert change["rulebook_id"] == "refund_approval_v2" and change["from_version"] is None
    assert change["manifest_hash"] is None and change["semantic_diff"] is None
    assert change["note"].startswith("no dry-run: no decision of rulebook 'refund_approval_v2'")


def test_the_pre_commit_hook_lints_each_changed_rulebook(tmp_path):
    """`.pre-commit-hooks.yaml`'s gate-lint, run as pre-commit runs it (its entry split like a shell
    line, the matching files appended, the hook's environment's gate on PATH): every file linted, the
    commit stopped when one fails."""
    import shlex

    import yaml

    root = Path(__file__).resolve().parents[2]
    [hook] = yaml.safe_load((root / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "gate-lint" and hook["language"] == "python"
    files = re.compile(hook["files"])
    assert files.search("policies/demo/refund_approval.json") and not files.search("policies/demo/release.toml")
    good = tmp_path / "policies" / "demo" / "refund_approval.json"
    good.parent.mkdir(parents=True)
    good.write_text((root / "gate" / "data" / "rulebooks" / "refund-approval-2026-08-01.json").read_text())
    bad = good.parent / "broken.json"
    bad.write_text('{"rulebook_id": "broken"}')
    env = {**gate_env(tmp_path), "PATH": f"{Path(GATE).parent}:{os.environ['PATH']}"}

    def run(*paths: Path) -> subprocess.CompletedProcess:
        return subprocess.run([*shlex.split(hook["entry"]), *map(str, paths)], env=env, capture_output=True,
                              text=True, timeout=120)

    assert run(good).returncode == 0
    failed = run(bad, good)
    assert failed.returncode == 1 and "broken.json is not a valid Rulebook v1" in failed.stderr
    assert "refund_approval" in failed.stdout  # the good file after it was linted too


@pytest.mark.parametrize("name", ["github-actions-policy.yml", "gitlab-ci-policy.yml"])
def test_the_ci_examples_run_plan_on_reviews_and_apply_on_the_main_branch(name):
    """docs/examples: every `gate plan`/`gate apply` line is one the command line accepts, against a
    remote gate with the job's token, and a --fail-on the command parses."""
    import shlex

    import yaml

    from gate_cli.main import build_parser
    from gate_cli.policy_repo import parse_fail_on

    text = (Path(__file__).resolve().parents[2] / "docs" / "examples" / name).read_text()

    def strings(node):
        if isinstance(node, str):
            yield node
        elif isinstance(node, dict | list):
            for child in node.values() if isinstance(node, dict) else node:
                yield from strings(child)

    commands = {}
    for script in strings(yaml.safe_load(text)):
        for line in script.replace("\\\n", " ").splitlines():
            if "gate plan --" not in line and "gate apply --" not in line:  # a command, not a step's name
                continue
            lexer = shlex.shlex(line[line.index("gate "):], posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            tokens = list(lexer)
            argv = tokens[1:next((i for i, t in enumerate(tokens) if t in (">", "|", ";")), len(tokens))]
            args = build_parser().parse_args(argv)
            parse_fail_on(args.fail_on)
            assert args.gate and args.scope and args.dataset and args.dir == "policies"
            assert args.key_fingerprint, line  # the dataset is trusted by the gate's pinned public key
            commands[args.command] = args
    assert set(commands) == {"plan", "apply"}
    assert "GATE_ID_TOKEN" in text and ("id-token: write" in text or "id_tokens" in text)
    # Issue 63, defect 7: the job stores no signing key (verifying needs none).
    assert "GATE_SIGNING_KEY" not in text and "signing-keys" not in text and "secrets." not in text


def test_a_remote_gate_s_rate_limit_is_waited_out_as_its_retry_after_says(tmp_path, monkeypatch):
    """A 429 with Retry-After (a CI caller's small budget) is retried after that wait; one that asks for
    more than a minute, or keeps refusing, is the gate's refusal."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from gate.errors import GateError
    from gate_cli.policy_remote import RemoteGate

    answers = [(429, "0"), (200, None), (429, "3600")]
    seen = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            status, retry = answers.pop(0) if answers else (429, "0")
            seen.append((self.path, self.headers.get("x-api-key")))
            body = (json.dumps({"ok": True, "state": {"active": None}}) if status == 200 else json.dumps(
                {"c": "unclear", "v": "unclear", "error": "SVC_API_RATE_LIMITED", "message": "wait"})).encode()
            self.send_response(status)
            if retry is not None:
                self.send_header("Retry-After", retry)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("GATE_API_KEY", "k")
        monkeypatch.delenv("GATE_ID_TOKEN", raising=False)
        remote = RemoteGate(f"http://127.0.0.1:{server.server_address[1]}", tmp_path, "s")
        assert remote.state("s", "r") == {"active": None}  # after one 429 that asked for no wait
        assert seen == [("/api/decision/rulebooks/r/release", "k")] * 2
        with pytest.raises(GateError) as refused:
            remote.state("s", "other")  # asks for an hour: not waited for
        assert refused.value.code == "SVC_API_RATE_LIMITED"
        with pytest.raises(GateError):
            remote.state("s", "third")  # keeps refusing: given up after the bounded retries
        assert len(seen) == 3 + 4
    finally:
        server.shutdown()
        server.server_close()


def test_init_policies_keeps_what_is_there_and_refuses_an_unknown_scope(tmp_path, in_process, capsys):
    root = _layout(tmp_path, in_process, capsys)
    edited = root / "acme-retail" / "refund_approval.json"
    edited.write_text("{}")  # the author's own work in progress
    assert in_process("init-policies", str(root), "--scope", "acme-retail") == 0
    assert edited.read_text() == "{}" and "nothing written" in capsys.readouterr().out
    assert in_process("init-policies", str(tmp_path / "other"), "--scope", "nowhere") == 2
    assert "POLICY_LAYOUT_INVALID: --scope nowhere: the gate knows no such scope" in capsys.readouterr().err
    assert not (tmp_path / "other").exists()
