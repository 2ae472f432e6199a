"""`gate holds` on the ledger an app serves (issue 43): the local operator lists,
shows, claims and resolves holds as `operator:<login of the real user id>` (no option names
anyone, LOGNAME and USER change nothing), its resolution verifies like any reviewer's, and every
refusal is one line with exit status 2. Each subcommand runs once as a subprocess of the real
entry point, the rest of the calls in process (`tests.cli_in_process`): 35 start-ups fewer."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys

import pytest

from gate.holds.events import verify_resolution
from tests.cli_in_process import gate_in_process
from tests.holds.support import Holds, held_request, policy, queue
from tests.holds.test_hold_request import refund_held

SCOPE = "tenant_a"


def _gate(gate_env, *args: str, env: dict | None = None, process: bool = False) -> subprocess.CompletedProcess:
    """`gate ARGS` in process (tests.cli_in_process); `process=True` as a subprocess, which each
    subcommand of `gate holds` (and `gate verify --hold-history`) keeps once in this file."""
    if not process:
        return gate_in_process(args, {**gate_env, **(env or {})})
    environment = {**gate_env, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", ""),
                   **(env or {})}
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=120)


def _operator() -> str:
    return f"operator:{pwd.getpwuid(os.getuid()).pw_name}"


def _refused(run: subprocess.CompletedProcess, code: str) -> None:
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert run.stderr.startswith(f"gate holds: {code}: "), run.stderr


@pytest.fixture
def caller(client, issue_key):
    """The key that asks for the held actions (four eyes keeps it from resolving them)."""
    return Holds(client, issue_key(scope=SCOPE, permissions="decide")["api_key"])


@pytest.fixture
def api(client, issue_key):
    """A reviewer's key, beside the operator."""
    return Holds(client, issue_key(scope=SCOPE, permissions="decide,resolve")["api_key"])


@pytest.fixture
def held(caller):
    answer = caller.decide(held_request())
    assert answer.status_code == 200 and answer.get_json()["verdict"] == "review", answer.get_json()
    return answer.get_json()


def test_list_shows_the_open_hold_as_a_table_and_as_json(gate_env, held):
    table = _gate(gate_env, "holds", "list", "--scope", SCOPE, process=True)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0] == f"1 of 1 open holds in scope {SCOPE!r} (open 1, approved 0, denied 0, expired 0)"
    assert lines[1].split() == ["DECISION", "ACTION", "TARGET", "AMOUNT", "STATE", "PRIORITY", "QUEUE", "DEADLINE",
                                "APPROVALS", "CLAIMED", "BY", "RULE", "REASON"]
    assert lines[2].split()[:8] == [held["decision_id"], "apply_discount", "sub_1042", "(billing)", "-", "open",
                                    "normal", "default"]
    assert lines[2].split()[9:] == ["0/1", "-", "review_thin_margin", "MARGIN_BELOW_FLOOR"]
    page = json.loads(_gate(gate_env, "holds", "list", "--scope", SCOPE, "--json").stdout)
    assert page["total"] == 1 and page["holds"][0]["decision_id"] == held["decision_id"]
    closed = _gate(gate_env, "holds", "list", "--scope", SCOPE, "--state", "closed")
    assert closed.returncode == 0 and closed.stdout.startswith(f"no closed holds in scope {SCOPE!r}")
    assert _gate(gate_env, "holds", "list", "--scope", "elsewhere").stdout.strip() == (
        "no open holds in scope 'elsewhere' (open 0, approved 0, denied 0, expired 0)")
    assert json.loads(_gate(gate_env, "holds", "list", "--scope", SCOPE, "--queue", "other", "--json").stdout)[
        "total"] == 0


