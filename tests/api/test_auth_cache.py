"""The API-key cache has bounded staleness (GATE_API_KEY_CACHE_MS, api/auth.py).

Over the app's HTTP interface with a controlled monotonic clock: an active key is trusted for at
most the bound after the ledger read that found it; a key disabled in the ledger (as `gate keys
disable` in another process does) is refused once the bound has passed, and before, only the
cached read is served; a key never seen, an unknown key and a disabled key are read from the
ledger on every request (no negative caching, no acceptance without a ledger read).
"""

from __future__ import annotations

import pytest

from api.auth import CACHE_ENTRIES, Authenticator
from gate.settings import Settings, SettingsError

pytestmark = pytest.mark.usefixtures("backend")

BOUND_MS = 1000


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def gate(make_app):
    """An app whose authenticator reads a clock the test moves, and counts its ledger reads."""
    app = make_app(api_key_cache_ms=BOUND_MS)
    runtime = app.extensions["gate"]
    clock = Clock()
    runtime.auth = Authenticator(runtime.ledger, runtime.settings.plans, cache_ms=BOUND_MS, clock=clock)
    reads: list[str] = []
    lookup = runtime.ledger.api_key_by_hash

    def counted(key_hash: str):
        reads.append(key_hash)
        return lookup(key_hash)

    runtime.ledger.api_key_by_hash = counted
    return app, clock, reads


def _decide(app, key: str, request: dict) -> int:
    return app.test_client().post("/api/decide", json=request, headers={"x-api-key": key}).status_code


def test_a_disabled_key_is_refused_once_the_bound_has_passed(gate, issue_key, sample_request):
    app, clock, reads = gate
    issued = issue_key()
    assert _decide(app, issued["api_key"], sample_request) == 200
    assert len(reads) == 1
    app.extensions["gate"].ledger.set_api_key_status(issued["key_id"], "disabled", "2026-11-22T00:00:00.000Z")
    clock.now += BOUND_MS / 1000 - 0.001  # within the bound: the read of 0.999 s ago is still trusted
    assert _decide(app, issued["api_key"], sample_request) == 200
    assert len(reads) == 1
    clock.now += 0.001  # the bound has passed: read again, refused
    assert _decide(app, issued["api_key"], sample_request) == 403
    assert len(reads) == 2
    for _ in range(3):  # a disabled key is never cached: every request reads and is refused
        assert _decide(app, issued["api_key"], sample_request) == 403
    assert len(reads) == 5


def test_a_key_never_seen_is_read_from_the_ledger_before_it_is_accepted(gate, issue_key, sample_request):
    app, _clock, reads = gate
    assert _decide(app, "dg_" + "x" * 43, sample_request) == 401  # unknown: read, refused, not cached
    assert _decide(app, "dg_" + "x" * 43, sample_request) == 401
    assert len(reads) == 2
    issued = issue_key()  # created after the unknown-key reads: accepted at once, after its own read
    assert _decide(app, issued["api_key"], sample_request) == 200
    assert len(reads) == 3
    other = issue_key("tenant_b")  # another key: its own read, whatever else is cached
    assert _decide(app, other["api_key"], sample_request) == 200
    assert len(reads) == 4


def test_re_enabling_takes_effect_at_once_and_the_cache_is_bounded(gate, issue_key, sample_request, monkeypatch):
    app, _clock, _reads = gate
    issued = issue_key()
    ledger = app.extensions["gate"].ledger
    ledger.set_api_key_status(issued["key_id"], "disabled", "2026-11-22T00:00:00.000Z")
    assert _decide(app, issued["api_key"], sample_request) == 403
    ledger.set_api_key_status(issued["key_id"], "active", "2026-11-22T00:00:01.000Z")
    assert _decide(app, issued["api_key"], sample_request) == 200
    monkeypatch.setattr("api.auth.CACHE_ENTRIES", 2)
    keys = [issue_key(f"tenant_{n}")["api_key"] for n in range(3)]
    for key in keys:
        assert _decide(app, key, sample_request) == 200
    auth = app.extensions["gate"].auth
    assert 1 <= len(auth._active) <= 2 and CACHE_ENTRIES == 10_000
    assert issued["api_key"] not in repr(auth._active)  # the cache holds key hashes, never keys


def test_the_bound_is_a_setting_and_zero_reads_every_time(make_app, issue_key, sample_request, gate_env):
    assert Settings.from_env(gate_env).api_key_cache_ms == 1000
    assert Settings.from_env({**gate_env, "GATE_API_KEY_CACHE_MS": "0"}).api_key_cache_ms == 0
    for bad in ("-1", "60001", "1s"):
        with pytest.raises(SettingsError, match="GATE_API_KEY_CACHE_MS"):
            Settings.from_env({**gate_env, "GATE_API_KEY_CACHE_MS": bad})
    app = make_app({"GATE_API_KEY_CACHE_MS": "0"})
    issued = issue_key()
    assert _decide(app, issued["api_key"], sample_request) == 200
    app.extensions["gate"].ledger.set_api_key_status(issued["key_id"], "disabled", "2026-11-22T00:00:00.000Z")
    assert _decide(app, issued["api_key"], sample_request) == 403
