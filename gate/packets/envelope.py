"""Packet verification step 1, the packet's own envelope: `packet_hash`, the member set, the
manifest (options, component counts, totals) and the export time."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from gate.packets.common import (
    _COMPONENT_NAMES,
    _ISO_MS,
    _LIMIT_OF,
    _LISTED,
    _MANIFEST_MEMBERS,
    _OPTION_NAMES,
    _REQUIRED_MEMBERS,
    LIMIT_MAX,
    LIMIT_MIN,
    PACKET_MEMBERS,
    _digest_equal,
    _exact_members,
    _is_int,
    _is_iso_ms,
)
from gate.packets.receipts_fast import _packet_text, _ReceiptTexts
from gate.packets.result import _State
from gate.protocol.canonical import CanonicalJSONError
from gate.vocabulary import CANONICALIZATION, HASH_ALGORITHM


def _check_packet_hash(state: _State, packet: Mapping[str, Any], texts: _ReceiptTexts) -> None:
    try:
        expected = hashlib.sha256(_packet_text(packet, texts).encode("utf-8")).hexdigest()
    except (CanonicalJSONError, TypeError, ValueError, RecursionError):
        texts.by_part.clear()
        expected = None
    state.value("packet_hash", expected, packet.get("packet_hash"))
    if _digest_equal(expected, packet.get("packet_hash")):
        state.checks["packet_hash"] = True
    else:
        state.fail("packet_hash", "packet_hash is not the sha256 of the canonical packet without packet_hash"
                   if expected else "the packet cannot be canonicalised")


def _check_members(state: _State, packet: Mapping[str, Any]) -> None:
    problems = [f"unknown member {name!r}" for name in sorted(set(packet) - PACKET_MEMBERS, key=str)]
    problems += [f"missing member {name!r}" for name in _REQUIRED_MEMBERS if name not in packet]
    problems += [f"{name} must be an array" for name in _LISTED if name in packet and not isinstance(packet[name], list)]
    state.conclude("packet_members", problems)


def _check_manifest(state: _State, packet: Mapping[str, Any], record: Mapping[str, Any]) -> None:
    problems: list[str] = []
    for name, source in (("decision_id", "decision_id"), ("record_hash", "record_hash"), ("receipt_hash", "receipt_hash")):
        if packet.get(name) is None or packet.get(name) != record.get(source) or not isinstance(packet.get(name), str):
            problems.append(f"{name} differs from the decision record's {source}")
    manifest = packet.get("packet_manifest")
    _exact_members(problems, "packet_manifest", manifest, _MANIFEST_MEMBERS)
    if not isinstance(manifest, Mapping):
        state.conclude("packet_manifest", problems)
        return
    if manifest.get("canonicalization") != CANONICALIZATION:
        problems.append(f"canonicalization must be {CANONICALIZATION}")
    if manifest.get("hash_algorithm") != HASH_ALGORITHM:
        problems.append(f"hash_algorithm must be {HASH_ALGORITHM}")

    options = manifest.get("options")
    options_ok = _exact_members(problems, "options", options, frozenset(_OPTION_NAMES))
    if options_ok:
        for name in _OPTION_NAMES:
            value = options[name]
            if name.startswith("include_"):
                if type(value) is not bool:
                    problems.append(f"options.{name} must be a boolean")
                    options_ok = False
            elif not _is_int(value) or not LIMIT_MIN <= value <= LIMIT_MAX:
                problems.append(f"options.{name} must be an integer {LIMIT_MIN}..{LIMIT_MAX}")
                options_ok = False
    if options_ok:
        presence = (("include_input", "original_input"), ("include_chain", "audit_chain"))
        for option, member in presence:
            if options[option] != (member in packet):
                problems.append(f"options.{option} is {options[option]} but {member} is "
                                f"{'present' if member in packet else 'absent'}")
        if "policy_intelligence" in packet and options["include_intelligence"] is not True:
            problems.append("policy_intelligence is present but options.include_intelligence is false")

    components = manifest.get("components")
    if _exact_members(problems, "components", components, frozenset(_COMPONENT_NAMES)):
        chain = packet.get("audit_chain")
        intelligence = packet.get("policy_intelligence")
        actual_counts = {
            "decision_record": 1,
            "original_input": 1 if "original_input" in packet else 0,
            "audit_chain_links": len(chain["links"]) if isinstance(chain, Mapping) and isinstance(chain.get("links"), list) else 0,
            "intelligence_reports": len(intelligence) if isinstance(intelligence, Mapping) else 0,
        }
        for part in _LISTED:
            actual_counts[part] = len(packet[part]) if isinstance(packet.get(part), list) else 0
        for name in _COMPONENT_NAMES:
            if not _is_int(components[name]) or components[name] != actual_counts[name]:
                problems.append(f"components.{name} is {components[name]!r}, the packet has {actual_counts[name]}")

    totals, truncated = manifest.get("totals"), manifest.get("truncated")
    totals_ok = _exact_members(problems, "totals", totals, frozenset(_LISTED))
    truncated_ok = _exact_members(problems, "truncated", truncated, frozenset(_LISTED))
    if totals_ok and truncated_ok:
        for part in _LISTED:
            count = len(packet[part]) if isinstance(packet.get(part), list) else 0
            total, cut = totals[part], truncated[part]
            if not _is_int(total) or total < count:
                problems.append(f"totals.{part} is {total!r}, below the {count} exported")
                continue
            if type(cut) is not bool or cut != (count < total):
                problems.append(f"truncated.{part} is {cut!r}, expected {count < total}")
            if options_ok and count != min(options[_LIMIT_OF[part]], total):
                problems.append(f"{part}: {count} exported, but {_LIMIT_OF[part]} "
                                f"{options[_LIMIT_OF[part]]} of {total} stored gives {min(options[_LIMIT_OF[part]], total)}")
    state.conclude("packet_manifest", problems)


def _latest(values: Iterable[Any]) -> str | None:
    stamps = [value for value in values if isinstance(value, str) and _ISO_MS.fullmatch(value)]
    return max(stamps) if stamps else None


def _check_exported_at(state: _State, packet: Mapping[str, Any], record: Mapping[str, Any]) -> None:
    exported_at = packet.get("exported_at")
    if not _is_iso_ms(exported_at):
        state.fail("exported_at", "exported_at must be ISO 8601 UTC with milliseconds and Z")
        return
    problems = []
    chain = packet.get("audit_chain") if isinstance(packet.get("audit_chain"), Mapping) else {}
    links = chain.get("links") if isinstance(chain.get("links"), list) else []
    checkpoint = chain.get("checkpoint") if isinstance(chain.get("checkpoint"), Mapping) else {}
    earlier = {
        "decision_record.created_at": record.get("created_at"),
        "audit_chain.checkpoint.created_at": checkpoint.get("created_at"),
        "audit_chain.links[].created_at": _latest(link.get("created_at") for link in links if isinstance(link, Mapping)),
    }
    for part in _LISTED:
        items = packet.get(part) if isinstance(packet.get(part), list) else []
        earlier[f"{part}[].reported_at"] = _latest(item.get("reported_at") for item in items if isinstance(item, Mapping))
    for label, stamp in earlier.items():
        if isinstance(stamp, str) and _ISO_MS.fullmatch(stamp) and stamp > exported_at:
            problems.append(f"exported_at is earlier than {label} ({stamp})")
    state.conclude("exported_at", problems)
