"""Issue 67, item 2, the hold notices: a queue's `show` (issue 65) is one destination of the data
map's rule, not a second home. With `customer_email` personal and `customer_id` the subject's key,
a queue that names the e-mail fact and the target still sends neither value, by real SMTP or to a
Slack recorder, while the governed `notices` rule drops them; once a second holder approves
hashing them, the channels carry the keyed token and never the value. On SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest

from gate.privacy.masking import scope_key, token
from tests.holds.support import Holds, policy, queue
from tests.holds.test_channels import SECRET, _channels, _pass, grants, slack_api, smtp  # noqa: F401 - fixtures
from tests.privacy.support import CUSTOMER, EMAIL, customer_request, privacy

SHOW = ["requested_action", "target_object_id", "facts.customer_email", "facts.margin_percent"]


@pytest.fixture
def gate(make_app, backend, smtp, slack_api, grants):  # noqa: F811
    return make_app({"GATE_SMTP_URL": smtp.url, "GATE_SMTP_FROM": "gate@example.org",
                     "GATE_SLACK_BOT_TOKEN": "xoxb-test", "GATE_SLACK_API_URL": slack_api.url,
                     "GATE_SLACK_SIGNING_SECRET": SECRET, "GATE_GRANTS_FILE": str(grants)})


@pytest.fixture
def keys(issue_key):
    return {"admin": issue_key(permissions="decide,admin,approve,release", holder="service:alice")["api_key"],
            "bob": issue_key(permissions="approve", holder="service:bob")["api_key"]}


def _told(gate, keys, smtp, slack_api):  # noqa: F811
    body = customer_request(held=True)
    body["context"]["target_object_id"] = CUSTOMER
    record = Holds(gate.test_client(), keys["admin"]).decide(body).get_json()
    assert record["verdict"] == "review", record
    assert _pass(gate, "email") == 1 and _pass(gate, "slack") == 1
    (_, message), = smtp.messages[-1:]
    (_, data, _), = slack_api.calls[-1:]
    # the e-mail decoded (its parts are quoted-printable: a byte search of the wire form could miss
    # a value split across lines) and as sent; the Slack call as the recorder received it
    decoded = "\n".join([str(message["Subject"]), message.get_body(("plain",)).get_content(),
                         message.get_body(("html",)).get_content()])
    return decoded.encode() + message.as_bytes(), json.dumps(data, ensure_ascii=False).encode()


def test_a_queue_that_shows_a_personal_fact_still_sends_no_personal_value(gate, keys, smtp, slack_api):  # noqa: F811
    client = gate.test_client()
    h = {"x-api-key": keys["admin"]}
    assert client.put("/api/privacy", json=privacy(), headers=h).status_code == 200
    hold_policy = policy({"default": {**queue(), "notify": _channels(), "show": SHOW}})
    assert client.put("/api/holds/policy", json=hold_policy, headers=h).status_code == 200
    mail, slack = _told(gate, keys, smtp, slack_api)
    for told in (mail, slack):
        assert EMAIL.encode() not in told and CUSTOMER.encode() not in told
    text = smtp.messages[-1][1].get_body(("plain",)).get_content()
    assert '"customer_email": •••' in text and '"margin_percent": 12' in text  # nobody's data is shown
    assert "Target object: •••" in text and "Requested action: apply_discount" in text
    # hashing them in the notices lets more out: a second holder approves it
    assert client.patch("/api/decision/release-policy", json={"require_approval": True}, headers=h).status_code == 200
    asked = client.put("/api/privacy", json=privacy(notices={"personal": "hash", "sensitive": "drop"}), headers=h)
    assert asked.status_code == 202, asked.get_json()
    approved = client.post("/api/privacy/approvals", json={"request_seq": asked.get_json()["event"]["seq"]},
                           headers={"x-api-key": keys["bob"]})
    assert approved.status_code == 200, approved.get_json()
    mail, slack = _told(gate, keys, smtp, slack_api)
    hashed = token(scope_key(gate.extensions["gate"].privacy.key, "tenant_a"), EMAIL)
    for told in (mail, slack):
        assert EMAIL.encode() not in told and CUSTOMER.encode() not in told
        assert hashed.encode() in told
