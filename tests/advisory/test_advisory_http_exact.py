"""Exact tests of the HTTP LLM advisor (gate/advisory/http.py) called directly: its exchange
over HTTPS (a local TLS server whose CA the test makes and trusts), the failure messages a failed
vote carries, and the exchange deadline's sockets and timer."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import time

import pytest

from gate.advisory.advisors import AdvisoryQuestion
from gate.advisory.http import SYSTEM_PROMPT, AdvisorFailure, HttpLLMAdvisor, _Deadline, _shut
from gate.protocol.canonical import canonical_text
from gate.rulebook.patterns import load_patterns
from tests.advisory.fake_llm import FakeLLM
from tests.tls_support import tls_files as write_tls_files

QUESTION = AdvisoryQuestion("single", "Approve the refund?", {"inputs": {"amount": 5}}, {}, None)


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    """A CA (trusted through SSL_CERT_FILE, as a deployment's CA bundle) and a server certificate
    it signed for 127.0.0.1."""
    return write_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture
def tls_llm(tls_files, monkeypatch):
    """The fake provider behind TLS, its CA trusted by the default context (as a CA bundle is)."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files / "ca.pem"))
    fake = FakeLLM()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls_files / "server.pem")
    # The handshake runs in the handler's thread, on its first read.
    fake.server.socket = context.wrap_socket(fake.server.socket, server_side=True,
                                             do_handshake_on_connect=False)
    fake.url = fake.url.replace("http://", "https://")
    with fake:
        yield fake


def test_an_https_provider_is_asked_and_answers_a_vote(tls_llm):
    answer = {"decision": "no", "rationale": "Too generous.", "evidence": ["RISK"]}
    tls_llm.behaviour["model-a"] = ("answer", answer)
    advisor = HttpLLMAdvisor(tls_llm.url, "model-a", api_key="sk-tls-1", timeout=5)
    vote = advisor.advise(QUESTION)
    assert (vote.status, vote.decision, vote.rationale, vote.evidence, vote.error) == (
        "ok", "no", "Too generous.", ("RISK",), None)
    assert vote.details["provider"] == "127.0.0.1:" + tls_llm.url.split(":")[2].split("/")[0]
    assert [sent["path"] for sent in tls_llm.requests] == ["/v1/chat/completions"]
    assert tls_llm.requests[0]["headers"]["Authorization"] == "Bearer sk-tls-1"


def test_an_https_provider_whose_certificate_is_not_trusted_is_unreachable(tls_llm, monkeypatch, tmp_path):
    # Only the test CA makes the TLS tests pass: without it the certificate is refused.
    other = tmp_path / "empty.pem"
    other.write_text("")
    monkeypatch.setenv("SSL_CERT_FILE", str(other))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    tls_llm.behaviour["model-a"] = ("answer", {"decision": "yes", "rationale": "fine"})
    tls_llm.server.handle_error = lambda request, address: None  # the refused handshake, on the server's side
    vote = HttpLLMAdvisor(tls_llm.url, "model-a", timeout=5).advise(QUESTION)
    assert (vote.status, vote.decision, vote.error, vote.rationale) == (
        "failed", "review", "ADVISOR_UNREACHABLE", "provider unreachable")


def test_a_slow_loris_https_provider_is_cut_at_the_deadline(tls_llm):
    # One byte every 0.1 s: about 15 s for the whole answer, each read well inside the timeout.
    # The deadline shuts the TLS connection's socket at 1 s.
    tls_llm.behaviour["model-a"] = ("trickle", 0.1)
    started = time.monotonic()
    vote = HttpLLMAdvisor(tls_llm.url, "model-a", timeout=1).advise(QUESTION)
    elapsed = time.monotonic() - started
    assert (vote.status, vote.error, vote.rationale) == ("failed", "ADVISOR_TIMEOUT", "no answer within 1 s")
    assert elapsed < 2.5, elapsed


@pytest.fixture
def llm():
    with FakeLLM() as fake:
        yield fake


