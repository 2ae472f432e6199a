"""The sign-in throttle's bounds over simulated time (issue 41, defect 4): guesses against one user
stay bounded however many addresses send them, and nothing an attacker does keeps the user's right
password out from an address that has not failed. (Over HTTP: tests/cli/test_workbench_signin.py.)"""

from __future__ import annotations

from workbench.app.signin import SignInThrottle


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def attempt(throttle: SignInThrottle, user: str, address: str, right: bool = False) -> bool:
    """One sign-in: True when it was checked (admitted), counted as a failure unless `right`."""
    if throttle.admit(user, address):
        return False
    throttle.finish(user, address, right)
    return True


def test_one_address_gets_about_a_hundred_guesses_a_day_at_one_user():
    clock = Clock()
    throttle = SignInThrottle(clock=clock)
    checked = 0
    for _ in range(24 * 3600):  # one attempt a second for a day
        checked += attempt(throttle, "alice", "198.51.100.7")
        clock.now += 1
    assert checked <= 110, checked
    assert attempt(throttle, "alice", "203.0.113.9", right=True)  # the owner, elsewhere


def test_many_failed_addresses_share_one_slowed_stream_of_guesses():
    clock = Clock()
    throttle = SignInThrottle(clock=clock)
    addresses = [f"198.51.{n // 250}.{n % 250}" for n in range(1000)]
    first = sum(attempt(throttle, "alice", address) for address in addresses)  # one each: none has failed
    assert first == 1000
    checked = 0
    for second in range(3600):  # then every failed address tries once a second for an hour
        for address in addresses[second % 10::10][:5]:
            checked += attempt(throttle, "alice", address)
        clock.now += 1
    assert checked <= 3600 // 60 + 6, checked  # one slot a minute at most, not 18,000 guesses
    assert attempt(throttle, "alice", "203.0.113.9", right=True)  # the owner, from a clean address
    clock.now += 60
    assert attempt(throttle, "alice", addresses[0], right=True)  # a failed address waits, is never locked


def test_the_owner_signing_in_does_not_reset_the_slowdown():
    clock = Clock()
    throttle = SignInThrottle(clock=clock)
    for n in range(30):
        attempt(throttle, "alice", f"198.51.100.{n}")
    assert attempt(throttle, "alice", "203.0.113.9", right=True)
    assert attempt(throttle, "alice", "198.51.100.1")  # the next slot is taken
    assert not attempt(throttle, "alice", "198.51.100.2")  # and the one after waits for it
