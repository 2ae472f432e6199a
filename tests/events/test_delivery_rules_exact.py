"""The webhook delivery's rules by value (issue 52 item 9): the documented retry schedule of
gate/events/backoff.py (base 5 s, doubling, cap 1 hour, a uniform jitter in [0.5, 1] of it;
docs/events.md "Retries") and the Standard Webhooks signatures of gate/events/signatures.py
(the specification's own example, checked again by the `standardwebhooks` package)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from standardwebhooks import Webhook

from gate.events import backoff, signatures

# ---------------------------------------------------------------- the retry schedule


def test_the_documented_constants():
    assert backoff.BASE_SECONDS == 5.0
    assert backoff.CAP_SECONDS == 3600.0
    assert backoff.DISABLE_AFTER_SECONDS == 26 * 3600.0


def test_no_failure_no_wait():
    for attempts in (0, -1, -100):
        assert backoff.delay(attempts) == 0.0
        assert backoff.delay(attempts, 1.0) == 0.0


def test_the_ceiling_doubles_from_five_seconds_to_the_one_hour_cap():
    ceilings = [backoff.delay(attempts, 1.0) for attempts in range(1, 14)]
    assert ceilings == [5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0, 1280.0, 2560.0, 3600.0, 3600.0, 3600.0]


def test_the_jitter_spans_half_the_ceiling_to_all_of_it():
    assert [backoff.delay(1, draw) for draw in (0.0, 0.25, 0.5, 1.0)] == [2.5, 3.125, 3.75, 5.0]
    assert [backoff.delay(4, draw) for draw in (0.0, 0.5, 1.0)] == [20.0, 30.0, 40.0]
    assert [backoff.delay(11, draw) for draw in (0.0, 0.5, 1.0)] == [1800.0, 2700.0, 3600.0]


def test_any_number_of_failures_waits_at_most_the_cap():
    for attempts in (31, 32, 1000, 10**9):
        assert backoff.delay(attempts, 1.0) == 3600.0
        assert backoff.delay(attempts, 0.0) == 1800.0


def test_without_a_draw_the_jitter_is_drawn_uniformly():
    random.seed(52)
    expected = [ceiling * (0.5 + 0.5 * random.random()) for ceiling in (5.0, 20.0, 3600.0)]
    random.seed(52)
    assert [backoff.delay(1), backoff.delay(3), backoff.delay(12)] == expected
    draws = [backoff.delay(2) for _ in range(2000)]
    assert min(draws) >= 5.0 and max(draws) <= 10.0
    assert min(draws) < 5.5 and max(draws) > 9.5  # spread over the whole range, not a point


# ---------------------------------------------------------------- Standard Webhooks signatures

# The specification's example (standard-webhooks/spec, "Signature scheme").
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY = "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_specifications_example_signs_as_published():
    assert signatures.sign(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE


def test_a_signature_covers_the_id_the_timestamp_and_the_body():
    others = {signatures.sign(SPEC_SECRET, "msg_other", SPEC_TIMESTAMP, SPEC_BODY),
              signatures.sign(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP + 1, SPEC_BODY),
              signatures.sign(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY + b" ")}
    assert SPEC_SIGNATURE not in others and len(others) == 3


def test_a_new_secret_is_32_random_bytes_that_standard_webhooks_libraries_accept():
    secret = signatures.new_secret()
    assert secret.startswith("whsec_") and len(secret) == len("whsec_") + 44
    key = base64.b64decode(secret[len("whsec_"):], validate=True)
    assert len(key) == 32 and secret[len("whsec_"):].isascii()
    assert secret != signatures.new_secret()
    body = b'{"id": 1}'
    header = signatures.signature_header([secret], "msg_1", 1_700_000_000, body)
    expected = base64.b64encode(hmac.new(key, b"msg_1.1700000000." + body, hashlib.sha256).digest()).decode()
    assert header == "v1," + expected


@pytest.mark.parametrize("secret", ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec", "WHSEC_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                                    "whsec_MfKQ9r8GKYqrTwjUPD8I$LPZIo2LaLaSw", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa"])
def test_a_secret_without_the_prefix_or_with_bad_base64_is_refused(secret):
    with pytest.raises(ValueError):
        signatures.sign(secret, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)


def test_the_header_carries_one_signature_per_secret_newest_first_and_verifies_with_either():
    old, new = signatures.new_secret(), SPEC_SECRET
    header = signatures.signature_header([new, old], SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)
    assert header == SPEC_SIGNATURE + " " + signatures.sign(old, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)
    assert signatures.signature_header([], SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == ""
    now = int(time.time())  # the library refuses a timestamp five minutes off
    header = signatures.signature_header([new, old], "msg_1", now, b'{"n": 1}')
    for secret in (old, new):  # a receiver that holds either secret accepts the delivery
        headers = {"webhook-id": "msg_1", "webhook-timestamp": str(now), "webhook-signature": header}
        assert Webhook(secret).verify(b'{"n": 1}', headers) == {"n": 1}


def test_the_asymmetric_form_is_the_ed25519_signature_of_the_same_content():
    key = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
    signed = signatures.sign_ed25519(key, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)
    assert signed.startswith("v1a,")
    raw = base64.b64decode(signed[len("v1a,"):], validate=True)
    key.public_key().verify(raw, f"{SPEC_ID}.{SPEC_TIMESTAMP}.".encode() + SPEC_BODY)  # raises if not
    assert signed == "v1a," + base64.b64encode(key.sign(b"msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330." + SPEC_BODY)).decode()
