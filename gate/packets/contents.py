"""Packet verification steps 3 and 4a: the listed receipts (linked to the record, newest first,
no duplicates) and the policy intelligence reports (labels, hashes, policy)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.canonical import CanonicalJSONError
from gate.packets.common import INTELLIGENCE_SECTIONS, _LISTED, _canon, _digest_equal, _short, report_hash
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
