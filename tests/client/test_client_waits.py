"""The Python client's wait for a held action (issue 53 item 4, docs/client.md "Held actions"): a wait
of W seconds makes at most ceil(W / 30) + 1 requests, never asks past its deadline, covers it to the
end, honours the gate's Retry-After and never spins, whatever fraction of a second W ends in.

The rules are pinned by value (gate_client.resolutions), and `GateClient.wait_for_resolution` runs
against a simulated gate on a simulated clock: `GET /api/decision/{id}/resolution?wait=N` answered as
the gate answers it (at the close, or after N seconds, plus a network latency), so a property test can
try thousands of fractional waits. tests/client/test_client_live.py waits on a real gate."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate_client.client import GateClient, GateClientError
from gate_client.resolutions import MAX_WAIT_SECONDS, next_pause, request_limit, wait_seconds

RECORD = {"decision_id": "dec_held_1", "verdict": "review"}

# ---------------------------------------------------------------- the rules by value


@pytest.mark.parametrize("wait, seconds", [(0, 0), (0.0, 0), (0.5, 0), (0.999, 0), (1, 1), (1.5, 1), (29.99, 29),
                                           (30, 30), (30.5, 30), (31, 30), (1e9, 30), (-1, 0), (-0.5, 0)])
def test_a_request_asks_for_the_whole_seconds_of_its_wait_from_0_to_30(wait, seconds):
    assert wait_seconds(wait) == seconds and type(wait_seconds(wait)) is int


@pytest.mark.parametrize("wait", [math.nan, math.inf, -math.inf, "5", None, True, [1]])
def test_a_wait_that_is_not_a_finite_number_is_refused(wait):
    with pytest.raises(ValueError, match="finite number of seconds"):
        wait_seconds(wait)


@pytest.mark.parametrize("timeout, limit", [(0, 1), (-5, 1), (0.1, 2), (1, 2), (29.5, 2), (30, 2), (30.001, 3),
                                            (31, 3), (60, 3), (61, 4), (300, 11)])
def test_a_wait_makes_at_most_ceil_timeout_over_30_plus_one_requests(timeout, limit):
    assert request_limit(timeout) == limit


def test_the_pause_before_the_next_request():
    assert next_pause(12.0, 1, 3) == 0.0  # whole seconds left: long-poll again at once
    assert next_pause(1.0, 1, 3) == 0.0
    assert next_pause(0.4, 1, 3) == 0.4  # the last fraction: sleep it, then ask with wait=0
    assert next_pause(0.0, 1, 3) is None and next_pause(-0.1, 1, 3) is None  # the deadline passed
    assert next_pause(12.0, 3, 3) is None and next_pause(12.0, 4, 3) is None  # no request left
    assert next_pause(12.0, 2, 3) == 0.0
    assert next_pause(12.0, 1, 3, 5.0) == 5.0  # the gate's Retry-After
    assert next_pause(0.5, 1, 3, 0.2) == 0.5  # never less than the fraction left
    assert next_pause(12.0, 1, 3, 12.0) == 12.0 and next_pause(12.0, 1, 3, 12.5) is None  # past the wait: over


def test_the_longest_long_poll_is_the_gates():
    assert MAX_WAIT_SECONDS == 30


# ---------------------------------------------------------------- a simulated gate


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds


class Response:
    def __init__(self, status: int, body: dict, headers: dict | None = None) -> None:
        self.status_code, self.headers = status, {"content-type": "application/json", **(headers or {})}
        self._data = json.dumps(body).encode()

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def iter_content(self, size: int):
        yield self._data


class SimulatedGate:
    """The resolution endpoint on a simulated clock: the hold closes (approved) at `closes_at`
    (None: never); `wait=N` answers at the close or after N seconds; every request takes `latency`
    seconds more. The first `throttled` requests answer 429 with `Retry-After: retry_after`; an
    `early` gate answers at once whatever it was asked (a misbehaving proxy)."""

    def __init__(self, clock: Clock, closes_at: float | None = None, latency: float = 0.0, throttled: int = 0,
                 retry_after: int | None = None, early: bool = False) -> None:
        self.clock, self.closes_at, self.latency = clock, closes_at, latency
        self.throttled, self.retry_after, self.early = throttled, retry_after, early
        self.requests: list[tuple[float, int, int]] = []  # (when, wait asked, status answered)

    def state(self) -> str:
        return "approved" if self.closes_at is not None and self.clock.now >= self.closes_at else "open"

    def request(self, method: str, url: str, *, params: dict, **_: object) -> Response:
        assert method == "GET" and url.endswith("/api/decision/dec_held_1/resolution")
        wait = params["wait"]
        assert type(wait) is int and 0 <= wait <= MAX_WAIT_SECONDS, wait
        asked_at = self.clock.now
        if self.throttled:
            self.throttled -= 1
            self.requests.append((asked_at, wait, 429))
            self.clock.now += self.latency
            headers = {} if self.retry_after is None else {"Retry-After": str(self.retry_after)}
            return Response(429, {"error": "RATE_LIMITED", "message": "slow down"}, headers)
        if not self.early and self.state() == "open":
            ends = asked_at + wait
            self.clock.now = min(ends, self.closes_at) if self.closes_at is not None and self.closes_at > asked_at \
                else ends
        self.clock.now += self.latency
        self.requests.append((asked_at, wait, 200))
        state = self.state()
        return Response(200, {"ok": True, "decision_id": "dec_held_1", "state": state,
                              "approved": state == "approved", "resolution": None, "hold": {}})


def waiting(gate: SimulatedGate, clock: Clock, **options) -> GateClient:
    return GateClient("http://gate.invalid", "key", session=gate, sleep=clock.sleep, clock=clock, **options)


# ---------------------------------------------------------------- the wait, over fractional timeouts

TIMEOUTS = st.floats(min_value=0, max_value=200, allow_nan=False) | st.sampled_from(
    [0.0, 0.5, 0.999, 1.0, 29.5, 30.0, 30.0001, 30.5, 31.0, 31.5, 59.999, 60.0, 61.0, 90.25])
LATENCIES = st.floats(min_value=0, max_value=0.3, allow_nan=False)


@settings(max_examples=400, deadline=None)
@given(timeout=TIMEOUTS, latency=LATENCIES)
def test_an_open_hold_is_waited_on_to_the_deadline_in_at_most_ceil_over_30_plus_one_requests(timeout, latency):
    clock = Clock()
    gate = SimulatedGate(clock, latency=latency)
    start, deadline = clock.now, clock.now + timeout
    answer = waiting(gate, clock).wait_for_resolution(RECORD, timeout=timeout)
    assert answer["state"] == "open"
    assert 1 <= len(gate.requests) <= math.ceil(timeout / 30) + 1, gate.requests
    for asked_at, wait, _ in gate.requests:  # never asks past the deadline
        assert asked_at + wait <= max(deadline, asked_at) + 1e-9
    assert clock.now >= deadline - 1e-9  # the whole wait is covered
    assert clock.now <= deadline + latency + 1e-9  # and it ends with the deadline's answer
    assert all(pause < 1 for pause in clock.sleeps)  # only the last fraction is slept
    assert clock.now - start >= 0


@settings(max_examples=300, deadline=None)
@given(timeout=TIMEOUTS, latency=LATENCIES, closes=st.floats(min_value=0, max_value=1))
def test_a_hold_that_closes_during_the_wait_is_answered_at_the_close(timeout, latency, closes):
    clock = Clock()
    closes_at = clock.now + closes * timeout
    gate = SimulatedGate(clock, closes_at=closes_at, latency=latency)
    answer = waiting(gate, clock).wait_for_resolution(RECORD, timeout=timeout)
    assert answer["state"] == "approved"
    assert len(gate.requests) <= math.ceil(timeout / 30) + 1
    assert clock.now <= closes_at + 1 + 2 * latency + 1e-9  # within the last fraction of a second


@settings(max_examples=200, deadline=None)
@given(timeout=TIMEOUTS, latency=LATENCIES, throttled=st.integers(min_value=1, max_value=5),
       retry_after=st.integers(min_value=0, max_value=40))
def test_a_throttled_wait_honours_retry_after_and_stays_within_its_requests(timeout, latency, throttled, retry_after):
    clock = Clock()
    gate = SimulatedGate(clock, latency=latency, throttled=throttled, retry_after=retry_after)
    deadline = clock.now + timeout
    try:
        answer = waiting(gate, clock).wait_for_resolution(RECORD, timeout=timeout)
    except GateClientError as error:
        assert error.status == 429 and error.code == "RATE_LIMITED"
        assert gate.requests[-1][2] == 429
    else:
        assert answer["state"] == "open" and gate.requests[-1][2] == 200
    assert len(gate.requests) <= math.ceil(timeout / 30) + 1
    for (at, _, status), (then, _, _) in zip(gate.requests, gate.requests[1:], strict=False):
        if status == 429:  # the next request waits the Retry-After
            assert then - at >= retry_after
    assert clock.now <= deadline + latency + 1e-9


@settings(max_examples=200, deadline=None)
@given(timeout=TIMEOUTS, latency=LATENCIES)
def test_a_gate_that_answers_at_once_is_not_asked_again_and_again(timeout, latency):
    clock = Clock()
    gate = SimulatedGate(clock, latency=latency, early=True)
    assert waiting(gate, clock).wait_for_resolution(RECORD, timeout=timeout)["state"] == "open"
    assert len(gate.requests) <= math.ceil(timeout / 30) + 1


def test_the_issues_wait_of_31_seconds_makes_two_requests():
    clock = Clock()
    gate = SimulatedGate(clock, latency=0.02)
    route = waiting(gate, clock).route_by_resolution(RECORD, wait=31)
    assert route.route == "review" and "open" in route.reason
    assert [wait for _, wait, _ in gate.requests] == [30, 0]
    assert clock.sleeps == [pytest.approx(0.98)]


def test_a_wait_of_zero_asks_once_and_a_throttled_one_is_reviewed_without_retrying():
    clock = Clock()
    gate = SimulatedGate(clock)
    assert waiting(gate, clock).route_by_resolution(RECORD).route == "review"
    assert [wait for _, wait, _ in gate.requests] == [0]
    gate = SimulatedGate(clock, throttled=3, retry_after=1)
    route = waiting(gate, clock).route_by_resolution(RECORD, wait=0)
    assert route.route == "review" and route.error is not None and route.error.status == 429
    assert len(gate.requests) == 1


def test_an_error_without_retry_after_backs_off_and_one_not_worth_retrying_ends_the_wait():
    clock = Clock()
    gate = SimulatedGate(clock, throttled=1)  # 429 without Retry-After: the client's backoff
    answer = waiting(gate, clock, backoff=2.0).wait_for_resolution(RECORD, timeout=40)
    assert answer["state"] == "open" and [status for _, _, status in gate.requests] == [429, 200, 200]
    assert 1.0 <= clock.sleeps[0] <= 2.0
    assert 1039.0 <= clock.now <= 1040.0  # the 429 spent one of the three requests: the last fraction goes unasked

    class Missing(SimulatedGate):
        def request(self, method: str, url: str, **kw: object) -> Response:
            self.requests.append((self.clock.now, 0, 404))
            return Response(404, {"error": "HOLD_NOT_FOUND", "message": "no hold"})
    gate = Missing(clock)
    with pytest.raises(GateClientError) as caught:
        waiting(gate, clock).wait_for_resolution(RECORD, timeout=120)
    assert caught.value.code == "HOLD_NOT_FOUND" and len(gate.requests) == 1


def test_resolution_asks_for_whole_seconds():
    clock = Clock()
    gate = SimulatedGate(clock)
    client = waiting(gate, clock)
    for wait in (0.5, 1.9, 30.7, 45):
        client.resolution("dec_held_1", wait=wait)
    assert [wait for _, wait, _ in gate.requests] == [0, 1, 30, 30]
    with pytest.raises(ValueError):
        client.resolution("dec_held_1", wait=math.nan)
    with pytest.raises(ValueError):
        client.wait_for_resolution(RECORD, timeout=math.inf)
