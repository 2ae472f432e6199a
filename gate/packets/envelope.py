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
    _array,
    _digest_equal,
    _exact_members,
    _is_int,
    _is_iso_ms,
    _object,
)
from gate.packets.receipts_fast import _packet_text, _ReceiptTexts
from gate.packets.result import _State
from gate.protocol.canonical import CanonicalJSONError
from gate.strict_json import JsonValue
from gate.vocabulary import CANONICALIZATION, HASH_ALGORITHM


def _check_packet_hash(state: _State, packet: Mapping[str, JsonValue], texts: _ReceiptTexts) -> None:
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


def _check_members(state: _State, packet: Mapping[str, JsonValue]) -> None:
    problems = [f"unknown member {name!r}" for name in sorted(set(packet) - PACKET_MEMBERS, key=str)]
    problems += [f"missing member {name!r}" for name in _REQUIRED_MEMBERS if name not in packet]
    problems += [f"{name} must be an array" for name in _LISTED if name in packet and not isinstance(packet[name], list)]
    state.conclude("packet_members", problems)


def _identity_problems(packet: Mapping[str, JsonValue], record: Mapping[str, JsonValue]) -> list[str]:
    """The packet's `decision_id`, `record_hash` and `receipt_hash` are the record's."""
    problems = []
    for name in ("decision_id", "record_hash", "receipt_hash"):
        if packet.get(name) is None or packet.get(name) != record.get(name) or not isinstance(packet.get(name), str):
            problems.append(f"{name} differs from the decision record's {name}")
    return problems


def _algorithm_problems(manifest: Mapping[str, JsonValue]) -> list[str]:
    problems = []
    if manifest.get("canonicalization") != CANONICALIZATION:
        problems.append(f"canonicalization must be {CANONICALIZATION}")
    if manifest.get("hash_algorithm") != HASH_ALGORITHM:
        problems.append(f"hash_algorithm must be {HASH_ALGORITHM}")
    return problems


def _options_problems(options: Any) -> list[str]:
    """`options`: exactly the option names, booleans for the `include_*` ones, limits in range."""
    problems: list[str] = []
    if not _exact_members(problems, "options", options, frozenset(_OPTION_NAMES)):
        return problems
    for name in _OPTION_NAMES:
        value = options[name]
        if name.startswith("include_"):
            if type(value) is not bool:
                problems.append(f"options.{name} must be a boolean")
        elif not _is_int(value) or not LIMIT_MIN <= value <= LIMIT_MAX:
            problems.append(f"options.{name} must be an integer {LIMIT_MIN}..{LIMIT_MAX}")
    return problems


def _presence_problems(options: Mapping[str, JsonValue], packet: Mapping[str, JsonValue]) -> list[str]:
    """The optional members are present exactly as the (valid) options say."""
    problems = []
    for option, member in (("include_input", "original_input"), ("include_chain", "audit_chain")):
        if options[option] != (member in packet):
            problems.append(f"options.{option} is {options[option]} but {member} is "
                            f"{'present' if member in packet else 'absent'}")
    if "policy_intelligence" in packet and options["include_intelligence"] is not True:
        problems.append("policy_intelligence is present but options.include_intelligence is false")
    return problems


def _exported_count(packet: Mapping[str, JsonValue], part: str) -> int:
    return len(_array(packet.get(part)))


def _component_counts(packet: Mapping[str, Any]) -> dict[str, int]:
    """What the packet holds, per component name."""
    chain = packet.get("audit_chain")
    intelligence = packet.get("policy_intelligence")
    counts = {
        "decision_record": 1,
        "original_input": 1 if "original_input" in packet else 0,
        "audit_chain_links": len(chain["links"]) if isinstance(chain, Mapping) and isinstance(chain.get("links"), list) else 0,
        "intelligence_reports": len(intelligence) if isinstance(intelligence, Mapping) else 0,
    }
    for part in _LISTED:
        counts[part] = _exported_count(packet, part)
    return counts