@pytest.mark.parametrize("behaviour, error, rationale", [
    (("status", 503), "ADVISOR_HTTP_STATUS", "provider answered HTTP 503"),
    (("raw", b"{" + b" " * 300_000 + b"}"), "ADVISOR_RESPONSE_INVALID", "provider answer exceeds 256 KiB"),
    (("content", "[1, 2]"), "ADVISOR_RESPONSE_INVALID", "the model's content is not a JSON object"),
])
def test_a_failed_vote_carries_its_failures_message(llm, behaviour, error, rationale):
    llm.behaviour["model-a"] = behaviour
    vote = HttpLLMAdvisor(llm.url, "model-a", timeout=60).advise(QUESTION)  # the failure under test strikes first
    assert (vote.status, vote.decision, vote.error, vote.rationale, vote.evidence) == (
        "failed", "review", error, rationale, ())


def test_an_advisor_failure_is_its_message_with_its_code():
    failure = AdvisorFailure("ADVISOR_TIMEOUT", "no answer within 3 s")
    assert (str(failure), failure.args, failure.code) == ("no answer within 3 s", ("no answer within 3 s",),
                                                          "ADVISOR_TIMEOUT")


def _completion(content) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()


@pytest.mark.parametrize("raw, message", [
    (b"\xff not utf-8", "provider answer is not a chat completion with JSON content"),
    (b'{"choices": []}', "provider answer is not a chat completion with JSON content"),
    (_completion("not json"), "provider answer is not a chat completion with JSON content"),
    # content that is JSON already (no string): not parsed again, so not an answer object
    (_completion({"decision": "yes", "rationale": "inline"}), "the model's content is not a JSON object"),
    (_completion(["yes"]), "the model's content is not a JSON object"),
    (_completion(7), "the model's content is not a JSON object"),
    (_completion('"yes"'), "the model's content is not a JSON object"),
    (_completion('{"decision": "approve", "rationale": "x"}'),
     "the model's decision is not yes, no or review"),
    (_completion('{"decision": "yes", "rationale": "  "}'), "the model gave no rationale"),
    (_completion('{"decision": "yes", "rationale": "x", "evidence": ["ok"]}'),
     "evidence must be a list of UPPER_SNAKE reason codes"),
    (_completion('{"decision": "yes", "rationale": "x", "evidence": "RISK"}'),
     "evidence must be a list of UPPER_SNAKE reason codes"),
    (_completion('{"decision": "yes", "rationale": "x", "evidence": {"RISK_CODE": true}}'),
     "evidence must be a list of UPPER_SNAKE reason codes"),
    (_completion('{"decision": "yes", "rationale": "x", "evidence": ""}'),
     "evidence must be a list of UPPER_SNAKE reason codes"),
])
def test_each_invalid_answer_fails_with_its_own_message(raw, message):
    with pytest.raises(AdvisorFailure) as caught:
        HttpLLMAdvisor._parse(raw)
    assert (caught.value.code, str(caught.value)) == ("ADVISOR_RESPONSE_INVALID", message)


def test_a_valid_answer_is_trimmed_bounded_and_deduplicated():
    evidence = [f"CODE_{index}" for index in range(10)]
    raw = _completion(json.dumps({"decision": "review", "rationale": "  " + "r" * 600 + "  ",
                                  "evidence": ["CODE_1", *evidence]}))
    decision, rationale, codes = HttpLLMAdvisor._parse(raw)
    assert (decision, rationale) == ("review", "r" * 500)
    assert codes == ("CODE_1", "CODE_0", "CODE_2", "CODE_3", "CODE_4", "CODE_5", "CODE_6", "CODE_7")


def _expired(seconds: float = 0.05) -> _Deadline:
    deadline = _Deadline(seconds)
    deadline.__enter__()
    limit = time.monotonic() + 5
    while not deadline.expired and time.monotonic() < limit:
        time.sleep(0.01)
    assert deadline.expired
    return deadline


def test_a_socket_registered_after_the_deadline_is_shut_at_once():
    # A connection that completes just after the deadline passed must not outlive it.
    ours, peer = socket.socketpair()
    with ours, peer:
        deadline = _expired()
        try:
            deadline.register(ours)
        finally:
            deadline.__exit__(None, None, None)
        peer.settimeout(2)
        assert peer.recv(1) == b""  # our side's write half is shut: the peer reads the end
        ours.settimeout(2)
        assert ours.recv(1) == b""  # and our read half: a read ends at once


def test_a_socket_registered_before_the_deadline_is_shut_when_it_passes():
    ours, peer = socket.socketpair()
    with ours, peer, _Deadline(0.05) as deadline:
        deadline.register(ours)
        ours.settimeout(3)
        started = time.monotonic()
        assert ours.recv(1) == b""  # nothing is sent: the read ends only by the deadline's shutdown
        assert deadline.expired and time.monotonic() - started < 2.5


