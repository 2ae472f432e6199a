"""`build_packet`: the packet for one stored record, from the parts the service read.

It raises `PacketSourceError` rather than emit inconsistent proof material (never partial proof
material) and checks its own output's `exported_at` with the verifier's step.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict, cast

from gate.chain.links import LINK_HASH_MEMBERS, ChainLink, stated_audit_chain, verify_links
from gate.chain.merkle import Checkpoint, verify_inclusion
from gate.chain.rowseal import RECEIPT_CHAIN_VERSION
from gate.holds.events import (
    HELD_VERDICT,
    HoldCommitment,
    HoldEvent,
    commitment_problems,
    hold_events_problems,
)
from gate.keys.signing import iso_timestamp
from gate.packets.common import (
    _COMPONENT_NAMES,
    _LINK_MEMBERS,
    _LISTED,
    VERIFICATION_HINTS,
    PacketSourceError,
    _canon_equal,
    _is_int,
    _is_iso_ms,
    sealed_report_problem,
)
from gate.packets.envelope import _check_exported_at
from gate.packets.excerpt import ChainExcerpt, chain_window
from gate.packets.members import (
    AuditChain,
    ChainConsistency,
    ConsistencyFrom,
    DecisionPacket,
    PacketManifest,
    ReceiptChainHead,
    UnsealedPacket,
)
from gate.packets.options import PacketOptions
from gate.packets.result import _State
from gate.packets.witness import consistency_member
from gate.protocol.canonical import sha256_hex
from gate.strict_json import JsonValue
from gate.vocabulary import (
    CANONICALIZATION,
    CHAIN_MERKLE_STRATEGY,
    CHAIN_TREE_ALGORITHM,
    DECISION_CHAIN_VERSION,
    DECISION_PACKET_VERSION,
    HASH_ALGORITHM,
)


def _link_view(link: ChainLink) -> ChainLink:
    """The link's own members copied, in `ChainLink` order (`LINK_HASH_MEMBERS`, then `link_hash`):
    the store's extra members dropped."""
    return cast(ChainLink, {name: copy.deepcopy(link.get(name)) for name in (*LINK_HASH_MEMBERS, "link_hash")})


def _window_links(chain: ChainExcerpt, first: int, last: int) -> list[ChainLink]:
    """The excerpt's links, copied: PacketSourceError unless they are the links `first..last`
    of one chain, with every link member, and verify."""
    if not all(isinstance(link, Mapping) and set(link) >= _LINK_MEMBERS for link in chain.links):
        raise PacketSourceError("audit chain links must carry every link member (parse the stored link JSON)")
    links = [_link_view(link) for link in chain.links]
    positions = [link["chain_position"] for link in links]
    if positions != list(range(first, last + 1)):
        raise PacketSourceError(f"audit chain excerpt must hold the links {first}..{last}")
    if not verify_links(links).valid or any(link["chain_id"] != chain.chain_id for link in links):
        raise PacketSourceError("the stored audit chain links do not verify")
    return links


def _check_record_link(record: Mapping[str, JsonValue], record_link: ChainLink, position: int) -> None:
    """PacketSourceError unless the link at the record's position is the record's own."""
    for member in ("decision_id", "record_hash", "receipt_hash"):
        if record_link.get(member) != record.get(member):
            raise PacketSourceError(f"the link at position {position} is not this record's")
    if record.get("audit_chain") is not None and not _canon_equal(record["audit_chain"], stated_audit_chain(record_link)):
        raise PacketSourceError("the record's audit_chain member is not its stored link")


def _check_head_and_checkpoint(chain: ChainExcerpt, links: Sequence[ChainLink], last: int,
                               checkpoint: Checkpoint) -> None:
    """PacketSourceError unless a window that reaches the head ends on it, and the checkpoint is
    for this chain and size."""
    if last == chain.chain_size and (links[-1]["link_hash"] != chain.head_link_hash
                                     or links[-1]["merkle_root"] != chain.merkle_root):
        raise PacketSourceError("the last link is not the chain head")
    if checkpoint.get("chain_id") != chain.chain_id or checkpoint.get("tree_size") != chain.chain_size:
        raise PacketSourceError("the checkpoint is not for this chain and size")


