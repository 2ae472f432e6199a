"""Issue 64 item 6: one outbound client for every party (gate.events.outbound). A host is resolved
once and the connection goes to the address checked; a redirect is followed only when the caller
asks, each hop checked anew; the operator's URLs are checked at start. Driven with resolvers that
change their answer, and with real receivers on loopback that count what reaches them."""

from __future__ import annotations

import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gate import oidc
from gate.errors import GateError
from gate.events.outbound import Outbound, check_operator_urls
from gate.events.targets import TargetRefused
from gate.services.slack_actions import responder
from gate.settings import Settings, SettingsError

PUBLIC = "93.184.216.34"  # a global address; nothing answers it from here


class _Handler(BaseHTTPRequestHandler):
    def _answer(self):
        length = int(self.headers.get("content-length") or 0)
        self.server.hits.append((self.command, self.path, self.rfile.read(length)))
        status, headers, body = self.server.answers.get(self.path, (200, {}, b'{"ok": true}'))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


@pytest.fixture
def servers():
    """Two receivers on loopback, each recording every request that reaches it."""
    made = []

    def start():
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.hits, server.answers = [], {}
        server.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.append(server)
        return server

    yield start
    for server in made:
        server.shutdown()
        server.server_close()


class Changing:
    """A resolver whose first answer is `first` and every later one `later` (DNS rebinding)."""

    def __init__(self, first, later):
        self.first, self.later, self.calls = first, later, 0

    def __call__(self, host, port):
        self.calls += 1
        return [self.first] if self.calls == 1 else [self.later]


def test_a_resolver_that_changes_its_answer_never_moves_the_connection_inside(servers):
    inside = servers()
    resolve = Changing(PUBLIC, "127.0.0.1")
    client = Outbound(resolve=resolve)
    with pytest.raises(OSError):
        client.request("POST", f"http://hooks.example:{inside.port}/x", b"{}", timeout=1.0)
    assert resolve.calls == 1 and inside.hits == []  # resolved once, checked public, connected there
    # The Slack response_url takes the same path: checked on hooks.slack.com, never posted to loopback.
    resolve = Changing(PUBLIC, "127.0.0.1")
    respond = responder("https://slack.com/api/", Outbound(resolve=resolve), timeout=1.0)
    with pytest.raises(OSError):
        respond(f"https://hooks.slack.com:{inside.port}/actions/T1/B1/x", "text")
    assert resolve.calls == 1 and inside.hits == []
    # And the connection goes where the checked answer says (an allowed name answered by loopback).
    allowed = Outbound({"hooks.example"}, resolve=lambda host, port: ["127.0.0.1"])
    assert allowed.request("POST", f"http://hooks.example:{inside.port}/y", b"{}").status == 200
    assert inside.hits == [("POST", "/y", b"{}")]


def test_an_answer_inside_is_refused_before_any_connection(servers):
    inside = servers()
    for address in ("127.0.0.1", "169.254.169.254", "10.0.0.1", "::1", "2600::5efe:7f00:1"):
        with pytest.raises(TargetRefused) as refused:
            Outbound(resolve=lambda host, port, a=address: [a]).request("GET", f"http://hooks.example:{inside.port}/")
        assert "GATE_OUTBOUND_ALLOW_HOSTS" in refused.value.message
    assert inside.hits == []


def test_a_redirect_is_not_followed_unless_asked_and_each_hop_is_checked(servers):
    first, second = servers(), servers()
    first.answers["/doc"] = (302, {"Location": f"http://127.0.0.1:{second.port}/inside"}, b"")
    only_first = Outbound({"localhost"}, resolve=lambda host, port: ["127.0.0.1"])
    # Not asked: the 302 is the answer (the Slack response_url, the Web API, webhooks).
    assert only_first.request("POST", f"http://localhost:{first.port}/doc", b"{}").status == 302
    # Asked: the hop to 127.0.0.1 is checked as a first request would be, and refused.
    with pytest.raises(ValueError, match="GATE_OUTBOUND_ALLOW_HOSTS"):
        oidc.fetch_json(f"http://localhost:{first.port}/doc", outbound=only_first)
    assert second.hits == []
    # A hop to a host that is allowed is followed (a 302 of a POST continues as a GET).
    both = Outbound({"localhost", "127.0.0.1"}, resolve=lambda host, port: ["127.0.0.1"])
    assert oidc.fetch_json(f"http://localhost:{first.port}/doc", outbound=both) == {"ok": True}
    assert second.hits == [("GET", "/inside", b"")]
    # Each hop keeps the issuers' rule too: https, or http on loopback only.
    first.answers["/down"] = (302, {"Location": "http://issuer.example/doc"}, b"")
    with pytest.raises(ValueError, match="must be https"):
        oidc.fetch_json(f"http://localhost:{first.port}/down", outbound=both)
    # No more than MAX_REDIRECTS hops.
    first.answers["/loop"] = (302, {"Location": "/loop"}, b"")
    with pytest.raises(ValueError, match="answers 302"):
        oidc.fetch_json(f"http://localhost:{first.port}/loop", outbound=both)
    assert sum(1 for hit in first.hits if hit[1] == "/loop") == oidc.MAX_REDIRECTS + 1


