"""When to try a failed delivery again: exponential backoff with full jitter, capped, for long
enough that a receiver down for a day still gets everything (docs/events.md, "Retries")."""

from __future__ import annotations

import random

BASE_SECONDS = 5.0
CAP_SECONDS = 3600.0
# A subscription whose oldest undelivered event has failed for this long is disabled (an event
# of its own); until then it is retried. 26 hours: a full day, and the cap's last try after it.
DISABLE_AFTER_SECONDS = 26 * 3600.0


def delay(attempts: int, draw: float | None = None) -> float:
    """Seconds before attempt `attempts + 1` (attempts >= 1 failed so far): a uniform draw in
    [0.5, 1] of min(CAP, BASE * 2**(attempts-1)), so retries spread and never come at once."""
    if attempts < 1:
        return 0.0
    ceiling = min(CAP_SECONDS, BASE_SECONDS * 2.0 ** min(attempts - 1, 30))
    jitter = random.random() if draw is None else draw  # noqa: S311 (spreading retries, not a secret)
    return ceiling * (0.5 + 0.5 * jitter)