def test_list_and_show_state_the_signed_request_first(gate_env, client, issue_key):
    """Issue 65: the held refund's requested action, target and amount in the list; its whole
    request, with the requester's holder (not the key id), first in `show`, above the facts."""
    caller = Holds(client, issue_key(scope=SCOPE, permissions="decide", holder="service:support-agent")["api_key"])
    record = caller.decide(refund_held()).get_json()
    assert record["verdict"] == "review", record
    table = _gate(gate_env, "holds", "list", "--scope", SCOPE, process=True)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[2].split()[:6] == [record["decision_id"], "issue_refund", "ord_7731", "(billing)",
                                                        "129", "open"]
    shown = _gate(gate_env, "holds", "show", "--scope", SCOPE, record["decision_id"], process=True).stdout
    assert "request (as signed: the stored request bound to the record's input_hash):\n" in shown
    assert "  action        issue_refund\n" in shown and "  target        ord_7731\n" in shown
    assert "  amount        129\n" in shown and "  source record ticket_5521\n" in shown
    assert "  requested by  service:support-agent\n" in shown
    assert shown.index("issue_refund") < shown.index("facts:") and "  days_since_purchase: 40" in shown
    document = json.loads(_gate(gate_env, "holds", "show", "--scope", SCOPE, record["decision_id"], "--json").stdout)
    assert document["request"]["target_object_id"] == "ord_7731" and document["request"]["signed"] is True


def test_show_claim_and_resolve_as_the_local_operator(gate_env, client, api, held):
    decision_id = held["decision_id"]
    shown = _gate(gate_env, "holds", "show", "--scope", SCOPE, decision_id, process=True)
    assert shown.returncode == 0, shown.stderr
    assert f"hold {decision_id}: open (queue default, priority normal)" in shown.stdout
    assert "  margin_percent: 12" in shown.stdout and "events:\n  none yet" in shown.stdout
    assert "  quorum        1 approval(s), 0 so far; four eyes\n" in shown.stdout
    assert "  held by       rule review_thin_margin (MARGIN_BELOW_FLOOR) of policy pricing_exception" in shown.stdout
    claimed = _gate(gate_env, "holds", "claim", "--scope", SCOPE, decision_id, "--json",
                    env={"LOGNAME": "someone-else", "USER": "someone-else"}, process=True)
    assert claimed.returncode == 0, claimed.stderr
    event = json.loads(claimed.stdout)["event"]
    assert event["principal"] == {"kind": "operator", "id": _operator()} and event["action"] == "claim"
    assert api.show(decision_id).get_json()["hold"]["claimed_by"] == _operator()
    # another reviewer (the API key) is held off by the operator's claim
    assert api.resolve(decision_id).get_json()["error"] == "HOLD_CLAIMED"
    resolved = _gate(gate_env, "holds", "resolve", "--scope", SCOPE, decision_id, "--approve",
                     "--reason-code", "MARGIN_OK", "--note", "checked with finance", process=True)
    assert resolved.returncode == 0, resolved.stderr
    assert resolved.stdout.splitlines()[-1] == "the hold is approved"
    assert f"vote approve MARGIN_OK by {_operator()} -> approved: checked with finance" in resolved.stdout
    answer = api.resolution(decision_id).get_json()
    assert answer["state"] == "approved" and answer["approved"] is True
    assert answer["resolution"]["actor"] == _operator() and answer["resolution"]["note"] == "checked with finance"
    anchors = client.application.extensions["gate"].signing.trust_anchors()
    assert verify_resolution(held, answer["resolution"], anchors).approved
    events = _gate(gate_env, "holds", "show", "--scope", SCOPE, decision_id).stdout
    assert "#1 " in events and " claim by " in events and "#2 " in events and "-> approved" in events


def test_the_events_the_cli_writes_link_to_the_inbox_when_the_workbench_url_is_set(gate_env, client, held):
    """Issue 56: `inbox_url` was null on every event the CLI wrote, GATE_WORKBENCH_URL or not."""
    from sqlalchemy import select

    from gate.ledger.tables import event_outbox

    decision_id = held["decision_id"]
    resolved = _gate(gate_env, "holds", "resolve", "--scope", SCOPE, decision_id, "--deny", "--reason-code", "NO",
                     env={"GATE_WORKBENCH_URL": "https://gate.example.org/workbench"})
    assert resolved.returncode == 0, resolved.stderr
    with client.application.extensions["gate"].ledger.read() as connection:
        texts = connection.execute(select(event_outbox.c.event_json).where(event_outbox.c.scope == SCOPE)
                                   .order_by(event_outbox.c.seq)).scalars().all()
    event = [json.loads(text) for text in texts][-1]
    assert event["type"].endswith("hold.resolved") and event["subject"] == decision_id
    assert event["data"]["inbox_url"] == (f"https://gate.example.org/workbench?scope={SCOPE}&page=inbox"
                                          f"&hold={decision_id}")


