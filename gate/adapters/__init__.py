"""Trusted adapter registry: adapters emit facts, the rulebook stays the verdict selector.

Invocation shape (reference facts §3): exactly `adapter_id`, `version` (`^\\d+\\.\\d+\\.\\d+$`),
`manifest_hash` (64 lowercase hex) and `input` (object). Only adapters registered by the
operator can run; customer-supplied code is never executed.
"""

from __future__ import annotations

import re
from typing import Any

from gate.errors import GateError

_INVOCATION_KEYS = ("adapter_id", "version", "manifest_hash", "input")
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_HASH = re.compile(r"^[0-9a-f]{64}$")
_ADAPTER_ID = re.compile(r"^[a-z][a-z0-9_.:-]{1,119}$")


def validate_invocation(adapter: dict[str, Any]) -> None:
    """Raise `TRUSTED_ADAPTER_INVALID` with every problem of the invocation object."""
    errors: list[dict[str, str]] = []
    for key in sorted(adapter):
        if key not in _INVOCATION_KEYS:
            errors.append({"field": f"adapter.{key}", "code": "unknown_field",
                           "message": f"unknown adapter invocation member {key!r}"})
    checks = (
        ("adapter_id", lambda v: isinstance(v, str) and _ADAPTER_ID.fullmatch(v)),
        ("version", lambda v: isinstance(v, str) and _VERSION.fullmatch(v)),
        ("manifest_hash", lambda v: isinstance(v, str) and _HASH.fullmatch(v)),
        ("input", lambda v: isinstance(v, dict)),
    )
    for key, ok in checks:
        if key not in adapter:
            errors.append({"field": f"adapter.{key}", "code": "missing_field",
                           "message": f"adapter.{key} is required"})
        elif not ok(adapter[key]):
            errors.append({"field": f"adapter.{key}", "code": "invalid_value",
                           "message": f"adapter.{key} is malformed"})
    if errors:
        raise GateError("TRUSTED_ADAPTER_INVALID", "trusted adapter invocation is invalid",
                        errors=errors)


class AdapterRegistry:
    """Operator-registered adapters by (adapter_id, version). Empty unless adapters are installed."""

    def __init__(self) -> None:
        self._adapters: dict[tuple[str, str], Any] = {}

    def resolve(self, adapter: dict[str, Any]) -> Any:
        validate_invocation(adapter)
        registered = self._adapters.get((adapter["adapter_id"], adapter["version"]))
        if registered is None:
            raise GateError(
                "TRUSTED_ADAPTER_NOT_REGISTERED",
                f"adapter {adapter['adapter_id']}@{adapter['version']} is not registered on this gate",
                adapter_id=adapter["adapter_id"],
                version=adapter["version"],
            )
        return registered