def _audit_chain_member(record: Mapping[str, JsonValue], chain: ChainExcerpt, chain_limit: int) -> AuditChain:
    """The packet's `audit_chain`; PacketSourceError when the excerpt is not self-consistent."""
    try:
        first, last = chain_window(chain.record_position, chain.chain_size, chain_limit)
    except ValueError as exc:
        raise PacketSourceError(f"audit chain excerpt: {exc}") from exc
    links = _window_links(chain, first, last)
    record_link = links[chain.record_position - first]
    _check_record_link(record, record_link, chain.record_position)
    checkpoint = copy.deepcopy(chain.checkpoint)
    _check_head_and_checkpoint(chain, links, last, checkpoint)
    leaf = record_link["leaf_hash"]
    proof = list(chain.inclusion_proof)
    root = checkpoint.get("root_hash")
    if not isinstance(root, str) or not verify_inclusion(chain.record_position - 1, chain.chain_size, leaf, proof, root):
        raise PacketSourceError("the inclusion proof does not lead to the checkpoint root")
    return {
        "chain_id": chain.chain_id,
        "decision_chain_version": DECISION_CHAIN_VERSION,
        "merkle_strategy": CHAIN_MERKLE_STRATEGY,
        "chain_size": chain.chain_size,
        "merkle_root": chain.merkle_root,
        "head_link_hash": chain.head_link_hash,
        "links": links,
        "window": {
            "first_position": first,
            "last_position": last,
            "previous_link_hash": links[0]["previous_link_hash"],
            "previous_merkle_root": links[0]["previous_merkle_root"],
        },
        "record_position": chain.record_position,
        "inclusion_proof": {
            "tree_algorithm": CHAIN_TREE_ALGORITHM,
            "leaf_index": chain.record_position - 1,
            "tree_size": chain.chain_size,
            "leaf_hash": leaf,
            "proof": proof,
        },
        "checkpoint": checkpoint,
        "verification_hints": dict(VERIFICATION_HINTS),
    }


def _intelligence_section(record: Mapping[str, JsonValue], section: str, report: Any) -> dict[str, JsonValue]:
    """One sealed report for `policy_intelligence`; PacketSourceError unless it is a report of
    the record's policy with its version label and a matching hash."""
    problem = sealed_report_problem(section, report)
    if problem is not None:
        raise PacketSourceError(f"policy_intelligence.{section}: {problem}")
    if report.get("policy_id") != record.get("policy_id"):
        raise PacketSourceError(f"policy_intelligence.{section}: a report about another policy")
    return copy.deepcopy(dict(report))


def _intelligence_member(record: Mapping[str, JsonValue], options: PacketOptions,
                         policy_intelligence: Mapping[str, Mapping[str, JsonValue]] | None) -> dict[str, dict[str, JsonValue]]:
    """The packet's `policy_intelligence` (empty: no member)."""
    if not options.include_intelligence or policy_intelligence is None:
        return {}
    return {section: _intelligence_section(record, section, report)
            for section, report in policy_intelligence.items()}


def _receipt_head_member(record: Mapping[str, JsonValue], head: Mapping[str, JsonValue] | None) -> ReceiptChainHead | None:
    """The packet's `receipt_chain_head` copied from the stored head (None: no member).

    Its count is exported as stored, even when it differs from `totals`: the verifier names the
    difference (a receipt deleted before export); PacketSourceError when it is not this
    decision's head."""
    if head is None:
        return None
    member: ReceiptChainHead = {
        "receipt_chain_version": RECEIPT_CHAIN_VERSION,
        "decision_id": record["decision_id"],
        "count": head.get("count"),
        "head_row_hash": head.get("head_row_hash"),
        "key_id": head.get("key_id"),
        "signature": head.get("signature"),
    }
    if head.get("decision_id", record["decision_id"]) != record["decision_id"] or not _is_int(member["count"]):
        raise PacketSourceError("the receipt chain head is not this decision's")
    return member


@dataclass(frozen=True)
class _ListedParts:
    """The three receipt lists as exported (newest first, each cut to its limit), with the
    stored total and the truncation mark of each."""

    items: dict[str, list[dict[str, JsonValue]]]
    totals: dict[str, int]
    truncated: dict[str, bool]


def _listed_parts(options: PacketOptions, given: Mapping[str, Sequence[Mapping[str, JsonValue]]],
                  totals: Mapping[str, int] | None) -> _ListedParts:
    """Cut each list to its limit; PacketSourceError when what was read does not fit the stored total."""
    stated_totals = dict(totals) if totals is not None else {}
    listed = _ListedParts({}, {}, {})
    for part in _LISTED:
        limit = options.limit_for(part)
        total = stated_totals.get(part, len(given[part]))
        chosen = [copy.deepcopy(dict(item)) for item in given[part][:limit]]
        if not _is_int(total) or total < len(chosen) or len(chosen) != min(limit, total):
            raise PacketSourceError(f"{part}: {len(chosen)} records read do not fit the stored total {total!r}")
        listed.items[part] = chosen
        listed.totals[part] = total
        listed.truncated[part] = len(chosen) < total
    return listed