def _components_problems(components: Any, packet: Mapping[str, JsonValue]) -> list[str]:
    """`components`: exactly the component names, each the count the packet holds."""
    problems: list[str] = []
    if not _exact_members(problems, "components", components, frozenset(_COMPONENT_NAMES)):
        return problems
    actual_counts = _component_counts(packet)
    for name in _COMPONENT_NAMES:
        if not _is_int(components[name]) or components[name] != actual_counts[name]:
            problems.append(f"components.{name} is {components[name]!r}, the packet has {actual_counts[name]}")
    return problems


def _totals_problems(manifest: Mapping[str, Any], packet: Mapping[str, Any],
                     options: Mapping[str, Any] | None) -> list[str]:
    """`totals` and `truncated` per listed part: a total at least the exported count, a truncation
    mark that says whether it is more, and (with valid options) the count its limit gives."""
    problems: list[str] = []
    totals, truncated = manifest.get("totals"), manifest.get("truncated")
    totals_ok = _exact_members(problems, "totals", totals, frozenset(_LISTED))
    truncated_ok = _exact_members(problems, "truncated", truncated, frozenset(_LISTED))
    if not (totals_ok and truncated_ok and isinstance(totals, Mapping) and isinstance(truncated, Mapping)):
        return problems
    for part in _LISTED:
        count = _exported_count(packet, part)
        total, cut = totals[part], truncated[part]
        if not _is_int(total) or total < count:
            problems.append(f"totals.{part} is {total!r}, below the {count} exported")
            continue
        if type(cut) is not bool or cut != (count < total):
            problems.append(f"truncated.{part} is {cut!r}, expected {count < total}")
        if options is not None and count != min(options[_LIMIT_OF[part]], total):
            problems.append(f"{part}: {count} exported, but {_LIMIT_OF[part]} "
                            f"{options[_LIMIT_OF[part]]} of {total} stored gives {min(options[_LIMIT_OF[part]], total)}")
    return problems


def _check_manifest(state: _State, packet: Mapping[str, Any], record: Mapping[str, Any]) -> None:
    problems = _identity_problems(packet, record)
    manifest = packet.get("packet_manifest")
    _exact_members(problems, "packet_manifest", manifest, _MANIFEST_MEMBERS)
    if not isinstance(manifest, Mapping):
        state.conclude("packet_manifest", problems)
        return
    problems += _algorithm_problems(manifest)
    option_problems = _options_problems(manifest.get("options"))
    problems += option_problems
    options: Mapping[str, Any] | None = None if option_problems else manifest["options"]
    if options is not None:
        problems += _presence_problems(options, packet)
    problems += _components_problems(manifest.get("components"), packet)
    problems += _totals_problems(manifest, packet, options)
    state.conclude("packet_manifest", problems)


def _latest(values: Iterable[Any]) -> str | None:
    stamps = [value for value in values if isinstance(value, str) and _ISO_MS.fullmatch(value)]
    return max(stamps) if stamps else None


def _check_exported_at(state: _State, packet: Mapping[str, JsonValue], record: Mapping[str, JsonValue]) -> None:
    exported_at = packet.get("exported_at")
    if not _is_iso_ms(exported_at):
        state.fail("exported_at", "exported_at must be ISO 8601 UTC with milliseconds and Z")
        return
    problems = []
    chain = _object(packet.get("audit_chain"))
    links = _array(chain.get("links"))
    checkpoint = _object(chain.get("checkpoint"))
    earlier = {
        "decision_record.created_at": record.get("created_at"),
        "audit_chain.checkpoint.created_at": checkpoint.get("created_at"),
        "audit_chain.links[].created_at": _latest(link.get("created_at") for link in links if isinstance(link, Mapping)),
    }
    for part in _LISTED:
        items = _array(packet.get(part))
        earlier[f"{part}[].reported_at"] = _latest(item.get("reported_at") for item in items if isinstance(item, Mapping))
    holds = _array(packet.get("hold_events"))
    earlier["hold_events[].created_at"] = _latest(event.get("created_at") for event in holds if isinstance(event, Mapping))
    earlier["hold_commitment.as_of"] = _object(packet.get("hold_commitment")).get("as_of")
    for label, stamp in earlier.items():
        if isinstance(stamp, str) and _ISO_MS.fullmatch(stamp) and stamp > exported_at:
            problems.append(f"exported_at is earlier than {label} ({stamp})")
    state.conclude("exported_at", problems)