def test_a_slack_response_url_that_redirects_is_not_followed(servers):
    slack, inside = servers(), servers()
    slack.answers["/respond"] = (307, {"Location": f"http://127.0.0.1:{inside.port}/admin"}, b"")
    api = f"http://127.0.0.1:{slack.port}/api/"
    respond = responder(api, Outbound({"127.0.0.1"}))
    with pytest.raises(OSError, match="307"):
        respond(f"http://127.0.0.1:{slack.port}/respond", "text")
    assert [hit[:2] for hit in slack.hits] == [("POST", "/respond")] and inside.hits == []
    told = json.loads(slack.hits[0][2])
    assert told == {"text": "text", "response_type": "ephemeral", "replace_original": False}
    slack.answers["/fails"] = (500, {}, b"")
    with pytest.raises(OSError, match="500"):
        respond(f"http://127.0.0.1:{slack.port}/fails", "text")
    respond(f"http://127.0.0.1:{slack.port}/ok", "text")  # a 200 is the success
    # Allowed for the Slack API host does not mean allowed for hooks.slack.com's answers.
    with pytest.raises(TargetRefused):
        responder(api, Outbound({"127.0.0.1"}, resolve=lambda h, p: ["127.0.0.1"]))(
            "https://hooks.slack.com/x", "text")


@pytest.mark.parametrize("env, setting", [
    ({"GATE_SLACK_BOT_TOKEN": "xoxb-t", "GATE_SLACK_API_URL": "http://127.0.0.1:9/api/"}, "GATE_SLACK_API_URL"),
    ({"GATE_SLACK_SIGNING_SECRET": "s" * 32, "GATE_SLACK_API_URL": "https://10.1.2.3/api/"}, "GATE_SLACK_API_URL"),
    ({"GATE_SMTP_URL": "smtp://192.168.0.5:25", "GATE_SMTP_FROM": "g@example.org"}, "GATE_SMTP_URL"),
    ({"GATE_SMTP_URL": "smtps://u:p@[::1]", "GATE_SMTP_FROM": "g@example.org"}, "GATE_SMTP_URL"),
    ({"GATE_CI_ISSUER": "https://169.254.169.254", "GATE_CI_AUDIENCE": "a", "GATE_GRANTS_FILE": "g.json"},
     "GATE_CI_ISSUER"),
    ({"GATE_CI_ISSUER": "http://localhost:9", "GATE_CI_AUDIENCE": "a", "GATE_GRANTS_FILE": "g.json"},
     "GATE_CI_ISSUER"),
])
def test_internal_operator_urls_are_refused_at_start_unless_allowed(make_app, env, setting):
    with pytest.raises(SettingsError) as refused:
        make_app({**env, "GATE_OUTBOUND_ALLOW_HOSTS": ""})
    assert refused.value.message.startswith(setting) and "GATE_OUTBOUND_ALLOW_HOSTS" in refused.value.message
    host = {"GATE_SLACK_API_URL": "GATE_SLACK_API_URL", "GATE_SMTP_URL": "GATE_SMTP_URL",
            "GATE_CI_ISSUER": "GATE_CI_ISSUER"}[setting]
    from urllib.parse import urlsplit

    allowed = urlsplit(env[host]).hostname
    settings = Settings.from_env({**env, "GATE_OUTBOUND_ALLOW_HOSTS": f"{allowed},other.example"})
    check_operator_urls(settings)  # named by the operator: taken


def test_operator_urls_are_judged_by_what_they_resolve_to():
    settings = Settings.from_env({"GATE_SLACK_BOT_TOKEN": "xoxb-t", "GATE_SLACK_API_URL": "https://slack.test/api/"})
    check_operator_urls(settings, resolve=lambda host, port: [PUBLIC])
    with pytest.raises(ValueError, match=r"GATE_SLACK_API_URL.*10\.9\.9\.9"):
        check_operator_urls(settings, resolve=lambda host, port: [PUBLIC, "10.9.9.9"])

    def unknown(host, port):
        raise OSError("no DNS here")

    check_operator_urls(settings, resolve=unknown)  # not resolvable yet: each connection checks again
    assert check_operator_urls(Settings.from_env({}), resolve=unknown) is None  # nothing configured