def _manifest(options: PacketOptions, listed: _ListedParts, audit_chain: AuditChain | None,
              intelligence_reports: int) -> PacketManifest:
    components = {
        "decision_record": 1,
        "original_input": 1 if options.include_input else 0,
        **{part: len(items) for part, items in listed.items.items()},
        "audit_chain_links": len(audit_chain["links"]) if audit_chain else 0,
        "intelligence_reports": intelligence_reports,
    }
    return {
        "canonicalization": CANONICALIZATION,
        "hash_algorithm": HASH_ALGORITHM,
        "options": options.to_dict(),
        "components": {name: components[name] for name in _COMPONENT_NAMES},
        "totals": listed.totals,
        "truncated": listed.truncated,
    }


def _check_record_and_options(record: Any, options: Any) -> None:
    if not isinstance(record, Mapping) or not all(
        isinstance(record.get(name), str) for name in ("decision_id", "record_hash", "receipt_hash")
    ):
        raise PacketSourceError("the stored decision record is missing or malformed")
    if not isinstance(options, PacketOptions):
        raise TypeError("options must be a PacketOptions")


def _exported_at_text(exported_at: str | datetime) -> str:
    text = iso_timestamp(exported_at) if isinstance(exported_at, datetime) else exported_at
    if not _is_iso_ms(text):
        raise ValueError("exported_at must be ISO 8601 UTC with milliseconds and Z")
    return text


def _check_requested_parts(options: PacketOptions, original_input: Any, chain: ChainExcerpt | None) -> None:
    if options.include_input and original_input is None:
        raise PacketSourceError("the original input was requested but is not available")
    if options.include_chain and chain is None:
        raise PacketSourceError("the audit chain was requested but is not available")


def _consistency_member(consistency: ConsistencyFrom, audit_chain: AuditChain | None) -> ChainConsistency:
    if audit_chain is None:
        raise PacketSourceError("a consistency proof needs the audit chain")
    return consistency_member(consistency, audit_chain["checkpoint"])


def _refuse_early_export(packet: Mapping[str, Any]) -> None:
    """PacketSourceError when `exported_at` is earlier than something in the packet (the
    verifier's own `exported_at` check)."""
    check = _State()
    _check_exported_at(check, packet, packet["decision_record"])
    if check.checks["exported_at"] is False:
        raise PacketSourceError("; ".join(check.details["exported_at"]))


class _InputMember(TypedDict, total=False):
    original_input: Any


def _hold_members(record: Mapping[str, JsonValue], events: Sequence[HoldEvent],
                  commitment: HoldCommitment | None) -> tuple[list[HoldEvent] | None, HoldCommitment | None]:
    """The packet's `hold_events` (None: no member), copied oldest first, and `hold_commitment`
    (required for a held decision, None otherwise); PacketSourceError unless the events are this
    record's and hold together, and the commitment states exactly them (signatures are the
    verifier's to check)."""
    copied = [copy.deepcopy(event) for event in events]
    problems = hold_events_problems(record, copied, None)
    if problems:
        raise PacketSourceError(f"the decision's hold events do not verify: {problems[0]}")
    if commitment is None and not copied and record.get("verdict") != HELD_VERDICT:
        return None, None
    problems = commitment_problems(commitment, record, copied)
    if problems or commitment is None:  # a missing commitment is one of the problems
        raise PacketSourceError(f"the decision's hold commitment does not state its events: {problems[0]}")
    return copied or None, copy.deepcopy(commitment)


class _LaterMembers(TypedDict, total=False):
    """The optional members after the receipt lists: the reports, the chain's proofs and the
    hold's events."""

    policy_intelligence: dict[str, dict[str, Any]]
    audit_chain: AuditChain
    receipt_chain_head: ReceiptChainHead
    chain_consistency: ChainConsistency
    hold_events: list[HoldEvent]
    hold_commitment: HoldCommitment


def _later_members(intelligence: dict[str, dict[str, Any]], audit_chain: AuditChain | None,
                   head: ReceiptChainHead | None, consistency: ChainConsistency | None,
                   holds: tuple[list[HoldEvent] | None, HoldCommitment | None]) -> _LaterMembers:
    later: _LaterMembers = {}
    if intelligence:
        later["policy_intelligence"] = intelligence
    if audit_chain is not None:
        later["audit_chain"] = audit_chain
    if head is not None:
        later["receipt_chain_head"] = head
    if consistency is not None:
        later["chain_consistency"] = consistency
    if holds[0] is not None:
        later["hold_events"] = holds[0]
    if holds[1] is not None:
        later["hold_commitment"] = holds[1]
    return later


