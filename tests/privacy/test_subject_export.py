"""Issue 67, item 5: a data subject's data on request (GDPR Art. 15), on SQLite and PostgreSQL,
through HTTP (`POST /api/subjects/exports`) and `gate subject export` as a subprocess: every
decision of the scope whose request names the subject at the data map's `subject_key`, with the
members holding their values (request paths and record pointers), the hold of the held one, the
outbox events about them, and, with `--dataset`, the dataset rows found by the keyed hash the
export wrote. Another scope's subject is never read; a scope without a subject key, a malformed
body or cursor and a key without `admin` are refused with their codes; a key with markup or a
line break is data, in the JSON and on one line of the text."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest

from tests.privacy.support import CUSTOMER, EMAIL, OTHER_CUSTOMER, customer_request, privacy

ROUTE = "/api/subjects/exports"
MARKUP = "<b onclick=\"x\">cus</b>\r\nX-Injected: 1"


@pytest.fixture
def gate(make_app, backend):
    return make_app()


@pytest.fixture
def keys(issue_key):
    return {"a": {"x-api-key": issue_key(permissions="decide,admin")["api_key"]},
            "b": {"x-api-key": issue_key(scope="tenant_b", permissions="decide,admin")["api_key"]},
            "reader": {"x-api-key": issue_key()["api_key"]}}


def _decide(client, headers, body) -> dict:
    answer = client.post("/api/decide", json=body, headers=headers)
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()


def _set_up(client, keys) -> list[dict]:
    """Both scopes declare the map; tenant_a decides for the customer three times (one held), for
    another customer once; tenant_b decides for the same customer id once."""
    for name in ("a", "b"):
        assert client.put("/api/privacy", json=privacy(), headers=keys[name]).status_code == 200
    on = client.put("/api/events/settings", json={"decision_created": True, "anomaly_every_seconds": None},
                    headers=keys["a"])
    assert on.status_code == 200, on.get_json()
    records = [_decide(client, keys["a"], body) for body in (
        customer_request(), customer_request(held=True), customer_request(OTHER_CUSTOMER, "bob@example.org"),
        customer_request())]
    _decide(client, keys["b"], customer_request())
    return records


def _export(client, headers, **body):
    return client.post(ROUTE, json=body, headers=headers)


def test_a_subject_s_decisions_holds_and_events_with_the_members_holding_their_values(gate, keys, caplog):
    client = gate.test_client()
    records = _set_up(client, keys)
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        answer = _export(client, keys["a"], subject=CUSTOMER)
    assert CUSTOMER not in caplog.text and EMAIL not in caplog.text  # shown in the answer, never logged
    assert answer.status_code == 200, answer.get_json()
    body = answer.get_json()
    mine = [records[i]["decision_id"] for i in (0, 1, 3)]
    assert sorted(d["decision_id"] for d in body["decisions"]) == sorted(mine)
    assert body["next"] is None and body["subject_key"] == "context.customer_id"
    assert body["scanned"]["decisions"] == 4 and body["scanned"]["events"] >= len(body["events"]) > 0
    first = next(d for d in body["decisions"] if d["decision_id"] == records[0]["decision_id"])
    assert first["members"] == [{"path": "context.actor", "kind": "personal", "value": EMAIL},
                                {"path": "context.customer_id", "kind": "personal", "value": CUSTOMER},
                                {"path": "context.inputs.customer_email", "kind": "personal", "value": EMAIL}]
    assert {"/action_binding/actor", "/action_binding/subject"} <= set(first["record_members"])
    assert first["created_at"] == records[0]["created_at"] and first["rulebook"]["id"] == records[0]["policy_id"]
    [hold] = body["holds"]
    assert hold["hold_id"] == records[1]["decision_id"] and hold["state"] == "open"
    assert "/facts/customer_email" in hold["members"]
    types = {(e["decision_id"], e["type"].rsplit(".", 2)[-2] + "." + e["type"].rsplit(".", 1)[-1])
             for e in body["events"]}
    assert {(i, "decision.created") for i in mine} <= types
    assert (records[1]["decision_id"], "hold.opened") in types
    assert all(e["decision_id"] in mine for e in body["events"])  # the other customer's are not listed
    created = next(e for e in body["events"] if e["decision_id"] == records[0]["decision_id"])
    assert "/data/record/action_binding/subject" in created["members"]


def test_another_scope_s_subject_is_never_read_and_nothing_found_is_an_empty_answer(gate, keys):
    client = gate.test_client()
    records = _set_up(client, keys)
    theirs = _export(client, keys["b"], subject=CUSTOMER).get_json()
    assert len(theirs["decisions"]) == 1  # tenant_b's own decision for the same id, never tenant_a's
    assert theirs["decisions"][0]["decision_id"] not in {r["decision_id"] for r in records}
    nobody = _export(client, keys["a"], subject="cus_nobody")
    assert nobody.status_code == 200
    assert [nobody.get_json()[k] for k in ("decisions", "holds", "events")] == [[], [], []]


def test_a_bounded_page_goes_on_with_its_cursor_to_the_same_answer(gate, keys, monkeypatch):
    client = gate.test_client()
    _set_up(client, keys)
    whole = _export(client, keys["a"], subject=CUSTOMER).get_json()
    monkeypatch.setattr(gate.extensions["gate"].subjects, "page_rows", 2)  # the served service, built once
    pages, after = [], None
    while True:
        page = _export(client, keys["a"], subject=CUSTOMER, after=after).get_json()
        assert page["scanned"]["decisions"] + page["scanned"]["events"] <= 2
        pages.append(page)
        after = page["next"]
        if after is None:
            break
    assert len(pages) > 3
    for name in ("decisions", "holds", "events"):
        assert [item for page in pages for item in page[name]] == whole[name]


@pytest.mark.parametrize("body", [{}, {"subject": ""}, {"subject": 7}, {"subject": "x" * 513},
                                  {"subject": CUSTOMER, "scope": "tenant_b"}, {"subject": CUSTOMER, "after": "nope"},
                                  {"subject": CUSTOMER, "after": "WyJlIiwtMV0"}, []])
def test_a_malformed_body_or_cursor_is_refused(gate, keys, body):
    client = gate.test_client()
    _set_up(client, keys)
    answer = client.post(ROUTE, json=body, headers=keys["a"])
    assert answer.status_code == 400 and answer.get_json()["error"] == "SUBJECT_EXPORT_INVALID", answer.get_json()


def test_a_scope_without_a_subject_key_and_a_key_without_admin_are_refused(gate, keys):
    client = gate.test_client()
    undeclared = _export(client, keys["a"], subject=CUSTOMER)
    assert undeclared.status_code == 409 and undeclared.get_json()["error"] == "SUBJECT_KEY_UNDECLARED"
    _set_up(client, keys)
    denied = _export(client, keys["reader"], subject=CUSTOMER)
    assert denied.status_code == 403 and denied.get_json()["error"] == "PRIVACY_PERMISSION_DENIED"
    assert client.post(ROUTE, json={"subject": CUSTOMER}).status_code == 401


def test_a_key_with_markup_and_a_line_break_is_data(gate, keys):
    client = gate.test_client()
    _set_up(client, keys)
    made = _decide(client, keys["a"], customer_request(MARKUP, "carol@example.org"))
    answer = _export(client, keys["a"], subject=MARKUP)
    assert answer.status_code == 200 and answer.mimetype == "application/json"
    body = answer.get_json()
    assert body["subject"] == MARKUP and [d["decision_id"] for d in body["decisions"]] == [made["decision_id"]]
    assert b"\r" not in answer.data and json.loads(answer.data)["subject"] == MARKUP  # escaped, as JSON does


# ----------------------------------------------------------------------- the command line


def _gate(gate_env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gate_cli.main", *args], capture_output=True, text=True,
                          env={**os.environ, **gate_env}, timeout=300, check=False)


@pytest.mark.parametrize("layout", ["parquet", "iceberg"])
def test_the_command_lists_the_subject_s_data_from_the_ledger_and_the_dataset(gate, keys, gate_env, tmp_path, layout):
    client = gate.test_client()
    records = _set_up(client, keys)
    root = tmp_path / "dataset"
    exported = _gate(gate_env, "export", "--out", str(root), "--settle-seconds", "0", "--format", layout)
    assert exported.returncode == 0, exported.stderr
    run = _gate(gate_env, "subject", "export", CUSTOMER, "--scope", "tenant_a", "--dataset", str(root),
                "--format", "json")
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    over_http = _export(client, keys["a"], subject=CUSTOMER).get_json()
    for name in ("decisions", "holds", "events"):
        assert document[name] == over_http[name]
    mine = {records[i]["decision_id"] for i in (0, 1, 3)}
    rows = document["dataset"]
    assert {r["decision_id"] for r in rows if r["table"] == "decisions"} == mine
    assert {r["decision_id"] for r in rows if r["table"].startswith("facts/")} == mine
    decision_row = next(r for r in rows if r["table"] == "decisions")
    assert "/facts_json/customer_email" in decision_row["members"]
    assert any("customer_email::s" in r["members"] for r in rows if r["table"].startswith("facts/"))
    assert EMAIL not in run.stderr and CUSTOMER not in run.stderr  # the values are printed, never logged
    text = _gate(gate_env, "subject", "export", CUSTOMER, "--scope", "tenant_a")
    assert text.returncode == 0 and f"context.inputs.customer_email (personal) = \"{EMAIL}\"" in text.stdout


def test_the_command_s_exit_statuses(gate, keys, gate_env):
    client = gate.test_client()
    undeclared = _gate(gate_env, "subject", "export", CUSTOMER, "--scope", "tenant_a")
    assert undeclared.returncode == 2
    assert undeclared.stderr.startswith("gate subject: SUBJECT_KEY_UNDECLARED: ") and undeclared.stdout == ""
    _set_up(client, keys)
    nothing = _gate(gate_env, "subject", "export", "cus_nobody", "--scope", "tenant_a")
    assert nothing.returncode == 3 and "nothing of this subject was found" in nothing.stdout
    elsewhere = _gate(gate_env, "subject", "export", CUSTOMER, "--scope", "tenant_c", "--format", "json")
    assert elsewhere.returncode == 2 and "SUBJECT_KEY_UNDECLARED" in elsewhere.stderr
    empty = _gate(gate_env, "subject", "export", "", "--scope", "tenant_a")
    assert empty.returncode == 2 and empty.stderr.startswith("gate subject: SUBJECT_EXPORT_INVALID: ")
    missing = _gate(gate_env, "subject", "export", CUSTOMER, "--scope", "tenant_a", "--dataset", "/nonexistent/ds")
    assert missing.returncode == 2 and missing.stderr.startswith("gate subject: DATASET_INVALID: ")


def test_the_command_prints_a_key_with_markup_and_a_line_break_as_data(gate, keys, gate_env):
    client = gate.test_client()
    _set_up(client, keys)
    _decide(client, keys["a"], customer_request(MARKUP, "carol@example.org"))
    run = _gate(gate_env, "subject", "export", MARKUP, "--scope", "tenant_a")
    assert run.returncode == 0, run.stderr
    assert "\r" not in run.stdout and "\nX-Injected" not in run.stdout
    assert json.dumps(MARKUP, ensure_ascii=False) in run.stdout.splitlines()[0]


def test_a_dataset_row_is_found_by_the_subject_s_keyed_hash_alone(gate, keys, tmp_path):
    """A subject key among the facts: the dataset's row is found by the token the export wrote,
    with no decision id from the ledger (what a row whose ledger request is gone still gives)."""
    from gate.services.subjects import subject_tokens
    from workbench.dataset.export import export_ledger
    from workbench.dataset.subjects import dataset_rows

    client = gate.test_client()
    by_email = {**privacy(), "data_map": {"members": {}, "subject_key": "context.inputs.customer_email"}}
    assert client.put("/api/privacy", json=by_email, headers=keys["a"]).status_code == 200
    mine = _decide(client, keys["a"], customer_request())
    _decide(client, keys["a"], customer_request(OTHER_CUSTOMER, "bob@example.org"))
    runtime = gate.extensions["gate"]
    root = str(tmp_path / "dataset")
    export_ledger(runtime.ledger, root, signer=None, settle_seconds=0, privacy_key=runtime.privacy.key)
    tokens = subject_tokens(runtime.privacy, "tenant_a", EMAIL)
    rows = dataset_rows(root, "tenant_a", [], tokens)
    assert [(r["table"], r["decision_id"]) for r in rows] == [("decisions", mine["decision_id"]),
                                                              ("facts/pricing_exception", mine["decision_id"])]
    assert rows[0]["members"] == ["/facts_json/customer_email"] and rows[1]["members"] == ["customer_email::s"]
    assert dataset_rows(root, "tenant_b", [], tokens) == []  # another scope's rows are not read
    assert dataset_rows(root, "tenant_a", [], subject_tokens(runtime.privacy, "tenant_b", EMAIL)) == []