def test_shutting_a_socket_that_is_closed_or_not_connected_raises_nothing():
    # The deadline shuts every socket of the exchange, whatever state its connection is in.
    unconnected = socket.socket()
    closed = socket.socket()
    closed.close()
    with unconnected:
        _shut(unconnected)
        _shut(closed)
        deadline = _expired()
        try:
            deadline.register(unconnected)
            deadline.register(closed)
        finally:
            deadline.__exit__(None, None, None)


def test_an_exchange_in_flight_holds_no_thread_the_interpreter_would_wait_for(llm):
    # The deadline's timer is a daemon thread: a pending exchange never holds the process's exit.
    llm.behaviour["model-a"] = ("sleep", 0.6)
    votes = []
    worker = threading.Thread(target=lambda: votes.append(
        HttpLLMAdvisor(llm.url, "model-a", timeout=5).advise(QUESTION)), daemon=True)
    worker.start()
    limit = time.monotonic() + 5
    while not llm.requests and time.monotonic() < limit:
        time.sleep(0.01)
    timers = [thread for thread in threading.enumerate() if isinstance(thread, threading.Timer)]
    worker.join(10)
    assert timers and all(timer.daemon for timer in timers)
    assert [(vote.status, vote.decision, vote.rationale) for vote in votes] == [("ok", "yes", "late")]


