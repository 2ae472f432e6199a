"""Events out to NATS JetStream (docs/events.md, "Stream"): a real `nats-server -js` on loopback,
the gate's publisher, and a consumer that starts after the burst and reads the same sequence."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import time

import pytest

from gate.events.stream import JetStreamPublisher, scope_token, subject_of
from tests.events.test_webhooks import release_burst
from tests.releases.support import ALL, Api

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"


def _run(coroutine):
    """`asyncio.run` in a thread of its own: an earlier test of this worker (a browser test's
    Playwright sync API) may leave an event loop marked running on the main thread."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result(timeout=120)


@pytest.fixture
def nats_url(tmp_path):
    if not shutil.which(NATS_SERVER):
        pytest.skip("nats-server is not installed (apt-get install nats-server; .ci/run installs it)")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([NATS_SERVER, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(tmp_path / "js")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    yield f"nats://127.0.0.1:{port}"
    process.terminate()
    process.wait(10)


async def _read_all(url: str, subject: str = "gate.events.>", start: int = 1) -> list[tuple[str, str, dict]]:
    import nats
    from nats.js.api import ConsumerConfig, DeliverPolicy

    nc = await nats.connect(url)
    js = nc.jetstream()
    info = await js.stream_info("GATE_EVENTS")
    config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start)
    sub = await js.pull_subscribe(subject, stream="GATE_EVENTS", config=config)
    out = []
    remaining = info.state.messages
    while remaining > 0:
        try:
            batch = await sub.fetch(min(remaining, 100), timeout=2)
        except TimeoutError:
            break
        for message in batch:
            out.append((message.subject, message.headers["Nats-Msg-Id"], json.loads(message.data)))
            await message.ack()
        remaining -= len(batch)
    await nc.close()
    return out


def test_a_consumer_started_after_the_burst_reads_every_event_once_in_order(make_app, issue_key, nats_url):
    app = make_app()
    api = Api(app.test_client(), issue_key(permissions=ALL)["api_key"])
    other = Api(app.test_client(), issue_key(scope="tenant.b*", permissions=ALL)["api_key"])
    release_burst(api)
    release_burst(other)
    outbox = app.extensions["gate"].events.outbox

    def publish() -> list[int]:
        """Driven from one thread of its own, as the dispatcher's thread drives it in a worker
        (the main thread may hold an event loop an earlier browser test left marked running)."""
        publisher = JetStreamPublisher(outbox, nats_url)
        try:
            first = publisher.publish_pending()
            # a publisher that lost its cursor (killed before saving it) publishes again: deduplicated
            outbox.set_stream_cursor("jetstream", "tenant_a", 0)
            return [first, publisher.publish_pending()]
        finally:
            publisher.close()

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(publish).result(timeout=120) == [18, 9]
    read = _run(_read_all(nats_url))
    assert len(read) == 18
    mine = [(s, i, e) for s, i, e in read if e["source"].endswith(":tenant_a")]
    assert [int(e["sequence"]) for _, _, e in mine] == list(range(1, 10))
    stored = outbox.events_after("tenant_a", 0)
    assert [i for _, i, _ in mine] == [row["event_id"] for row in stored]
    assert [e for _, _, e in mine] == [json.loads(row["event_json"]) for row in stored]
    assert mine[0][0] == "gate.events.tenant_a.rulebook.published"
    # a hostile scope name never becomes subject syntax; one scope's subject filters its events
    assert scope_token("tenant.b*").startswith("h") and "." not in scope_token("tenant.b*")
    theirs = _run(_read_all(nats_url, f"gate.events.{scope_token('tenant.b*')}.>"))
    assert len(theirs) == 9 and all(e["source"].endswith(":tenant.b*") for _, _, e in theirs)
    # and a consumer can start anywhere
    late = _run(_read_all(nats_url, start=10))
    assert [i for _, i, _ in late] == [i for _, i, _ in read[9:]]


def test_subjects():
    assert subject_of("acme", "dev.decision-gate.release.halted", "dev.decision-gate.") == \
        "gate.events.acme.release.halted"
    assert scope_token("a" * 65).startswith("h")
    assert scope_token("ok-scope_1") == "ok-scope_1"