def test_a_workbench_address_without_the_app_path_is_refused_before_anything_is_written(gate_env, api, held):
    """Issue 65: `GATE_WORKBENCH_URL=https://host` made every Inbox link land on "Pick a scope"."""
    decision_id = held["decision_id"]
    refused = _gate(gate_env, "holds", "resolve", "--scope", SCOPE, decision_id, "--deny", "--reason-code", "NO",
                    env={"GATE_WORKBENCH_URL": "https://gate.example.org"}, process=True)
    assert refused.returncode == 2 and "GATE_WORKBENCH_URL must be the workbench app's address" in refused.stderr
    assert "https://gate.example.org/workbench" in refused.stderr  # the address it should be
    assert api.resolution(decision_id).get_json()["state"] == "open"


def test_unclaim_and_deny(gate_env, api, held):
    decision_id = held["decision_id"]
    assert _gate(gate_env, "holds", "claim", "--scope", SCOPE, decision_id).returncode == 0
    released = _gate(gate_env, "holds", "unclaim", "--scope", SCOPE, decision_id, process=True)
    assert released.returncode == 0, released.stderr
    assert released.stdout.splitlines()[-1] == "the hold is open: 0 of 1 approvals"
    assert api.show(decision_id).get_json()["hold"]["claimed_by"] is None
    _refused(_gate(gate_env, "holds", "unclaim", "--scope", SCOPE, decision_id), "HOLD_CLAIMED")
    denied = _gate(gate_env, "holds", "resolve", "--scope", SCOPE, decision_id, "--deny", "--reason-code", "TOO_THIN")
    assert denied.returncode == 0 and denied.stdout.splitlines()[-1] == "the hold is denied", denied.stderr
    assert api.resolution(decision_id).get_json()["state"] == "denied"


def test_refusals_are_one_line_with_exit_status_2(gate_env, api, held):
    decision_id = held["decision_id"]
    resolve = ("holds", "resolve", "--scope", SCOPE)
    _refused(_gate(gate_env, *resolve, "dec_does_not_exist", "--approve", "--reason-code", "OK_CODE", process=True),
             "HOLD_NOT_FOUND")
    _refused(_gate(gate_env, "holds", "show", "--scope", "tenant_b", decision_id), "HOLD_NOT_FOUND")
    for code in ("lower_case", "A", "HAS SPACE", "X" * 65):
        _refused(_gate(gate_env, *resolve, decision_id, "--approve", "--reason-code", code), "HOLD_RESOLUTION_INVALID")
    assert api.show(decision_id).get_json()["hold"]["state"] == "open"  # nothing was recorded
    _refused(_gate(gate_env, "holds", "list", "--scope", SCOPE, "--state", "pending"), "REQUEST_INVALID")
    assert _gate(gate_env, *resolve, decision_id, "--approve", "--reason-code", "FIRST").returncode == 0
    _refused(_gate(gate_env, *resolve, decision_id, "--deny", "--reason-code", "SECOND"), "HOLD_ALREADY_RESOLVED")
    _refused(_gate(gate_env, "holds", "claim", "--scope", SCOPE, decision_id), "HOLD_ALREADY_RESOLVED")
    limit = _gate(gate_env, "holds", "list", "--scope", SCOPE, "--limit", "0")
    assert limit.returncode == 2 and limit.stderr.strip() == "gate holds: CLI_REFUSED: --limit must be 1..500"


