"""Packet verification steps 3 and 4a: the listed receipts (linked to the record, newest first,
no duplicates) and the intelligence report hashes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.canonical import CanonicalJSONError
from gate.packets.common import REPORT_TYPES, _LISTED, _canon, _digest_equal, _exact_members, _short, report_hash
from gate.packets.receipts_fast import _KINDS, _BindingCache, _fast_receipt_ok, _ReceiptTexts
from gate.packets.result import _State
from gate.receipts import verify_receipt_links


def _check_receipts(state: _State, packet: Mapping[str, Any], record: Mapping[str, Any], texts: _ReceiptTexts) -> None:
    bindings = _BindingCache(record)
    for part in _LISTED:
        items = packet.get(part)
        if not isinstance(items, list):
            state.fail(part, f"{part} must be an array")
            continue
        part_texts = texts.by_part.get(part)
        if part_texts is None or len(part_texts) != len(items):
            part_texts = [_canon(item) for item in items]
        slow = [i for i, item in enumerate(items)
                if not _fast_receipt_ok(part, item, part_texts[i], record, bindings)]
        failures = []
        if slow:
            chosen = [items[i] for i in slow]
            arguments = {"executions": (), "outcomes": (), "syncs": ()}
            arguments[{"execution_receipts": "executions", "outcome_records": "outcomes",
                       "crm_sync_records": "syncs"}[part]] = chosen
            for failure in verify_receipt_links(record, **arguments):
                index = slow[failure.index]
                name = f"{part}[{index}].{failure.check}"
                failures.append(name)
                state.fail(name, f"expected {_short(failure.expected)}, got {_short(failure.actual)}")
                state.value(name, failure.expected, failure.actual)
        problems = [f"{len(failures)} per-item check(s) failed, see {part}[i].*"] if failures else []
        problems += _order_and_duplicates(part, items)
        state.conclude(part, problems)


def _order_and_duplicates(part: str, items: list) -> list[str]:
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


def _check_intelligence(state: _State, packet: Mapping[str, Any], record: Mapping[str, Any]) -> None:
    if "intelligence" not in packet:
        return
    intelligence = packet["intelligence"]
    problems: list[str] = []
    if not _exact_members(problems, "intelligence", intelligence, frozenset({"reports"})) \
            or not isinstance(intelligence.get("reports"), list):
        problems.append("intelligence.reports must be an array")
        state.conclude("intelligence_reports", problems)
        return
    for index, report in enumerate(intelligence["reports"]):
        prefix = f"intelligence_reports[{index}]"
        if not isinstance(report, Mapping):
            state.fail(f"{prefix}.shape", "a report must be an object")
            problems.append(f"{prefix} is not an object")
            continue
        report_type = report.get("report_type")
        if report_type not in REPORT_TYPES:
            state.fail(f"{prefix}.report_type", f"report_type must be one of {list(REPORT_TYPES)}")
            problems.append(f"{prefix}.report_type is {report_type!r}")
            continue
        hash_member = f"{report_type}_hash"
        try:
            expected = report_hash(report)
        except (CanonicalJSONError, TypeError, ValueError, RecursionError):
            expected = None
        state.value(f"{prefix}.{hash_member}", expected, report.get(hash_member))
        if not _digest_equal(expected, report.get(hash_member)):
            state.fail(f"{prefix}.{hash_member}", f"{hash_member} is not the sha256 of the report without it")
            problems.append(f"{prefix}.{hash_member} does not match")
        if "policy_id" in report and report.get("policy_id") != record.get("policy_id"):
            state.fail(f"{prefix}.policy_id", "the report is about another policy than the record's")
            problems.append(f"{prefix}.policy_id differs from the record's")
    state.conclude("intelligence_reports", problems)
