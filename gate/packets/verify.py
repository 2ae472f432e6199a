"""`verify_packet`: the packet verification steps 1-4, in order, and the packet-verify body."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gate.packets.chain_checks import _check_chain, _check_record_audit_chain
from gate.packets.common import _AUTHENTICITY, _LISTED, PacketInputError, _canon_equal
from gate.packets.contents import (
    _check_intelligence,
    _check_receipt_head,
    _check_receipts,
)
from gate.packets.envelope import (
    _check_exported_at,
    _check_manifest,
    _check_members,
    _check_packet_hash,
)
from gate.packets.receipts_fast import _ReceiptTexts
from gate.packets.result import PacketVerification, _State
from gate.packets.witness import check_chain_consistency, check_checkpoint_log
from gate.verify import TrustAnchors, verify_record
from gate.vocabulary import DECISION_PACKET_VERSION


def verify_packet(
    packet: Any,
    *,
    anchors: TrustAnchors | None = None,
    original_input: Any = None,
    checkpoint_log: Sequence[Mapping[str, Any]] | None = None,
) -> PacketVerification:
    """Verify a Decision Packet (spec "Packet verification steps" 1-4). See the `gate.packets` docstring.

    `checkpoint_log`: checkpoints a witness holds (`gate.chain.checkpoint_log.read_checkpoint_log`);
    the packet's chain must extend the newest one of its chain (`checkpoint_log` check)."""
    if not isinstance(packet, Mapping):
        raise PacketInputError("the packet to verify must be a JSON object")
    anchors = anchors or TrustAnchors()
    state = _State()
    record = packet.get("decision_record")
    record_ok = isinstance(record, Mapping)
    record_dict: dict = record if record_ok else {}

    # Step 1: packet hash, version, members, manifest, export time.
    texts = _ReceiptTexts()
    state.guard("packet_hash", _check_packet_hash, state, packet, texts)
    state.guard("packet_members", _check_members, state, packet)
    if packet.get("decision_packet_version") == DECISION_PACKET_VERSION:
        state.checks["packet_version"] = True
    else:
        state.fail("packet_version", f"decision_packet_version must be {DECISION_PACKET_VERSION}")
    state.guard("packet_manifest", _check_manifest, state, packet, record_dict)
    state.guard("exported_at", _check_exported_at, state, packet, record_dict)

    # Step 2: the embedded record, with the packet's or the supplied original input.
    record_result = None
    packet_input = packet.get("original_input")
    used_input = packet_input if packet_input is not None else original_input
    if record_ok:
        try:
            record_result = verify_record(record, anchors=anchors, original_input=used_input)
        except Exception as exc:  # noqa: BLE001
            state.fail("record", f"could not be checked ({type(exc).__name__})")
    else:
        state.fail("record", "decision_record is not an object")
    if record_result is not None:
        state.checks["record"] = record_result.integrity_valid
        if not record_result.integrity_valid:
            state.details["record"] = ["the embedded record fails: " + ", ".join(
                name for name in record_result.failed_checks)]
        for name in record_result.failed_checks:
            state.fail(f"record.{name}", None)
        for name in ("record_hash", "receipt_hash"):
            state.value(f"record.{name}", record_result.expected.get(name), record_result.actual.get(name))
        if used_input is not None:
            input_ok = record_result.checks.get("input_hash") is True
            if packet_input is not None and original_input is not None and not _canon_equal(packet_input, original_input):
                state.fail("original_input", "the supplied input differs from the packet's original_input")
            elif input_ok:
                state.checks["original_input"] = True
            else:
                state.fail("original_input", "the record's input_hash does not match the original input")
    if record_ok:
        state.guard("record_audit_chain", _check_record_audit_chain, state, record_dict)

    # Step 3: receipts linked to the record.
    if record_ok:
        state.guard("execution_receipts", _check_receipts, state, packet, record_dict, texts)
        state.guard("receipt_chain_head", _check_receipt_head, state, packet, record_dict, anchors)
    else:
        for part in _LISTED:
            state.fail(part, "no decision record to link to")

    # Step 4: intelligence report hashes and the audit chain.
    state.guard("intelligence_reports", _check_intelligence, state, packet, record_dict)
    checkpoint_source = None
    if "audit_chain" in packet:
        try:
            checkpoint_source = _check_chain(state, packet, record_dict, anchors)
        except Exception as exc:  # noqa: BLE001 - any surprise in untrusted content is a failure
            state.fail("audit_chain", f"could not be checked ({type(exc).__name__})")
    state.guard("chain_consistency", check_chain_consistency, state, packet)
    if checkpoint_log is not None:
        state.guard("checkpoint_log", check_checkpoint_log, state, packet, checkpoint_log, anchors)

    failed = tuple(sorted(name for name, outcome in state.checks.items() if outcome is False))
    # The record's own failures are summarised by `record` (its integrity) and by its
    # authenticity below; everything else that failed is an integrity failure of the packet.
    integrity_failed = [name for name in failed if name not in _AUTHENTICITY and not name.startswith("record.")]
    integrity_valid = state.checks["packet_hash"] is True and state.checks["record"] is True and not integrity_failed
    authenticity_valid = bool(record_result is not None and record_result.authenticity_valid)
    if "audit_chain" in packet:
        authenticity_valid = authenticity_valid and state.checks["audit_chain.checkpoint_signature"] is True
    if isinstance(packet.get("receipt_chain_head"), Mapping) and isinstance(record_dict.get("receipt_key_id"), str):
        authenticity_valid = authenticity_valid and state.checks["receipt_chain_head_signature"] is True
    return PacketVerification(
        verified=integrity_valid and authenticity_valid,
        integrity_valid=integrity_valid,
        authenticity_valid=authenticity_valid,
        key_source=record_result.key_source if record_result is not None else None,
        checks=state.checks,
        failed_checks=failed,
        record=record_result.to_dict() if record_result is not None else None,
        expected=state.expected,
        actual=state.actual,
        details=state.details,
        decision_id=packet.get("decision_id"),
        packet_hash=packet.get("packet_hash"),
        checkpoint_key_source=checkpoint_source,
        notes=tuple(state.notes + (list(record_result.notes) if record_result is not None else [])),
    )


def verify_packet_body(body: Any, *, anchors: TrustAnchors | None = None) -> PacketVerification:
    """Verify a packet-verify body ``{packet, input?}`` (reference facts §5)."""
    if not isinstance(body, Mapping):
        raise PacketInputError("the verify body must be a JSON object")
    packet = body.get("packet")
    if not isinstance(packet, Mapping):
        raise PacketInputError("the verify body must carry 'packet' as a JSON object")
    return verify_packet(packet, anchors=anchors, original_input=body.get("input"))
