"""Refund window: from purchase and request dates, how many days have passed and whether the
request falls inside the refund window. Pure and deterministic (calendar days, no clock)."""

MANIFEST = {
    "adapter_id": "refund_window",
    "version": "1.0.0",
    "implementation_revision": "2026-06-01.1",
    "description": "Days since purchase and whether a refund request is inside the refund window "
                   "(calendar days between two ISO dates; the window end day counts as inside).",
    "input_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["purchase_date", "request_date", "window_days"],
        "properties": {
            "purchase_date": {"type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
            "request_date": {"type": "string", "format": "date", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
            "window_days": {"type": "integer", "minimum": 1, "maximum": 3650},
        },
    },
    "output_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["days_since_purchase", "within_window", "days_remaining", "request_before_purchase"],
        "properties": {
            "days_since_purchase": {"type": "integer"},
            "within_window": {"type": "boolean"},
            "days_remaining": {"type": "integer", "minimum": 0},
            "request_before_purchase": {"type": "boolean"},
        },
    },
}


def run(payload):
    from datetime import date

    purchased = date.fromisoformat(payload["purchase_date"])
    requested = date.fromisoformat(payload["request_date"])
    window = int(payload["window_days"])
    days = (requested - purchased).days
    before = days < 0
    within = not before and days <= window
    return {
        "days_since_purchase": days,
        "within_window": within,
        "days_remaining": max(0, window - days) if not before else window,
        "request_before_purchase": before,
    }
