"""Readable output of a Decision Packet verification, for `gate verify FILE` on a packet.

`is_packet(obj)` tells a packet (`decision_packet_v1`) from a Decision Record;
`packet_report(result)` renders `gate.packets.verify_packet(...).to_dict()` as lines naming
every check and, for each failed one, why it failed. Standard library only (offline use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gate.packets.result import PacketReport

__all__ = ["is_packet", "packet_report"]

_MARK = {True: "ok  ", False: "FAIL", None: "skip"}


def is_packet(obj: Any) -> bool:
    """True for an exported Decision Packet (not for a record, nor a `{packet, input}` body)."""
    if not isinstance(obj, dict):
        return False
    if "decision_packet_version" in obj:
        return True
    return "packet_manifest" in obj and "decision_record" in obj


def _short(value: Any, width: int = 72) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _why(result: PacketReport, name: str) -> list[str]:
    """Reasons for one failed check: its details, else its expected/actual values."""
    reasons = list(result.get("details", {}).get(name) or [])
    if reasons:
        return reasons
    if name in result.get("expected", {}):
        return [f"expected {_short(result['expected'][name])}, got {_short(result.get('actual', {}).get(name))}"]
    record = result.get("record")
    if name.startswith("record.") and isinstance(record, dict):
        inner = name[len("record."):]
        for compared, expected in record["expected"].items():  # keyed by check name: one matches at most
            if compared == inner:
                return [f"expected {_short(expected)}, got {_short(record['actual'].get(compared))}"]
    return []


def packet_report(result: PacketReport) -> str:
    """Multi-line report of a packet verification result dict."""
    verdict = "VERIFIED" if result.get("verified") else "NOT VERIFIED"
    lines = [f"packet for decision {result.get('decision_id')}: {verdict}"]
    lines.append(f"  packet_hash  {result.get('packet_hash')}")
    lines.append(f"  integrity    {'valid' if result.get('integrity_valid') else 'INVALID'}")
    record_source = result.get("key_source") or "no trusted key"
    checkpoint_source = result.get("checkpoint_key_source") or (
        "no chain" if result.get("checks", {}).get("audit_chain") is None else "no trusted key")
    lines.append(f"  authenticity {'valid' if result.get('authenticity_valid') else 'NOT PROVEN'} "
                 f"(record: {record_source}; checkpoint: {checkpoint_source})")
    failed = list(result.get("failed_checks") or [])
    checks = result.get("checks") or {}
    for name, outcome in checks.items():
        if "[" in name or name.startswith("record."):
            continue  # per-item and record failures are listed below
        lines.append(f"  [{_MARK.get(outcome, '????')}] {name}")
    if failed:
        lines.append("failed checks:")
        for name in failed:
            reasons = _why(result, name)
            if not reasons:
                lines.append(f"  {name}")
            for reason in reasons:
                lines.append(f"  {name}: {reason}")
    notes = result.get("notes") or []
    if notes:
        lines.append("notes:")
        lines.extend(f"  {note}" for note in notes)
    return "\n".join(lines)