def test_resolve_takes_only_the_queue_s_reason_codes(gate_env, client, issue_key, api, held):
    """Issue 65: a queue's `reason_codes` hold for the local operator as for an API key: a code
    outside the list is one line naming the list, exit status 2, and nothing is recorded."""
    admin = Holds(client, issue_key(scope=SCOPE, permissions="admin")["api_key"])
    codes = {"approve": ["MARGIN_OK", "EXCEPTION_SIGNED"], "deny": ["TOO_THIN"]}
    assert admin.put_policy(policy({"default": {**queue(), "reason_codes": codes}})).status_code == 200
    decision_id = held["decision_id"]
    resolve = ("holds", "resolve", "--scope", SCOPE, decision_id)
    refused = _gate(gate_env, *resolve, "--approve", "--reason-code", "TOO_THIN", process=True)
    _refused(refused, "HOLD_RESOLUTION_INVALID")
    assert "approve codes: MARGIN_OK, EXCEPTION_SIGNED" in refused.stderr
    _refused(_gate(gate_env, *resolve, "--deny", "--reason-code", "MARGIN_OK"), "HOLD_RESOLUTION_INVALID")
    assert api.show(decision_id).get_json()["hold"]["events"] == []
    approved = _gate(gate_env, *resolve, "--approve", "--reason-code", "EXCEPTION_SIGNED")
    assert approved.returncode == 0 and approved.stdout.splitlines()[-1] == "the hold is approved", approved.stderr


def test_no_option_names_an_identity_and_a_vote_is_required(gate_env, held):
    named = _gate(gate_env, "holds", "resolve", "--scope", SCOPE, held["decision_id"], "--approve",
                  "--reason-code", "OK_CODE", "--as", "someone-else")
    assert named.returncode == 2 and "unrecognized arguments: --as someone-else" in named.stderr
    neither = _gate(gate_env, "holds", "resolve", "--scope", SCOPE, held["decision_id"], "--reason-code", "OK_CODE")
    assert neither.returncode == 2 and "one of the arguments --approve --deny is required" in neither.stderr
    both = _gate(gate_env, "holds", "resolve", "--scope", SCOPE, held["decision_id"], "--approve", "--deny",
                 "--reason-code", "OK_CODE")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_policy_is_shown_and_replaced_by_a_signed_operator_event(gate_env, caller, tmp_path):
    shown = json.loads(_gate(gate_env, "holds", "policy", "--scope", SCOPE, process=True).stdout)
    assert shown["event"] is None and shown["policy"]["default_queue"] == "default"
    wanted = policy({"default": queue(deadline=600), "finance": queue(quorum="two", justification=True)},
                    routes=[{"policy_id": "pricing_exception", "rule_id": None, "queue": "finance",
                             "priority": "high"}])
    (tmp_path / "policy.json").write_text(json.dumps(wanted))
    changed = _gate(gate_env, "holds", "policy", "--scope", SCOPE, "--set", str(tmp_path / "policy.json"))
    assert changed.returncode == 0, changed.stderr
    body = json.loads(changed.stdout)
    assert body["event"]["action"] == "policy_set" and body["event"]["actor"] == _operator()
    assert body["policy"]["queues"]["finance"]["quorum"] == "two"
    # the new route sends the next held decision to finance, at high priority
    assert caller.decide(held_request(subject="another")).get_json()["verdict"] == "review"
    listed = json.loads(_gate(gate_env, "holds", "list", "--scope", SCOPE, "--queue", "finance", "--json").stdout)
    assert listed["total"] == 1 and listed["holds"][0]["priority"] == "high"
    (tmp_path / "bad.json").write_text(json.dumps({**wanted, "default_queue": "nowhere"}))
    _refused(_gate(gate_env, "holds", "policy", "--scope", SCOPE, "--set", str(tmp_path / "bad.json")),
             "HOLD_POLICY_INVALID")
    unreadable = _gate(gate_env, "holds", "policy", "--scope", SCOPE, "--set", str(tmp_path / "missing.json"))
    assert unreadable.returncode == 2 and unreadable.stderr.startswith("gate holds: CLI_REFUSED: cannot read the hold policy")


