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
from gate.packets.hold_checks import check_hold_checkpoint_log, check_hold_events
from gate.packets.receipts_fast import _ReceiptTexts
from gate.packets.result import PacketVerification, _State
from gate.packets.witness import check_chain_consistency, check_checkpoint_log
from gate.strict_json import JsonValue
from gate.verify import TrustAnchors, VerificationResult, verify_record
from gate.verify.remainder import removed, verify_remainder
from gate.vocabulary import DECISION_PACKET_VERSION


def _check_envelope(state: _State, packet: Mapping[str, JsonValue], record: Mapping[str, JsonValue],
                    texts: _ReceiptTexts) -> None:
    """Step 1: packet hash, members, version, manifest, export time."""
    state.guard("packet_hash", _check_packet_hash, state, packet, texts)
    state.guard("packet_members", _check_members, state, packet)
    if packet.get("decision_packet_version") == DECISION_PACKET_VERSION:
        state.checks["packet_version"] = True
    else:
        state.fail("packet_version", f"decision_packet_version must be {DECISION_PACKET_VERSION}")
    state.guard("packet_manifest", _check_manifest, state, packet, record)
    state.guard("exported_at", _check_exported_at, state, packet, record)


def _verify_embedded_record(state: _State, record: Any, anchors: TrustAnchors,
                            used_input: Any) -> VerificationResult | None:
    """Step 2: the embedded record through the record verifier (None: it could not be checked)."""
    if not isinstance(record, Mapping):
        state.fail("record", "decision_record is not an object")
        return None
    try:
        if removed(record) is not None:  # its inputs were removed: what remains is checked (gate.verify.remainder)
            return verify_remainder(record, anchors)
        return verify_record(record, anchors=anchors, original_input=used_input)
    except Exception as exc:  # noqa: BLE001 - any surprise in untrusted content is a failure
        state.fail("record", f"could not be checked ({type(exc).__name__})")
        return None


def _report_record(state: _State, result: VerificationResult, record: Any) -> None:
    """The record verifier's outcome as the packet's `record` and `record.*` checks."""
    state.checks["record"] = result.integrity_valid
    gone = removed(record)
    if gone is not None:
        state.details["record"] = [(f"the record's inputs were removed by {gone.get('cause')} ({gone.get('ref')}, "
                                    f"{gone.get('removed_at')}): its hashes, receipt signature and chain membership "
                                    "are checked, its body is not in the packet")]
    if not result.integrity_valid:
        state.details["record"] = ["the embedded record fails: " + ", ".join(
            name for name in result.failed_checks)]
    for name in result.failed_checks:
        state.fail(f"record.{name}", None)
    for name in ("record_hash", "receipt_hash"):
        state.value(f"record.{name}", result.expected.get(name), result.actual.get(name))


def _check_original_input(state: _State, result: VerificationResult, packet_input: Any,
                          original_input: Any) -> None:
    """`original_input`: the packet's and the supplied input agree, and the record's
    `input_hash` is theirs (not applicable when neither is given)."""
    if packet_input is None and original_input is None:
        return
    if packet_input is not None and original_input is not None and not _canon_equal(packet_input, original_input):
        state.fail("original_input", "the supplied input differs from the packet's original_input")
    elif result.checks.get("input_hash") is True:
        state.checks["original_input"] = True
    else:
        state.fail("original_input", "the record's input_hash does not match the original input")


def _check_linked_receipts(state: _State, packet: Mapping[str, JsonValue], record: Any, anchors: TrustAnchors,
                           texts: _ReceiptTexts) -> None:
    """Step 3: the receipts and the receipt head, linked to the record; the hold's signed events."""
    if isinstance(record, Mapping):
        state.guard("execution_receipts", _check_receipts, state, packet, record, texts)
        state.guard("receipt_chain_head", _check_receipt_head, state, packet, record, anchors)
        state.guard("hold_events", check_hold_events, state, packet, record, anchors)
    else:
        for part in _LISTED:
            state.fail(part, "no decision record to link to")


def _check_chain_material(state: _State, packet: Mapping[str, JsonValue], record: Mapping[str, JsonValue],
                          anchors: TrustAnchors, checkpoint_log: Sequence[Mapping[str, JsonValue]] | None,
                          hold_checkpoints: Sequence[Mapping[str, JsonValue]] | None) -> str | None:
    """Step 4: intelligence report hashes, the audit chain, its consistency proof and the held
    checkpoints (of the audit chain and of the hold chain). Returns where the checkpoint's key
    came from (None: no checkpoint checked)."""
    state.guard("intelligence_reports", _check_intelligence, state, packet, record)
    checkpoint_source = None
    if "audit_chain" in packet:
        try:
            checkpoint_source = _check_chain(state, packet, record, anchors)
        except Exception as exc:  # noqa: BLE001 - any surprise in untrusted content is a failure
            state.fail("audit_chain", f"could not be checked ({type(exc).__name__})")
    state.guard("chain_consistency", check_chain_consistency, state, packet)
    if checkpoint_log is not None:
        state.guard("checkpoint_log", check_checkpoint_log, state, packet, checkpoint_log, anchors)
    if hold_checkpoints is not None:
        state.guard("hold_checkpoint_log", check_hold_checkpoint_log, state, packet, hold_checkpoints, anchors)
    return checkpoint_source


