"""Agent-action risk: a transparent additive score for an action an AI agent proposes, from
the kind of action, the amount involved and the acting agent's history. Every point added is
named in `risk_factors`, so a reviewer can see why the band was reached."""

MANIFEST = {
    "adapter_id": "agent_action_risk",
    "version": "1.0.0",
    "implementation_revision": "2026-06-01.1",
    "description": "Risk score 0-100 and band (low < 25 <= medium < 50 <= high < 75 <= critical) "
                   "from action kind, amount and actor history; the factors are listed.",
    "input_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["action_kind", "amount", "actor_history"],
        "properties": {
            "action_kind": {"type": "string", "enum": [
                "read", "create", "update", "delete", "refund", "payment", "email_send",
                "permission_change"]},
            "amount": {"type": "number", "minimum": 0, "maximum": 1000000000},
            "environment": {"type": "string", "enum": ["production", "staging", "sandbox"]},
            "actor_history": {
                "type": "object",
                "additionalProperties": False,
                "required": ["actions_30d", "incidents_90d", "account_age_days"],
                "properties": {
                    "actions_30d": {"type": "integer", "minimum": 0},
                    "incidents_90d": {"type": "integer", "minimum": 0},
                    "account_age_days": {"type": "integer", "minimum": 0},
                },
            },
        },
    },
    "output_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["risk_score", "risk_band", "risk_factors"],
        "properties": {
            "risk_score": {"type": "integer", "minimum": 0, "maximum": 100},
            "risk_band": {"type": "string", "enum": ["low", "medium", "high", "critical"]},
            "risk_factors": {"type": "array", "maxItems": 16, "items": {"type": "string"}},
        },
    },
}

_KIND_POINTS = {
    "read": 0, "create": 10, "update": 15, "email_send": 15, "refund": 25, "payment": 30,
    "delete": 35, "permission_change": 40,
}


def run(payload):
    factors = []
    score = 0

    def add(points, factor):
        nonlocal score
        if points:
            score += points
            factors.append(factor)

    kind = payload["action_kind"]
    add(_KIND_POINTS[kind], "action_kind:" + kind)
    amount = payload["amount"]
    add(25 if amount >= 10000 else 15 if amount >= 1000 else 5 if amount >= 100 else 0, "amount")
    environment = payload.get("environment", "production")
    add(10 if environment == "production" else 0, "environment:production")
    history = payload["actor_history"]
    add(min(30, 10 * history["incidents_90d"]), "incidents_90d")
    add(10 if history["account_age_days"] < 30 else 0, "new_actor")
    add(10 if history["actions_30d"] < 5 else 0, "little_history")
    score = min(100, score)
    band = "low" if score < 25 else "medium" if score < 50 else "high" if score < 75 else "critical"
    return {"risk_score": score, "risk_band": band, "risk_factors": factors}