def test_the_request_is_exactly_the_chat_completion_the_module_documents(llm):
    pattern = load_patterns().patterns[0]
    context = {"inputs": {"amount": 5}, "workflow": "refund"}
    question = AdvisoryQuestion("runtime", "Rembourser Zoë ?", context, {"amount": 5}, pattern)
    llm.behaviour["model-a"] = ("answer", {"decision": "yes", "rationale": "ok"})
    advisor = HttpLLMAdvisor(llm.url + "/", "model-a", timeout=5)
    assert advisor.advise(question).status == "ok"
    user = {"mode": "runtime", "question": "Rembourser Zoë ?",
            "context": {"inputs": {"amount": 5}, "workflow": "refund"},
            "policy_pattern": {"pattern_id": pattern.pattern_id, "summary": pattern.body["summary"]}}
    expected = {"model": "model-a", "temperature": 0, "response_format": {"type": "json_object"},
                "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                             {"role": "user", "content": canonical_text(user)}]}
    (sent,) = llm.requests
    assert sent["path"] == "/v1/chat/completions"  # the base URL's trailing slash is dropped
    assert sent["body"] == expected
    assert sent["raw"] == json.dumps(expected, ensure_ascii=False).encode("utf-8")  # UTF-8, not \u escapes
    headers = {name.lower(): value for name, value in sent["headers"].items()}
    assert (headers["content-type"], headers["accept"]) == ("application/json", "application/json")
    assert "authorization" not in headers  # no key configured: no header at all


def test_a_question_without_a_pattern_sends_a_null_policy_pattern(llm):
    llm.behaviour["model-a"] = ("answer", {"decision": "yes", "rationale": "ok"})
    HttpLLMAdvisor(llm.url, "model-a", timeout=5).advise(QUESTION)
    assert json.loads(llm.requests[0]["body"]["messages"][1]["content"]) == {
        "mode": "single", "question": "Approve the refund?", "context": {"inputs": {"amount": 5}},
        "policy_pattern": None}


def test_the_advisor_names_itself_its_model_and_provider_without_its_key():
    advisor = HttpLLMAdvisor("https://llm.example:8443/v1/", "m-1", api_key="sk-secret-1", timeout=3.5)
    assert (advisor.base_url, advisor.model, advisor.provider, advisor.timeout, advisor.advisor_id) == (
        "https://llm.example:8443/v1", "m-1", "llm.example:8443", 3.5, "http_llm:m-1")
    assert advisor.identity(QUESTION) == {"advisor_id": "http_llm:m-1", "kind": "http_llm", "model": "m-1",
                                          "provider": "llm.example:8443"}
    assert repr(advisor) == "HttpLLMAdvisor(provider='llm.example:8443', model='m-1')"
    assert HttpLLMAdvisor("http://llm.example", "m").provider == "llm.example"
    assert HttpLLMAdvisor("http://llm.example/v1X//", "m").base_url == "http://llm.example/v1X"
    assert HttpLLMAdvisor("http://llm.example", "m").timeout == 10.0


@pytest.mark.parametrize("url", ["ftp://llm.example", "llm.example/v1", "http:///v1", "https://"])
def test_a_base_url_that_is_not_http_with_a_host_is_refused(url):
    with pytest.raises(ValueError, match="must be an http"):
        HttpLLMAdvisor(url, "m")


def test_an_endless_body_is_cut_after_256_kib(llm):
    # The reads stop one byte past the bound: an answer without length never holds the exchange.
    # A generous timeout: the size bound must be what strikes, also on a loaded host (issue 53,
    # defect 6); an endless answer the bound did not cut would end at the timeout instead.
    llm.behaviour["model-a"] = ("endless", None)
    vote = HttpLLMAdvisor(llm.url, "model-a", timeout=60).advise(QUESTION)
    assert (vote.status, vote.error, vote.rationale) == (
        "failed", "ADVISOR_RESPONSE_INVALID", "provider answer exceeds 256 KiB")


def test_a_connection_reset_during_the_body_is_a_failed_connection(llm):
    llm.behaviour["model-a"] = ("reset", 0.3)
    vote = HttpLLMAdvisor(llm.url, "model-a", timeout=5).advise(QUESTION)
    assert (vote.status, vote.decision, vote.error, vote.rationale) == (
        "failed", "review", "ADVISOR_UNREACHABLE", "provider connection failed")


def test_a_provider_that_never_accepts_the_connection_times_out():
    # A listener whose accept queue is full drops new connections' SYNs: connect itself hangs,
    # before any socket is registered with the deadline, so only the socket timeout ends it.
    with socket.socket() as listener, socket.socket() as queued:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        queued.connect(listener.getsockname())
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        votes = []
        worker = threading.Thread(target=lambda: votes.append(
            HttpLLMAdvisor(url, "model-a", timeout=1).advise(QUESTION)), daemon=True)
        started = time.monotonic()
        worker.start()
        worker.join(6)
        assert not worker.is_alive(), "the exchange outlived its timeout"
        assert time.monotonic() - started < 4
    assert [(vote.status, vote.error) for vote in votes] == [("failed", "ADVISOR_TIMEOUT")]


def test_an_answer_of_exactly_256_kib_is_read_whole(llm):
    answer = _completion(json.dumps({"decision": "yes", "rationale": "at the bound"}))
    llm.behaviour["model-a"] = ("raw", answer + b" " * (262_144 - len(answer)))
    vote = HttpLLMAdvisor(llm.url, "model-a", timeout=5).advise(QUESTION)
    assert (vote.status, vote.decision, vote.rationale) == ("ok", "yes", "at the bound")
    llm.behaviour["model-a"] = ("raw", answer + b" " * (262_145 - len(answer)))
    vote = HttpLLMAdvisor(llm.url, "model-a", timeout=5).advise(QUESTION)
    assert (vote.status, vote.rationale) == ("failed", "provider answer exceeds 256 KiB")



def test_a_request_the_provider_never_reads_times_out_at_the_deadline(tls_files, monkeypatch):
    # The provider completes the TLS handshake half a second late, then never reads: the request's
    # body fills the socket buffers and its send blocks until the deadline shuts the socket, half a
    # second before the send's own timeout. That send's error (a TLS or pipe error, no timeout) is
    # the deadline's: a timeout, not an unreachable provider.
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files / "ca.pem"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls_files / "server.pem")
    done = threading.Event()

    def serve(listener):
        connection, _ = listener.accept()
        time.sleep(0.5)
        with contextlib.suppress(OSError), context.wrap_socket(connection, server_side=True):
            done.wait(10)
        connection.close()

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        server = threading.Thread(target=serve, args=(listener,), daemon=True)
        server.start()
        url = f"https://127.0.0.1:{listener.getsockname()[1]}/v1"
        question = AdvisoryQuestion("single", "Approve?", {"blob": "x" * 24_000_000}, {}, None)
        started = time.monotonic()
        try:
            vote = HttpLLMAdvisor(url, "model-a", timeout=1).advise(question)
        finally:
            done.set()
        elapsed = time.monotonic() - started
        server.join(5)
    assert (vote.status, vote.error, vote.rationale) == ("failed", "ADVISOR_TIMEOUT", "no answer within 1 s")
    assert elapsed < 3, elapsed
