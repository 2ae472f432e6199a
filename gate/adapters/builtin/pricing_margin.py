"""Pricing-exception margin: from list price, discount and unit cost, the net price and the
margin left after the discount. Decimal arithmetic, results rounded half-even to cents and to
hundredths of a percent, so the same input always gives the same facts."""

MANIFEST = {
    "adapter_id": "pricing_margin",
    "version": "1.0.0",
    "implementation_revision": "2026-06-01.1",
    "description": "Net price, discount amount, margin amount and margin percent of a discounted "
                   "sale (per unit; quantity multiplies the amounts).",
    "input_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["list_price", "discount_percent", "unit_cost"],
        "properties": {
            "list_price": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000000000},
            "discount_percent": {"type": "number", "minimum": 0, "maximum": 100},
            "unit_cost": {"type": "number", "minimum": 0, "maximum": 1000000000},
            "quantity": {"type": "integer", "minimum": 1, "maximum": 1000000},
        },
    },
    "output_schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["net_price", "discount_amount", "margin_amount", "margin_pct", "below_cost"],
        "properties": {
            "net_price": {"type": "number"},
            "discount_amount": {"type": "number"},
            "margin_amount": {"type": "number"},
            "margin_pct": {"type": "number"},
            "below_cost": {"type": "boolean"},
        },
    },
}


def run(payload):
    from decimal import ROUND_HALF_EVEN, Decimal

    cents = Decimal("0.01")
    quantity = Decimal(int(payload.get("quantity", 1)))
    price = Decimal(repr(payload["list_price"]))
    discount = Decimal(repr(payload["discount_percent"]))
    cost = Decimal(repr(payload["unit_cost"]))
    net = price * (Decimal(100) - discount) / Decimal(100)
    margin = net - cost
    margin_pct = (margin / net * Decimal(100)) if net > 0 else Decimal(-100)

    def number(value, step=cents):
        rounded = value.quantize(step, rounding=ROUND_HALF_EVEN)
        return int(rounded) if rounded == rounded.to_integral_value() else float(rounded)

    return {
        "net_price": number(net * quantity),
        "discount_amount": number((price - net) * quantity),
        "margin_amount": number(margin * quantity),
        "margin_pct": number(margin_pct),
        "below_cost": margin < 0,
    }