def _integrity_valid(state: _State, failed: Sequence[str]) -> bool:
    """The packet hash and the record hold, and nothing else failed. The record's own failures
    are summarised by `record` (its integrity) and by authenticity; everything else that failed
    is an integrity failure of the packet."""
    integrity_failed = [name for name in failed if name not in _AUTHENTICITY and not name.startswith("record.")]
    return state.checks["packet_hash"] is True and state.checks["record"] is True and not integrity_failed


def _authenticity_valid(state: _State, packet: Mapping[str, JsonValue], record: Mapping[str, JsonValue],
                        result: VerificationResult | None) -> bool:
    """The record's signature, and, when present, the checkpoint's, the receipt head's and the
    hold events', proven with trusted keys."""
    valid = bool(result is not None and result.authenticity_valid)
    if "audit_chain" in packet:
        valid = valid and state.checks["audit_chain.checkpoint_signature"] is True
    if isinstance(packet.get("receipt_chain_head"), Mapping) and isinstance(record.get("receipt_key_id"), str):
        valid = valid and state.checks["receipt_chain_head_signature"] is True
    if "hold_events" in packet:
        valid = valid and state.checks["hold_events_signature"] is True
    if "hold_commitment" in packet:
        valid = valid and state.checks["hold_commitment_signature"] is True
    return valid


def _conclusion(state: _State, packet: Mapping[str, JsonValue], record: Mapping[str, JsonValue],
                result: VerificationResult | None, checkpoint_source: str | None) -> PacketVerification:
    failed = tuple(sorted(name for name, outcome in state.checks.items() if outcome is False))
    integrity_valid = _integrity_valid(state, failed)
    authenticity_valid = _authenticity_valid(state, packet, record, result)
    return PacketVerification(
        verified=integrity_valid and authenticity_valid,
        integrity_valid=integrity_valid,
        authenticity_valid=authenticity_valid,
        key_source=result.key_source if result is not None else None,
        checks=state.checks,
        failed_checks=failed,
        record=result.to_dict() if result is not None else None,
        expected=state.expected,
        actual=state.actual,
        details=state.details,
        decision_id=packet.get("decision_id"),
        packet_hash=packet.get("packet_hash"),
        checkpoint_key_source=checkpoint_source,
        notes=tuple(state.notes + (list(result.notes) if result is not None else [])),
    )


def verify_packet(
    packet: Any,
    *,
    anchors: TrustAnchors | None = None,
    original_input: Any = None,
    checkpoint_log: Sequence[Mapping[str, JsonValue]] | None = None,
    hold_checkpoints: Sequence[Mapping[str, JsonValue]] | None = None,
) -> PacketVerification:
    """Verify a Decision Packet (spec "Packet verification steps" 1-4). See the `gate.packets` docstring.

    `checkpoint_log`: checkpoints a witness holds (`gate.chain.checkpoint_log.read_checkpoint_log`);
    the packet's chain must extend the newest one of its chain (`checkpoint_log` check), and its
    hold commitment the one of its hold chain (`hold_checkpoint_log`). `hold_checkpoints`: the
    checkpoints for the hold chain alone (default: `checkpoint_log`; hosted verify passes the
    gate's own newest one)."""
    if not isinstance(packet, Mapping):
        raise PacketInputError("the packet to verify must be a JSON object")
    anchors = anchors or TrustAnchors()
    state = _State()
    record = packet.get("decision_record")
    record_view: Mapping[str, JsonValue] = record if isinstance(record, Mapping) else {}
    texts = _ReceiptTexts()

    _check_envelope(state, packet, record_view, texts)
    packet_input = packet.get("original_input")
    result = _verify_embedded_record(state, record, anchors,
                                     packet_input if packet_input is not None else original_input)
    if result is not None:
        _report_record(state, result, record)
        _check_original_input(state, result, packet_input, original_input)
    if isinstance(record, Mapping):
        state.guard("record_audit_chain", _check_record_audit_chain, state, record_view)
    _check_linked_receipts(state, packet, record, anchors, texts)
    checkpoint_source = _check_chain_material(state, packet, record_view, anchors, checkpoint_log,
                                              checkpoint_log if hold_checkpoints is None else hold_checkpoints)
    return _conclusion(state, packet, record_view, result, checkpoint_source)


def verify_packet_body(body: Any, *, anchors: TrustAnchors | None = None) -> PacketVerification:
    """Verify a packet-verify body ``{packet, input?}`` (reference facts §5)."""
    if not isinstance(body, Mapping):
        raise PacketInputError("the verify body must be a JSON object")
    packet = body.get("packet")
    if not isinstance(packet, Mapping):
        raise PacketInputError("the verify body must carry 'packet' as a JSON object")
    return verify_packet(packet, anchors=anchors, original_input=body.get("input"))