def _assemble(record: Mapping[str, Any], exported_at: str, manifest: PacketManifest, included: _InputMember,
              listed: _ListedParts, later: _LaterMembers) -> UnsealedPacket:
    """The packet's members in the order of the format, all but `packet_hash`."""
    return {
        "decision_packet_version": DECISION_PACKET_VERSION,
        "decision_id": record["decision_id"],
        "record_hash": record["record_hash"],
        "receipt_hash": record["receipt_hash"],
        "exported_at": exported_at,
        "packet_manifest": manifest,
        "decision_record": copy.deepcopy(dict(record)),
        **included,
        "execution_receipts": listed.items["execution_receipts"],
        "outcome_records": listed.items["outcome_records"],
        "crm_sync_records": listed.items["crm_sync_records"],
        **later,
    }


def build_packet(
    *,
    record: Mapping[str, Any],
    exported_at: str | datetime,
    options: PacketOptions,
    original_input: Any = None,
    executions: Sequence[Mapping[str, Any]] = (),
    outcomes: Sequence[Mapping[str, Any]] = (),
    crm_syncs: Sequence[Mapping[str, Any]] = (),
    totals: Mapping[str, int] | None = None,
    chain: ChainExcerpt | None = None,
    policy_intelligence: Mapping[str, Mapping[str, Any]] | None = None,
    receipt_head: Mapping[str, Any] | None = None,
    consistency: ConsistencyFrom | None = None,
    hold_events: Sequence[HoldEvent] = (),
    hold_commitment: HoldCommitment | None = None,
) -> DecisionPacket:
    """The packet for the stored `record` (the full record, exactly as stored).

    * `executions`, `outcomes`, `crm_syncs`: newest first; the first `options` limit of each is
      exported (`execution_limit` also limits CRM sync records). Pass the whole stored lists,
      or just the newest ones with the stored counts in `totals` (keys `execution_receipts`,
      `outcome_records`, `crm_sync_records`; default: the lengths given).
    * `original_input`: the stored request body; required when `options.include_input`.
    * `chain`: required when `options.include_chain` (every stored record is chained); its
      window must be `chain_window(position, size, options.chain_limit)`.
    * `policy_intelligence`: section (`effectiveness`, `anomalies`, `confidence`, `benchmarks`)
      → a sealed report about the record's policy (version label, `<kind>_hash`); exported when
      `options.include_intelligence` and not None (reference facts §6 layout).
    * `receipt_head`: the decision's stored receipt head row (`count`, `head_row_hash`,
      `key_id`, `signature`), exported as `receipt_chain_head`; its signed count must be the
      stored total of the three receipt lists (the export refuses when receipts are stored
      without a head).
    * `consistency`: ``{first, first_root, proof}``, the RFC 6962 consistency proof from tree
      size `first` to the chain's size read from the store; exported as `chain_consistency`
      (requires the chain).
    * `hold_events`: the decision's hold events (`hold_event_v1`), oldest first; exported as
      `hold_events` when there is at least one (a packet of a decision without them is as before).
    * `hold_commitment`: a held (`review`) decision's signed commitment to exactly `hold_events`
      (`gate.holds.events.build_commitment`), required for one.
    * `exported_at`: a datetime or ISO text with milliseconds and `Z`.
    Raises PacketSourceError when a part is missing or inconsistent.
    """
    _check_record_and_options(record, options)
    exported_at = _exported_at_text(exported_at)
    _check_requested_parts(options, original_input, chain)
    listed = _listed_parts(options, {"execution_receipts": list(executions), "outcome_records": list(outcomes),
                                     "crm_sync_records": list(crm_syncs)}, totals)
    head = _receipt_head_member(record, receipt_head)
    audit_chain = (_audit_chain_member(record, chain, options.chain_limit)
                   if options.include_chain and chain is not None else None)
    intelligence = _intelligence_member(record, options, policy_intelligence)
    chain_consistency = _consistency_member(consistency, audit_chain) if consistency is not None else None
    included: _InputMember = {"original_input": copy.deepcopy(original_input)} if options.include_input else {}
    later = _later_members(intelligence, audit_chain, head, chain_consistency,
                           _hold_members(record, hold_events, hold_commitment))
    packet = _assemble(record, exported_at, _manifest(options, listed, audit_chain, len(intelligence)), included,
                       listed, later)
    _refuse_early_export(packet)
    return {**packet, "packet_hash": sha256_hex(packet)}