def _issuer_with(servers, jwks_uri):
    issuer = servers()
    url = f"http://127.0.0.1:{issuer.port}"
    document = {"issuer": url, "jwks_uri": jwks_uri, "id_token_signing_alg_values_supported": ["RS256"]}
    issuer.answers["/.well-known/openid-configuration"] = (200, {"content-type": "application/json"},
                                                           json.dumps(document).encode())
    return issuer, url


def test_a_jwks_uri_on_the_metadata_address_is_refused(make_app, servers, tmp_path, caplog):
    """The CI issuer's discovery names https://169.254.169.254/... as its JWKS: a CI token is
    refused (401) and the gate never connects there, though the issuer's host is allowed."""
    grants = tmp_path / "grants.json"
    grants.write_text(json.dumps({"ci": {}}))
    issuer, url = _issuer_with(servers, "https://169.254.169.254/latest/meta-data/keys")
    app = make_app({"GATE_CI_ISSUER": url, "GATE_CI_AUDIENCE": "https://gate.test/ci", "GATE_GRANTS_FILE": str(grants)})
    token = "eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJ4In0.c2ln"
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="gate.api"):
        answer = app.test_client().get("/api/decision/release-policy", headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 401
    assert time.monotonic() - started < 5  # refused at once, never a connection left to time out
    refused = [r.getMessage() for r in caplog.records if "CI token was refused" in r.getMessage()]
    assert refused and "169.254.169.254" in refused[0] and "GATE_OUTBOUND_ALLOW_HOSTS" in refused[0]
    assert [hit[1] for hit in issuer.hits] == ["/.well-known/openid-configuration"]


def test_fetch_json_refuses_what_an_issuer_may_not_answer(servers):
    issuer = servers()
    base = f"http://127.0.0.1:{issuer.port}"
    client = Outbound({"127.0.0.1"})
    issuer.answers["/big"] = (200, {}, b"{" + b" " * oidc.MAX_DOCUMENT_BYTES + b"}")
    issuer.answers["/edge"] = (200, {}, b"{" + b" " * (oidc.MAX_DOCUMENT_BYTES - 2) + b"}")
    issuer.answers["/list"] = (200, {}, b"[]")
    issuer.answers["/text"] = (200, {}, b"not json")
    issuer.answers["/gone"] = (404, {}, b"{}")
    assert oidc.fetch_json(base + "/edge", outbound=client) == {}  # exactly the limit: read
    for path, message in (("/big", "more than"), ("/list", "JSON object"), ("/text", "not answer JSON"),
                          ("/gone", "answers 404")):
        with pytest.raises(ValueError, match=message):
            oidc.fetch_json(base + path, outbound=client)
    with pytest.raises(ValueError, match="https"):
        oidc.fetch_json("http://issuer.example/x", outbound=client)  # http only on loopback
    with pytest.raises(ValueError, match="cannot read"):
        oidc.fetch_json(f"http://127.0.0.1:{issuer.port + 1 if issuer.port < 65535 else 1}/x", outbound=client)


def test_slack_api_calls_go_through_the_client(servers):
    from gate.events.notices import SlackAPI

    slack = servers()
    api = SlackAPI("xoxb-t", f"http://slack.test:{slack.port}/api", Outbound(resolve=lambda h, p: ["127.0.0.1"]))
    with pytest.raises(GateError) as refused:
        api.chat_update(channel="C1", ts="1")
    assert refused.value.code == "EVENT_TARGET_REFUSED" and slack.hits == []
    api.outbound = Outbound({"slack.test"}, resolve=lambda h, p: ["127.0.0.1"])
    assert api.chat_postMessage(channel="C1", text="t")["ok"] is True
    assert slack.hits[0][:2] == ("POST", "/api/chat.postMessage") and json.loads(slack.hits[0][2])["channel"] == "C1"
    slack.answers["/api/chat.update"] = (200, {}, b'{"ok": false, "error": "message_not_found"}')
    with pytest.raises(OSError, match="message_not_found"):
        api.chat_update(channel="C1", ts="1")
    slack.answers["/api/chat.update"] = (302, {"Location": "http://127.0.0.1/"}, b"")
    with pytest.raises(OSError, match="302"):
        api.chat_update(channel="C1", ts="1")
