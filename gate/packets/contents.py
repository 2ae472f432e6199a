"""Packet verification steps 3 and 4a: the listed receipts (linked to the record, newest first,
no duplicates) and the policy intelligence reports (labels, hashes, policy)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gate.chain.rowseal import RECEIPT_CHAIN_VERSION, receipt_head_payload
from gate.packets.common import (
    _LISTED,
    INTELLIGENCE_SECTIONS,
    RECEIPT_HEAD_MEMBERS,
    _canon,
    _digest_equal,
    _exact_members,
    _is_hex64,
    _is_int,
    _short,
    report_hash,
)
from gate.packets.receipts_fast import (
    _KINDS,
    _BindingCache,
    _fast_receipt_ok,
    _ReceiptTexts,
)
from gate.packets.result import _State
from gate.protocol.canonical import CanonicalJSONError
from gate.receipts import verify_receipt_links
from gate.strict_json import JsonValue
from gate.verify import TrustAnchors
from gate.verify.ledger_rows import signature_valid


def _check_receipts(state: _State, packet: Mapping[str, Any], record: Mapping[str, Any], texts: _ReceiptTexts) -> None:
    bindings = _BindingCache(record)
    for part in _LISTED:
        items = packet.get(part)
        if not isinstance(items, list):
            state.fail(part, f"{part} must be an array")
            continue
        kept = texts.by_part.get(part)
        part_texts: Sequence[str | None] = (kept if kept is not None and len(kept) == len(items)
                                            else [_canon(item) for item in items])
        slow = [i for i, item in enumerate(items)
                if not _fast_receipt_ok(part, item, part_texts[i], record, bindings)]
        failures = []
        if slow:
            chosen = [items[i] for i in slow]
            executions = packet.get("execution_receipts")
            found = verify_receipt_links(record,
                                         executions=chosen if part == "execution_receipts" else (),
                                         outcomes=chosen if part == "outcome_records" else (),
                                         syncs=chosen if part == "crm_sync_records" else (),
                                         linked_executions=executions if isinstance(executions, list) else ())
            for failure in found:
                index = slow[failure.index]
                name = f"{part}[{index}].{failure.check}"
                failures.append(name)
                state.fail(name, f"expected {_short(failure.expected)}, got {_short(failure.actual)}")
                state.value(name, failure.expected, failure.actual)
        problems = [f"{len(failures)} per-item check(s) failed, see {part}[i].*"] if failures else []
        problems += _order_and_duplicates(part, items)
        state.conclude(part, problems)


def _stored_total(packet: Mapping[str, Any]) -> int | None:
    """The sum of `packet_manifest.totals` over the three receipt lists (None when malformed)."""
    manifest = packet.get("packet_manifest")
    totals = manifest.get("totals") if isinstance(manifest, Mapping) else None
    if not isinstance(totals, Mapping) or not all(_is_int(totals.get(part)) for part in _LISTED):
        return None
    counts: list[int] = [totals[part] for part in _LISTED]
    return sum(counts)


def _check_receipt_head(state: _State, packet: Mapping[str, Any], record: Mapping[str, Any],
                        anchors: TrustAnchors) -> None:
    """`receipt_chain_head`: the decision's signed receipt count equals the receipts the packet
    says are stored (`packet_manifest.totals`), so a receipt deleted before export, or dropped
    from the packet with its totals lowered, is named; `receipt_chain_head_signature`: the head
    is signed by the record's receipt key (a trusted key only). Absent in a packet of a
    decision without receipts, and in packets exported before heads were embedded."""
    head = packet.get("receipt_chain_head")
    if head is None:
        if "receipt_chain_head" in packet:
            state.fail("receipt_chain_head", "receipt_chain_head must be an object")
        elif (_stored_total(packet) or 0) > 0:
            state.notes.append("no receipt_chain_head: the packet does not prove its receipt lists are complete")
        return
    problems: list[str] = []
    if not _exact_members(problems, "receipt_chain_head", head, frozenset(RECEIPT_HEAD_MEMBERS)):
        state.conclude("receipt_chain_head", problems)
        return
    if head.get("receipt_chain_version") != RECEIPT_CHAIN_VERSION:
        problems.append(f"receipt_chain_version must be {RECEIPT_CHAIN_VERSION}")
    if head.get("decision_id") != record.get("decision_id") or not isinstance(head.get("decision_id"), str):
        problems.append("receipt_chain_head.decision_id is not the record's")
    count, total = head.get("count"), _stored_total(packet)
    state.value("receipt_chain_head.count", count, total)
    if not _is_int(count) or count != total:
        problems.append(f"the signed receipt count is {count!r} but the packet states {total!r} receipts stored")
    if count and not _is_hex64(head.get("head_row_hash")):
        problems.append("head_row_hash must be a sha256 hex")
    state.conclude("receipt_chain_head", problems)
    _check_receipt_head_signature(state, head, record, anchors)


def _check_receipt_head_signature(state: _State, head: Mapping[str, Any], record: Mapping[str, Any],
                                  anchors: TrustAnchors) -> None:
    if not isinstance(record.get("receipt_key_id"), str):
        if head.get("signature") is not None:
            state.fail("receipt_chain_head_signature", "an unsigned record's receipt head carries a signature")
        return  # an unsigned gate keeps unsigned heads: the count is then intact but unkeyed
    payload = receipt_head_payload(head.get("decision_id"), head.get("count"), head.get("head_row_hash"),
                                   head.get("key_id"))
    valid = signature_valid(head.get("signature"), head.get("key_id"), payload, anchors)
    if valid is None:  # SECURITY: no trusted key, no proof (as for hosted verify's receipt chain)
        state.fail("receipt_chain_head_signature", "no trusted key for the receipt head's key_id")
    elif valid:
        state.checks["receipt_chain_head_signature"] = True
    else:
        state.fail("receipt_chain_head_signature", "the receipt head's signature does not verify with a trusted key")


def _order_and_duplicates(part: str, items: list[Any]) -> list[str]:
    """Newest first (non-increasing reported_at) and no receipt twice (by id and by hash)."""
    hash_member, _, id_member, *_ = _KINDS[part]
    problems = []
    stamps = [item.get("reported_at") if isinstance(item, Mapping) else None for item in items]
    for index in range(1, len(stamps)):
        before, now = stamps[index - 1], stamps[index]
        if isinstance(before, str) and isinstance(now, str) and now > before:
            problems.append(f"{part} must be newest first: [{index}] is newer than [{index - 1}]")
            break
    for member in (id_member, hash_member):
        seen: set[str] = set()
        for index, item in enumerate(items):
            value = item.get(member) if isinstance(item, Mapping) else None
            if isinstance(value, str):
                if value in seen:
                    problems.append(f"{part}[{index}] repeats {member} {value!r}")
                seen.add(value)
    return problems


def _check_intelligence(state: _State, packet: Mapping[str, JsonValue], record: Mapping[str, JsonValue]) -> None:
    """`policy_intelligence`: known sections only, each a report of the record's policy with its
    version label and its recomputed `<kind>_hash` (named `policy_intelligence.<section>.*`)."""
    if "policy_intelligence" not in packet:
        return
    intelligence = packet["policy_intelligence"]
    problems: list[str] = []
    if not isinstance(intelligence, Mapping) or not intelligence:
        state.conclude("intelligence_reports", ["policy_intelligence must be a non-empty object"])
        return
    for section, report in intelligence.items():
        prefix = f"policy_intelligence.{section}"
        spec = INTELLIGENCE_SECTIONS.get(section)
        if spec is None:
            state.fail(f"{prefix}.section", f"the sections are {sorted(INTELLIGENCE_SECTIONS)}")
            problems.append(f"{prefix} is not a known section")
            continue
        if not isinstance(report, Mapping):
            state.fail(f"{prefix}.shape", "a report must be an object")
            problems.append(f"{prefix} is not an object")
            continue
        if report.get(spec.version_member) != spec.version:
            state.fail(f"{prefix}.{spec.version_member}", f"{spec.version_member} must be {spec.version}")
            problems.append(f"{prefix}.{spec.version_member} is not {spec.version}")
        try:
            expected = report_hash(report, spec.kind)
        except (CanonicalJSONError, TypeError, ValueError, RecursionError):
            expected = None
        state.value(f"{prefix}.{spec.hash_member}", expected, report.get(spec.hash_member))
        if not _digest_equal(expected, report.get(spec.hash_member)):
            state.fail(f"{prefix}.{spec.hash_member}", f"{spec.hash_member} is not the sha256 of the report without it")
            problems.append(f"{prefix}.{spec.hash_member} does not match")
        if report.get("policy_id") != record.get("policy_id"):
            state.fail(f"{prefix}.policy_id", "the report is about another policy than the record's")
            problems.append(f"{prefix}.policy_id differs from the record's")
    state.conclude("intelligence_reports", problems)