def test_gate_verify_checks_the_scopes_hold_chain_offline(gate_env, client, api, held, tmp_path):
    decision_id = held["decision_id"]
    for step in (("claim",), ("resolve", "--approve", "--reason-code", "MARGIN_OK", "--note", "checked")):
        assert _gate(gate_env, "holds", step[0], "--scope", SCOPE, decision_id, *step[1:]).returncode == 0
    document = client.get("/api/holds/history", headers=api.h()).get_json()
    assert [e["action"] for e in document["events"]] == ["claim", "vote"]
    saved, keys = tmp_path / "history.json", tmp_path / "keys.json"
    saved.write_text(json.dumps(document))
    keys.write_bytes(client.get("/api/decision/receipt-keys").get_data())
    verified = _gate(gate_env, "verify", "--hold-history", str(saved), "--key-registry", str(keys), process=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "VERIFIED (2 events; holds closed: approved 1, denied 0, expired 0; 0 policy changes)" in verified.stdout
    assert f"  head         seq 2, signed as of {document['head']['as_of']}" in verified.stdout
    as_json = json.loads(_gate(gate_env, "verify", str(saved), "--key-registry", str(keys), "--json").stdout)
    assert as_json["verified"] is True and as_json["closed"]["approved"] == 1  # FILE itself is recognised
    unproven = _gate(gate_env, "verify", "--hold-history", str(saved))
    assert unproven.returncode == 1 and "NOT PROVEN (no trusted key)" in unproven.stdout
    document["events"][1]["note"] = "checkeD"
    saved.write_text(json.dumps(document))
    tampered = _gate(gate_env, "verify", "--hold-history", str(saved), "--key-registry", str(keys))
    assert tampered.returncode == 1 and "NOT VERIFIED" in tampered.stdout
    assert "event 2 (seq 2): event_hash does not match its content (tampered)" in tampered.stdout
    document["events"][1]["note"] = "checked"
    saved.write_text(json.dumps({**document, "events": document["events"][:1]}))  # the newest event cut off
    cut = _gate(gate_env, "verify", "--hold-history", str(saved), "--key-registry", str(keys))
    assert cut.returncode == 1 and "head: names seq 2, the document ends at seq 1" in cut.stdout
    saved.write_text(json.dumps({**document, "events": document["events"][1:]}))
    deleted = _gate(gate_env, "verify", "--hold-history", str(saved), "--key-registry", str(keys))
    assert deleted.returncode == 1 and "seq 2, expected 1 (gap or reorder)" in deleted.stdout
    both = _gate(gate_env, "verify", str(saved), "--hold-history", str(saved))
    assert both.returncode == 2 and both.stderr.strip() == ("gate verify: VERIFY_INPUT_UNREADABLE: give one file: FILE or "
                                                      "--hold-history FILE")
    neither = _gate(gate_env, "verify")
    assert neither.returncode == 2 and "give one file" in neither.stderr


def test_reassign_and_escalate_move_the_hold_between_the_policys_queues(gate_env, client, issue_key, caller, api):
    """The moves the API and the Inbox offer, from the shell: each a signed event by the operator;
    a queue the policy does not name, a queue with nowhere to escalate to and another scope's hold
    are refused in one line and record nothing."""
    wanted = policy({"default": queue(escalate_after=600, escalate_to="finance"), "finance": queue(quorum="two"),
                     "legal": queue()})
    admin = Holds(client, issue_key(scope=SCOPE, permissions="admin")["api_key"])
    stored = admin.put_policy(wanted)
    assert stored.status_code == 200, stored.get_json()
    decision_id = caller.decide(held_request()).get_json()["decision_id"]
    moved = _gate(gate_env, "holds", "reassign", "--scope", SCOPE, decision_id, "--queue", "legal", "--note",
                  "a contract question", process=True)
    assert moved.returncode == 0, moved.stderr
    assert f"reassign to legal by {_operator()}: a contract question" in moved.stdout.splitlines()[0]
    _refused(_gate(gate_env, "holds", "escalate", "--scope", SCOPE, decision_id), "HOLD_NOT_ESCALABLE")
    _refused(_gate(gate_env, "holds", "reassign", "--scope", SCOPE, decision_id, "--queue", "<b>nowhere</b>"),
             "HOLD_RESOLUTION_INVALID")
    _refused(_gate(gate_env, "holds", "reassign", "--scope", "tenant_b", decision_id, "--queue", "default"),
             "HOLD_NOT_FOUND")
    assert api.show(decision_id).get_json()["hold"]["queue"] == "legal"  # the refusals recorded nothing
    assert _gate(gate_env, "holds", "reassign", "--scope", SCOPE, decision_id, "--queue", "default").returncode == 0
    escalated = json.loads(_gate(gate_env, "holds", "escalate", "--scope", SCOPE, decision_id, "--json",
                                 process=True).stdout)
    assert escalated["event"]["action"] == "escalate" and escalated["event"]["queue"] == "finance"
    assert escalated["event"]["actor"] == _operator()
    hold = api.show(decision_id).get_json()["hold"]
    assert hold["queue"] == "finance" and hold["approvals_needed"] == 2 and hold["state"] == "open"
    assert [e["action"] for e in hold["events"]] == ["reassign", "reassign", "escalate"]


def test_reassign_to_a_looser_queue_is_refused_and_the_vote_stays(gate_env, client, issue_key, caller, api):
    """Issue 64 from the shell: a hold at 1 of 2 approvals reassigned to a one-approval queue was
    `0 of 1` and then approved by the same holder; now the move is refused in one line, the hold
    keeps its guard and its vote, and escalating it to a looser queue is refused the same way."""
    admin = Holds(client, issue_key(scope=SCOPE, permissions="admin")["api_key"])
    stored = admin.put_policy(policy({"default": queue(), "two": queue(quorum="two", escalate_after=600,
                                                                      escalate_to="default")},
                                     routes=[{"policy_id": "pricing_exception", "rule_id": None, "queue": "two",
                                              "priority": "normal"}]))
    assert stored.status_code == 200, stored.get_json()
    decision_id = caller.decide(held_request()).get_json()["decision_id"]
    voted = _gate(gate_env, "holds", "resolve", "--scope", SCOPE, decision_id, "--approve", "--reason-code", "OK")
    assert voted.returncode == 0, voted.stderr
    _refused(_gate(gate_env, "holds", "reassign", "--scope", SCOPE, decision_id, "--queue", "default"),
             "HOLD_MOVE_LOOSENS")
    _refused(_gate(gate_env, "holds", "escalate", "--scope", SCOPE, decision_id), "HOLD_MOVE_LOOSENS")
    hold = api.show(decision_id).get_json()["hold"]
    assert (hold["queue"], hold["approvals_needed"], len(hold["approvals"]), hold["state"]) == ("two", 2, 1, "open")
    _refused(_gate(gate_env, "holds", "resolve", "--scope", SCOPE, decision_id, "--approve", "--reason-code", "OK"),
             "HOLD_ALREADY_VOTED")


def test_list_filters_pages_and_refuses_bad_values_as_the_api_does(gate_env, caller, api):
    """Issue 65: the same order and filters as `GET /api/holds` (HoldService.list); `--mine` is the
    local operator's claims."""
    ids = []
    for n in range(3):
        answer = caller.decide(held_request(12 - n / 10))
        assert answer.status_code == 200
        ids.append(answer.get_json()["decision_id"])
    claim = _gate(gate_env, "holds", "claim", "--scope", SCOPE, ids[1])
    assert claim.returncode == 0, claim.stderr
    assert api.act(ids[2], "claim").status_code == 201

    def listed(*options: str) -> list[str]:
        run = _gate(gate_env, "holds", "list", "--scope", SCOPE, "--json", *options)
        assert run.returncode == 0, run.stderr
        return [hold["decision_id"] for hold in json.loads(run.stdout)["holds"]]

    assert listed("--mine") == [ids[1]] and listed("--unassigned") == [ids[0]]
    assert listed("--search", ids[2]) == [ids[2]] and listed("--priority", "urgent") == []
    assert listed("--policy", "nope") == [] and len(listed("--priority", "normal")) == 3
    assert listed("--limit", "1", "--offset", "1") == listed()[1:2]
    for options, code in ((("--priority", "top"), "REQUEST_INVALID"), (("--search", "a\tb"), "REQUEST_INVALID")):
        _refused(_gate(gate_env, "holds", "list", "--scope", SCOPE, *options), code)
    refused = _gate(gate_env, "holds", "list", "--scope", SCOPE, "--offset", "-1")
    assert refused.returncode == 2 and "--offset must be 0 or more" in refused.stderr
    both = _gate(gate_env, "holds", "list", "--scope", SCOPE, "--mine", "--unassigned")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
