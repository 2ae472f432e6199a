"""Decision Packets (`decision_packet_v1`): the portable export of one decision, and its verifier.

A packet carries one Decision Record with everything needed to check it offline: optionally
the original request, the newest execution receipts, Outcome Records and CRM sync records, the
intelligence reports, and an excerpt of the caller's audit chain with an RFC 6962 inclusion
proof against a signed checkpoint. `packet_hash = sha256(canonical(packet without
packet_hash))` (reference facts §6).

Pure code: no I/O, no clock. `build_packet` takes the parts the service read (it raises
`PacketSourceError` rather than emit inconsistent proof material: the spec's 503, "never
partial proof material"); `verify_packet` never raises on a malformed packet (only on one that
is not a JSON object) and reports every step as a named check. The algorithm is written out in
docs/verification.md, "Decision Packets".

Trust: only `TrustAnchors` authenticate. The record's receipt signature and the checkpoint
signature are checked with keys selected from the anchors (by key id, then fingerprint); a key
that travels inside the packet is never used. `verified` = every applicable check holds AND the
receipt signature and (when a chain is present) the checkpoint signature are proven.

What is proven (docs/verification.md §8.3). The packet is not signed as a whole. Authentic
against trusted keys: the record (receipt signature) and its leaf at `record_position` in the
signed tree of `chain_size` leaves (inclusion proof + checkpoint). Intact and consistent but
unkeyed (anyone rewriting a packet can recompute them): `packet_hash`, receipt and report hashes,
the window's rolling links and head. Every member is covered by some check besides
`packet_hash`, except these export claims, checked only for form and consistency: `exported_at`
(beyond being later than everything in the packet), `packet_manifest.totals.*` of a truncated
list, and a `packet_manifest.options.*_limit` whose lists are complete.
`tests/packets/test_packet_mutations.py` pins this list.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gate.canonical import CanonicalJSONError, canonical_text, key_order, sha256_hex
from gate.chain import AUDIT_CHAIN_MEMBERS, LINK_HASH_MEMBERS, leaf_hash, record_audit_chain, verify_links
from gate.constants import (
    CANONICALIZATION,
    CHAIN_ENTRY_TYPE_DECISION,
    CHAIN_MERKLE_STRATEGY,
    CHAIN_TREE_ALGORITHM,
    DECISION_CHAIN_VERSION,
    DECISION_CRM_SYNC_VERSION,
    DECISION_EXECUTION_VERSION,
    DECISION_OUTCOME_VERSION,
    DECISION_PACKET_VERSION,
    DECISION_PROTOCOL_VERSION,
    HASH_ALGORITHM,
    VERIFICATION_RESULT_VERSION,
)
from gate.errors import GateError
from gate.merkle import (
    CHECKPOINT_BODY_MEMBERS,
    GetNode,
    inclusion_proof_from_nodes,
    verify_checkpoint,
    verify_inclusion,
)
from gate.receipts import (
    EXECUTION_HASH_MEMBERS,
    EXECUTION_STATUSES,
    OUTCOME_HASH_MEMBERS,
    OUTCOME_STATUSES,
    SYNC_DIRECTIONS,
    SYNC_HASH_MEMBERS,
    SYNC_STATUSES,
    action_binding_match,
    verify_receipt_links,
)
from gate.signing import iso_timestamp
from gate.verify import TrustAnchors, VerificationInputError, verify_record

__all__ = [
    "LIMIT_MIN",
    "LIMIT_MAX",
    "LIMIT_DEFAULT",
    "REPORT_TYPES",
    "PACKET_MEMBERS",
    "PACKET_CHECKS",
    "VERIFICATION_HINTS",
    "PacketSourceError",
    "PacketOptions",
    "ChainExcerpt",
    "PacketVerification",
    "chain_window",
    "report_hash",
    "build_packet",
    "verify_packet",
    "verify_packet_body",
]

LIMIT_MIN, LIMIT_MAX, LIMIT_DEFAULT = 1, 1000, 20

# Intelligence report types; a report of type T carries `T_hash`.
REPORT_TYPES = ("effectiveness", "confidence", "anomaly", "benchmark", "pattern")

# Top-level members, in the order the builder writes them.
_REQUIRED_MEMBERS = (
    "decision_packet_version",
    "decision_id",
    "record_hash",
    "receipt_hash",
    "exported_at",
    "packet_manifest",
    "decision_record",
    "execution_receipts",
    "outcome_records",
    "crm_sync_records",
    "packet_hash",
)
_OPTIONAL_MEMBERS = ("original_input", "intelligence", "audit_chain")
PACKET_MEMBERS = frozenset(_REQUIRED_MEMBERS + _OPTIONAL_MEMBERS)

_OPTION_NAMES = ("include_input", "include_chain", "include_intelligence",
                 "execution_limit", "outcome_limit", "chain_limit")
_COMPONENT_NAMES = ("decision_record", "original_input", "execution_receipts", "outcome_records",
                    "crm_sync_records", "audit_chain_links", "intelligence_reports")
_LISTED = ("execution_receipts", "outcome_records", "crm_sync_records")
# The option that limits each listed part. The spec has three limits; CRM sync records are
# write receipts of the action like execution receipts and share `execution_limit`.
_LIMIT_OF = {"execution_receipts": "execution_limit", "outcome_records": "outcome_limit",
             "crm_sync_records": "execution_limit"}
_MANIFEST_MEMBERS = frozenset({"canonicalization", "hash_algorithm", "options", "components", "totals", "truncated"})
_CHAIN_MEMBERS = frozenset({
    "chain_id", "decision_chain_version", "merkle_strategy", "chain_size", "merkle_root",
    "head_link_hash", "links", "window", "record_position", "inclusion_proof", "checkpoint",
    "verification_hints",
})
_WINDOW_MEMBERS = frozenset({"first_position", "last_position", "previous_link_hash", "previous_merkle_root"})
_PROOF_MEMBERS = frozenset({"tree_algorithm", "leaf_index", "tree_size", "leaf_hash", "proof"})
_LINK_MEMBERS = frozenset(LINK_HASH_MEMBERS) | {"link_hash"}
_CHECKPOINT_MEMBERS = frozenset(CHECKPOINT_BODY_MEMBERS) | {"checkpoint_hash", "signature"}
_CHECKPOINT_SIGNATURE_MEMBERS = frozenset({"algorithm", "key_id", "public_key_fingerprint", "signature"})
# verify_checkpoint checks, split into integrity (content) and authenticity (key, signature).
_CHECKPOINT_INTEGRITY = ("members", "checkpoint_version", "algorithms", "tree_size", "root_hash", "checkpoint_hash")
_CHECKPOINT_AUTHENTICITY = ("public_key", "signature_algorithm", "public_key_fingerprint", "signature")

# Fixed prose (part of the v1 format: a verifier compares it exactly, so it cannot be edited
# into misleading instructions).
VERIFICATION_HINTS = {
    "links": "Recompute leaf_hash, merkle_root and link_hash of every link (gate.chain.verify_links) "
             "starting from window.previous_link_hash and window.previous_merkle_root; positions run "
             "from window.first_position to window.last_position without a gap.",
    "record_link": "The link at record_position names the record's decision_id, record_hash and "
                   "receipt_hash and equals the record's own audit_chain member.",
    "head": "When window.last_position equals chain_size, the last link's link_hash and merkle_root "
            "are head_link_hash and merkle_root.",
    "inclusion_proof": "RFC 6962: verify_inclusion(leaf_index, tree_size, leaf_hash, proof, "
                       "checkpoint.root_hash) with leaf_hash recomputed from the record and "
                       "leaf_index = record_position - 1.",
    "checkpoint": "Recompute checkpoint_hash and check its Ed25519 signature with a key you already "
                  "trust, chosen by signature.key_id; never with a key found in the packet. "
                  "checkpoint.tree_size equals chain_size.",
}

# Every named check; dynamic per-item names (`execution_receipts[2].execution_hash`,
# `record.receipt_signature`, ...) are added when they fail.
PACKET_CHECKS = (
    "packet_members",
    "packet_hash",
    "packet_version",
    "packet_manifest",
    "exported_at",
    "original_input",
    "record",
    "record_audit_chain",
    "execution_receipts",
    "outcome_records",
    "crm_sync_records",
    "intelligence_reports",
    "audit_chain",
    "audit_chain.window",
    "audit_chain.links",
    "audit_chain.record_link",
    "audit_chain.head",
    "audit_chain.inclusion_proof",
    "audit_chain.checkpoint",
    "audit_chain.checkpoint_signature",
)
_AUTHENTICITY = frozenset({"audit_chain.checkpoint_signature"})

_HEX64 = re.compile(r"[0-9a-f]{64}")
_ISO_MS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
_INTEGER_TEXT = re.compile(r"-?[0-9]{1,12}")


class PacketSourceError(GateError):
    """The parts read for a packet are missing or contradict each other: no packet is built
    (the spec's 503 "a required packet source cannot be read"; never partial proof material)."""

    def __init__(self, message: str) -> None:
        super().__init__("PACKET_SOURCE_UNAVAILABLE", message)


class PacketInputError(VerificationInputError):
    """The thing to verify is not a JSON object (or a packet verify body lacks one)."""

    def __init__(self, message: str) -> None:
        GateError.__init__(self, "VERIFY_PACKET_INVALID", message)


# --------------------------------------------------------------------------- small helpers


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_hex64(value: Any) -> bool:
    return isinstance(value, str) and bool(_HEX64.fullmatch(value))


def _is_iso_ms(value: Any) -> bool:
    if not isinstance(value, str) or not _ISO_MS.fullmatch(value):
        return False
    try:
        datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return False
    return True


def _short(value: Any, width: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _canon(value: Any) -> str | None:
    try:
        return canonical_text(value)
    except (CanonicalJSONError, TypeError, ValueError, RecursionError):
        return None


def _canon_equal(a: Any, b: Any) -> bool:
    text = _canon(a)
    return text is not None and text == _canon(b)


def _digest_equal(a: Any, b: Any) -> bool:
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))


def _safe_sha(value: Any) -> str | None:
    try:
        return sha256_hex(value)
    except (CanonicalJSONError, TypeError, ValueError, RecursionError):
        return None


def report_hash(report: Mapping[str, Any], report_type: str | None = None) -> str:
    """`<type>_hash` of an intelligence report: sha256 of the report without that member and
    without the packet's `report_type` label (so the hash a report endpoint published stays
    valid inside a packet). Raises on non-JSON content."""
    report_type = report.get("report_type") if report_type is None else report_type
    hash_member = f"{report_type}_hash"
    return sha256_hex({k: v for k, v in report.items() if k not in (hash_member, "report_type")})


# --------------------------------------------------------------------------- options


def _problem(field_name: str, code: str, message: str) -> dict[str, str]:
    return {"field": field_name, "code": code, "message": message}


def _query_value(query: Mapping[str, Any], name: str) -> tuple[bool, Any]:
    """(present, value); a repeated parameter (a list of several values) is returned as is."""
    if name not in query:
        return False, None
    value = query[name]
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    return True, value


def _parse_bool(name: str, value: Any, problems: list) -> bool | None:
    if value is True or value is False:
        return value
    if isinstance(value, str) and value in ("true", "1"):
        return True
    if isinstance(value, str) and value in ("false", "0"):
        return False
    problems.append(_problem(name, "invalid_value", f"{name} must be true, false, 1 or 0"))
    return None


def _parse_limit(name: str, value: Any, problems: list) -> int | None:
    if _is_int(value):
        number = value
    elif isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
        number = int(value)
    elif isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value):
        number = None  # more digits than any limit: out of range, not a type error
    else:
        problems.append(_problem(name, "invalid_type", f"{name} must be an integer"))
        return None
    if number is None or not LIMIT_MIN <= number <= LIMIT_MAX:
        problems.append(_problem(name, "out_of_range", f"{name} must be between {LIMIT_MIN} and {LIMIT_MAX}"))
        return None
    return number


@dataclass(frozen=True, slots=True)
class PacketOptions:
    """The export options of `GET /api/decision/{decision_id}/packet` (spec defaults)."""

    include_input: bool = False
    include_chain: bool = True
    include_intelligence: bool = True
    execution_limit: int = LIMIT_DEFAULT
    outcome_limit: int = LIMIT_DEFAULT
    chain_limit: int = LIMIT_DEFAULT

    def __post_init__(self) -> None:
        for name in ("include_input", "include_chain", "include_intelligence"):
            if type(getattr(self, name)) is not bool:
                raise ValueError(f"{name} must be a boolean")
        for name in ("execution_limit", "outcome_limit", "chain_limit"):
            value = getattr(self, name)
            if not _is_int(value) or not LIMIT_MIN <= value <= LIMIT_MAX:
                raise ValueError(f"{name} must be an integer between {LIMIT_MIN} and {LIMIT_MAX}")

    @classmethod
    def from_query(cls, query: Mapping[str, Any]) -> "PacketOptions":
        """Parse query parameters (a mapping of name → text, or → list of texts).

        Booleans: exactly `true`, `false`, `1`, `0`. Limits: decimal integers 1…1000. Absent
        parameters take the defaults; unrelated parameters are ignored; a parameter given more
        than once is invalid. Every problem is reported at once:
        `GateError("REQUEST_INVALID", …, errors=[{field, code, message}])` with codes
        `invalid_value` (boolean), `invalid_type` (not an integer), `out_of_range`.
        """
        values: dict[str, Any] = {}
        problems: list[dict[str, str]] = []
        for name in _OPTION_NAMES:
            present, value = _query_value(query, name)
            if not present:
                continue
            if isinstance(value, (list, tuple)):
                problems.append(_problem(name, "invalid_value", f"{name} must be given at most once"))
                continue
            parsed = (_parse_bool if name.startswith("include_") else _parse_limit)(name, value, problems)
            if parsed is not None:
                values[name] = parsed
        if problems:
            raise GateError("REQUEST_INVALID", f"invalid packet query: {problems[0]['message']}", errors=problems)
        return cls(**values)

    def limit_for(self, part: str) -> int:
        return getattr(self, _LIMIT_OF[part])

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _OPTION_NAMES}


# --------------------------------------------------------------------------- chain excerpt


def chain_window(record_position: int, chain_size: int, chain_limit: int) -> tuple[int, int]:
    """(first, last) positions of the exported links: `chain_limit` links (fewer in a shorter
    chain) that contain `record_position` and reach as far toward the head as the limit allows:
    last = min(chain_size, record_position + chain_limit - 1), first = max(1, last - chain_limit + 1).
    """
    if not (_is_int(record_position) and _is_int(chain_size) and _is_int(chain_limit)):
        raise ValueError("positions, size and limit must be integers")
    if not (1 <= record_position <= chain_size and chain_limit >= 1):
        raise ValueError("need 1 <= record_position <= chain_size and chain_limit >= 1")
    last = min(chain_size, record_position + chain_limit - 1)
    return max(1, last - chain_limit + 1), last


@dataclass(frozen=True)
class ChainExcerpt:
    """The audit-chain material of one packet, as read under one chain head.

    * `chain_id`, `chain_size`, `head_link_hash`, `merkle_root` (the rolling root): the head;
    * `record_position`: the record's chain position;
    * `links`: the stored links of `chain_window(record_position, chain_size, chain_limit)`,
      ascending (extra store columns are dropped by the builder);
    * `inclusion_proof`: the RFC 6962 audit path of leaf `record_position - 1` in the tree of
      `chain_size` leaves;
    * `checkpoint`: a checkpoint signed with `gate.merkle.sign_checkpoint` for
      (`chain_id`, `chain_size`).
    """

    chain_id: str
    chain_size: int
    head_link_hash: str
    merkle_root: str
    record_position: int
    links: tuple[Mapping[str, Any], ...]
    inclusion_proof: tuple[str, ...]
    checkpoint: Mapping[str, Any]

    @classmethod
    def from_store(
        cls,
        *,
        chain_id: str,
        chain_size: int,
        head_link_hash: str,
        merkle_root: str,
        record_position: int,
        links: Iterable[Mapping[str, Any]],
        get_node: GetNode,
        checkpoint: Mapping[str, Any],
    ) -> "ChainExcerpt":
        """Build the excerpt, reading the audit path from a node store (`get_node(level, index)`;
        the nodes needed are `gate.merkle.nodes_needed_for_inclusion(record_position - 1, chain_size)`)."""
        proof = inclusion_proof_from_nodes(record_position - 1, chain_size, get_node)
        return cls(chain_id, chain_size, head_link_hash, merkle_root, record_position,
                   tuple(links), tuple(proof), checkpoint)


# --------------------------------------------------------------------------- building


def _link_view(link: Mapping[str, Any]) -> dict[str, Any]:
    return {name: copy.deepcopy(link.get(name)) for name in (*LINK_HASH_MEMBERS, "link_hash")}


def _audit_chain_member(record: Mapping[str, Any], chain: ChainExcerpt, chain_limit: int) -> dict[str, Any]:
    """The packet's `audit_chain`; PacketSourceError when the excerpt is not self-consistent."""
    try:
        first, last = chain_window(chain.record_position, chain.chain_size, chain_limit)
    except ValueError as exc:
        raise PacketSourceError(f"audit chain excerpt: {exc}") from exc
    if not all(isinstance(link, Mapping) and _LINK_MEMBERS <= set(link) for link in chain.links):
        raise PacketSourceError("audit chain links must carry every link member (parse the stored link JSON)")
    links = [_link_view(link) for link in chain.links]
    positions = [link["chain_position"] for link in links]
    if positions != list(range(first, last + 1)):
        raise PacketSourceError(f"audit chain excerpt must hold the links {first}..{last}")
    if not verify_links(links).valid or any(link["chain_id"] != chain.chain_id for link in links):
        raise PacketSourceError("the stored audit chain links do not verify")
    record_link = links[chain.record_position - first]
    for member, source in (("decision_id", "decision_id"), ("record_hash", "record_hash"),
                           ("receipt_hash", "receipt_hash")):
        if record_link.get(member) != record.get(source):
            raise PacketSourceError(f"the link at position {chain.record_position} is not this record's")
    if record.get("audit_chain") is not None and not _canon_equal(record["audit_chain"], record_audit_chain(record_link)):
        raise PacketSourceError("the record's audit_chain member is not its stored link")
    if last == chain.chain_size and (links[-1]["link_hash"] != chain.head_link_hash
                                     or links[-1]["merkle_root"] != chain.merkle_root):
        raise PacketSourceError("the last link is not the chain head")
    checkpoint = copy.deepcopy(dict(chain.checkpoint))
    if checkpoint.get("chain_id") != chain.chain_id or checkpoint.get("tree_size") != chain.chain_size:
        raise PacketSourceError("the checkpoint is not for this chain and size")
    leaf = record_link["leaf_hash"]
    proof = list(chain.inclusion_proof)
    if not verify_inclusion(chain.record_position - 1, chain.chain_size, leaf, proof, checkpoint.get("root_hash")):
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


def _report_entry(report: Mapping[str, Any], index: int) -> dict[str, Any]:
    report_type = report.get("report_type")
    if report_type not in REPORT_TYPES:
        raise PacketSourceError(f"intelligence report {index}: report_type must be one of {REPORT_TYPES}")
    entry = copy.deepcopy(dict(report))
    hash_member = f"{report_type}_hash"
    expected = report_hash(entry)
    if hash_member not in entry:
        entry[hash_member] = expected
    elif entry[hash_member] != expected:
        raise PacketSourceError(f"intelligence report {index}: {hash_member} does not match the report")
    return entry


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
    intelligence_reports: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The packet for the stored `record` (the full record, exactly as stored).

    * `executions`, `outcomes`, `crm_syncs`: newest first; the first `options` limit of each is
      exported (`execution_limit` also limits CRM sync records). Pass the whole stored lists,
      or just the newest ones with the stored counts in `totals` (keys `execution_receipts`,
      `outcome_records`, `crm_sync_records`; default: the lengths given).
    * `original_input`: the stored request body; required when `options.include_input`.
    * `chain`: required when `options.include_chain` (every stored record is chained); its
      window must be `chain_window(position, size, options.chain_limit)`.
    * `intelligence_reports`: each with `report_type` (one of `REPORT_TYPES`) and optionally its
      `<type>_hash` (added when absent, checked when present); exported when
      `options.include_intelligence` and not None.
    * `exported_at`: a datetime or ISO text with milliseconds and `Z`.
    Raises PacketSourceError when a part is missing or inconsistent.
    """
    if not isinstance(record, Mapping) or not all(
        isinstance(record.get(name), str) for name in ("decision_id", "record_hash", "receipt_hash")
    ):
        raise PacketSourceError("the stored decision record is missing or malformed")
    if not isinstance(options, PacketOptions):
        raise TypeError("options must be a PacketOptions")
    if isinstance(exported_at, datetime):
        exported_at = iso_timestamp(exported_at)
    if not _is_iso_ms(exported_at):
        raise ValueError("exported_at must be ISO 8601 UTC with milliseconds and Z")
    if options.include_input and original_input is None:
        raise PacketSourceError("the original input was requested but is not available")
    if options.include_chain and chain is None:
        raise PacketSourceError("the audit chain was requested but is not available")

    given = {"execution_receipts": list(executions), "outcome_records": list(outcomes),
             "crm_sync_records": list(crm_syncs)}
    stated_totals = dict(totals) if totals is not None else {}
    parts: dict[str, list] = {}
    components: dict[str, int] = {"decision_record": 1, "original_input": 1 if options.include_input else 0}
    packet_totals: dict[str, int] = {}
    truncated: dict[str, bool] = {}
    for part in _LISTED:
        limit = options.limit_for(part)
        total = stated_totals.get(part, len(given[part]))
        chosen = [copy.deepcopy(dict(item)) for item in given[part][:limit]]
        if not _is_int(total) or total < len(chosen) or len(chosen) != min(limit, total):
            raise PacketSourceError(f"{part}: {len(chosen)} records read do not fit the stored total {total!r}")
        parts[part] = chosen
        components[part] = len(chosen)
        packet_totals[part] = total
        truncated[part] = len(chosen) < total

    audit_chain = _audit_chain_member(record, chain, options.chain_limit) if options.include_chain else None
    components["audit_chain_links"] = len(audit_chain["links"]) if audit_chain else 0
    intelligence = None
    if options.include_intelligence and intelligence_reports is not None:
        intelligence = {"reports": [_report_entry(r, i) for i, r in enumerate(intelligence_reports)]}
    components["intelligence_reports"] = len(intelligence["reports"]) if intelligence else 0

    packet: dict[str, Any] = {
        "decision_packet_version": DECISION_PACKET_VERSION,
        "decision_id": record["decision_id"],
        "record_hash": record["record_hash"],
        "receipt_hash": record["receipt_hash"],
        "exported_at": exported_at,
        "packet_manifest": {
            "canonicalization": CANONICALIZATION,
            "hash_algorithm": HASH_ALGORITHM,
            "options": options.to_dict(),
            "components": {name: components[name] for name in _COMPONENT_NAMES},
            "totals": packet_totals,
            "truncated": truncated,
        },
        "decision_record": copy.deepcopy(dict(record)),
    }
    if options.include_input:
        packet["original_input"] = copy.deepcopy(original_input)
    packet.update(parts)
    if intelligence is not None:
        packet["intelligence"] = intelligence
    if audit_chain is not None:
        packet["audit_chain"] = audit_chain
    check = _State()
    _check_exported_at(check, packet, packet["decision_record"])
    if check.checks["exported_at"] is False:
        raise PacketSourceError("; ".join(check.details["exported_at"]))
    packet["packet_hash"] = sha256_hex(packet)
    return packet


# --------------------------------------------------------------------------- result


@dataclass(frozen=True)
class PacketVerification:
    """The result of `verify_packet`. `checks` maps each check to True / False / None (not
    applicable or not checkable); `failed_checks` is the sorted list of False ones, including
    per-item names (`execution_receipts[2].execution_hash`) and the embedded record's failures
    prefixed `record.`; `details` gives readable reasons per failed check."""

    verified: bool
    integrity_valid: bool
    authenticity_valid: bool
    key_source: str | None
    checks: dict[str, bool | None]
    failed_checks: tuple[str, ...]
    record: dict[str, Any] | None
    expected: dict[str, Any]
    actual: dict[str, Any]
    details: dict[str, list[str]] = field(default_factory=dict)
    decision_id: Any = None
    packet_hash: Any = None
    checkpoint_key_source: str | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "verification_version": VERIFICATION_RESULT_VERSION,
            "artifact": DECISION_PACKET_VERSION,
            "verified": self.verified,
            "integrity_valid": self.integrity_valid,
            "authenticity_valid": self.authenticity_valid,
            "key_source": self.key_source,
            "checkpoint_key_source": self.checkpoint_key_source,
            "decision_id": self.decision_id,
            "packet_hash": self.packet_hash,
            "checks": dict(self.checks),
            "failed_checks": list(self.failed_checks),
            "details": {name: list(items) for name, items in self.details.items()},
            "record": self.record,
            "expected": dict(self.expected),
            "actual": dict(self.actual),
            "notes": list(self.notes),
        }


class _State:
    """Collects check outcomes, readable details and expected/actual values."""

    def __init__(self) -> None:
        self.checks: dict[str, bool | None] = {name: None for name in PACKET_CHECKS}
        self.details: dict[str, list[str]] = {}
        self.expected: dict[str, Any] = {}
        self.actual: dict[str, Any] = {}
        self.notes: list[str] = []

    def fail(self, name: str, message: str | None = None) -> None:
        self.checks[name] = False
        if message:
            self.details.setdefault(name, []).append(message)

    def conclude(self, name: str, problems: list[str]) -> None:
        """The check holds exactly when no problem was found."""
        if problems:
            for problem in problems:
                self.fail(name, problem)
        else:
            self.checks[name] = True

    def value(self, name: str, expected: Any, actual: Any) -> None:
        self.expected[name] = expected
        self.actual[name] = actual

    def guard(self, name: str, step: Callable[..., None], *args: Any) -> None:
        """Run one step; verification never raises on malformed content."""
        try:
            step(*args)
        except Exception as exc:  # noqa: BLE001 - any surprise in untrusted content is a failure
            self.fail(name, f"could not be checked ({type(exc).__name__})")


# --------------------------------------------------------------------------- verification


def verify_packet(
    packet: Any,
    *,
    anchors: TrustAnchors | None = None,
    original_input: Any = None,
) -> PacketVerification:
    """Verify a Decision Packet (spec "Packet verification steps" 1-4). See module docstring."""
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

    failed = tuple(sorted(name for name, outcome in state.checks.items() if outcome is False))
    # The record's own failures are summarised by `record` (its integrity) and by its
    # authenticity below; everything else that failed is an integrity failure of the packet.
    integrity_failed = [name for name in failed if name not in _AUTHENTICITY and not name.startswith("record.")]
    integrity_valid = state.checks["packet_hash"] is True and state.checks["record"] is True and not integrity_failed
    authenticity_valid = bool(record_result is not None and record_result.authenticity_valid)
    if "audit_chain" in packet:
        authenticity_valid = authenticity_valid and state.checks["audit_chain.checkpoint_signature"] is True
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


# ---- step 1


class _ReceiptTexts:
    """Canonical text of each listed receipt, computed once for the packet hash and reused for
    the receipt hash (see `_fast_receipt_ok`)."""

    def __init__(self) -> None:
        self.by_part: dict[str, list[str] | None] = {}


def _packet_text(packet: Mapping[str, Any], texts: _ReceiptTexts) -> str:
    """canonical_text(packet without packet_hash), composed member by member: canonical JSON
    of an object is its members' texts joined in key order, so the receipts' texts can be kept."""
    body = {k: v for k, v in packet.items() if k != "packet_hash"}
    pieces = []
    for key in key_order(body):
        value = body[key]
        if key in _LISTED and isinstance(value, list):
            items = [canonical_text(item) for item in value]
            texts.by_part[key] = items
            value_text = "[" + ",".join(items) + "]"
        else:
            value_text = canonical_text(value)
        pieces.append(canonical_text(key) + ":" + value_text)
    return "{" + ",".join(pieces) + "}"


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


def _exact_members(problems: list[str], label: str, value: Any, members: frozenset[str]) -> bool:
    if not isinstance(value, Mapping):
        problems.append(f"{label} must be an object")
        return False
    extra, missing = sorted(set(value) - members, key=str), sorted(members - set(value))
    if extra:
        problems.append(f"{label} has unknown members {extra}")
    if missing:
        problems.append(f"{label} lacks members {missing}")
    return not extra and not missing


def _check_manifest(state: _State, packet: Mapping[str, Any], record: Mapping[str, Any]) -> None:
    problems: list[str] = []
    for name, source in (("decision_id", "decision_id"), ("record_hash", "record_hash"), ("receipt_hash", "receipt_hash")):
        if packet.get(name) is None or packet.get(name) != record.get(source) or not isinstance(packet.get(name), str):
            problems.append(f"{name} differs from the decision record's {source}")
    manifest = packet.get("packet_manifest")
    if not _exact_members(problems, "packet_manifest", manifest, _MANIFEST_MEMBERS):
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
        if "intelligence" in packet and options["include_intelligence"] is not True:
            problems.append("intelligence is present but options.include_intelligence is false")

    components = manifest.get("components")
    if _exact_members(problems, "components", components, frozenset(_COMPONENT_NAMES)):
        chain = packet.get("audit_chain")
        intelligence = packet.get("intelligence")
        actual_counts = {
            "decision_record": 1,
            "original_input": 1 if "original_input" in packet else 0,
            "audit_chain_links": len(chain["links"]) if isinstance(chain, Mapping) and isinstance(chain.get("links"), list) else 0,
            "intelligence_reports": len(intelligence["reports"])
            if isinstance(intelligence, Mapping) and isinstance(intelligence.get("reports"), list) else 0,
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


# ---- step 2 (record's own audit_chain member)


def _check_record_audit_chain(state: _State, record: Mapping[str, Any]) -> None:
    member = record.get("audit_chain")
    if member is None:
        return
    problems: list[str] = []
    if _exact_members(problems, "decision_record.audit_chain", member, frozenset(AUDIT_CHAIN_MEMBERS)):
        try:
            expected = leaf_hash(record.get("decision_id"), record.get("record_hash"), record.get("receipt_hash"))
        except (CanonicalJSONError, TypeError, ValueError):
            expected = None
        if not _digest_equal(expected, member.get("leaf_hash")):
            problems.append("audit_chain.leaf_hash is not the leaf of this record")
        if member.get("entry_type") != CHAIN_ENTRY_TYPE_DECISION:
            problems.append("audit_chain.entry_type must be 'decision'")
        position = member.get("chain_position")
        if not _is_int(position) or position < 1:
            problems.append("audit_chain.chain_position must be a positive integer")
        elif position == 1 and member.get("merkle_root") != member.get("leaf_hash"):
            problems.append("at position 1 the rolling merkle_root is the leaf hash")
        for name in ("link_hash", "merkle_root"):
            if not _is_hex64(member.get(name)):
                problems.append(f"audit_chain.{name} must be a sha256 hex")
        if not isinstance(member.get("chain_id"), str) or not member.get("chain_id"):
            problems.append("audit_chain.chain_id must be a non-empty string")
    state.conclude("record_audit_chain", problems)


# ---- step 3: receipts


_KINDS = {
    # part: (hash member, preimage members, id member, version member, version, value sets)
    "execution_receipts": ("execution_hash", frozenset(EXECUTION_HASH_MEMBERS), "execution_receipt_id",
                           "decision_execution_version", DECISION_EXECUTION_VERSION,
                           (("execution_status", frozenset(EXECUTION_STATUSES)),)),
    "outcome_records": ("outcome_hash", frozenset(OUTCOME_HASH_MEMBERS), "outcome_id",
                        "decision_outcome_version", DECISION_OUTCOME_VERSION,
                        (("outcome_status", frozenset(OUTCOME_STATUSES)),)),
    "crm_sync_records": ("sync_hash", frozenset(SYNC_HASH_MEMBERS), "sync_id",
                         "decision_crm_sync_version", DECISION_CRM_SYNC_VERSION,
                         (("sync_status", frozenset(SYNC_STATUSES)), ("sync_direction", frozenset(SYNC_DIRECTIONS)))),
}
_RECORD_LINKS = (("decision_id", "decision_id"), ("decision_record_hash", "record_hash"),
                 ("decision_receipt_hash", "receipt_hash"), ("decision_verdict", "verdict"),
                 ("decision_action", "action"), ("policy_id", "policy_id"),
                 ("policy_version", "policy_version"), ("policy_bundle_hash", "policy_bundle_hash"))
_MODULE_ARTIFACT = {"execution_receipts": "execution_receipts", "outcome_records": "outcome_records",
                    "crm_sync_records": "crm_syncs"}


_PLAIN_TYPES = frozenset({str, int, float, bool, list, dict})


class _BindingCache:
    """Per-packet cache of (action_binding_hash, action_binding_match) by the binding's text."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self.record_binding = record.get("action_binding")
        self.record_binding_text = _canon(self.record_binding) if isinstance(self.record_binding, dict) else None
        self.items: dict[str, tuple[str, bool]] = {}

    def get(self, binding: dict) -> tuple[str, bool] | None:
        # Keyed by (name, type, value) of flat text bindings (types keep True apart from 1);
        # anything else is keyed by its canonical text.
        key: Any = tuple((name, type(value), value) for name, value in binding.items())
        if not all(type(value) is str for value in binding.values()):
            key = _canon(binding)
            if key is None:
                return None
        cached = self.items.get(key)
        if cached is None:
            text = _canon(binding)
            if text is None:
                return None
            cached = (hashlib.sha256(text.encode("utf-8")).hexdigest(),
                      action_binding_match(self.record_binding, binding))
            self.items[key] = cached
        return cached


def _fast_receipt_ok(part: str, receipt: Any, text: str | None, record: Mapping[str, Any],
                     bindings: _BindingCache) -> bool:
    """A sufficient condition for `verify_receipt_links` finding nothing wrong with `receipt`.

    True only for a receipt in the exact form the gate builds (no member outside its preimage,
    no null/""/{} member, every record-derived member equal in value and type to the record's),
    whose hash, computed from the receipt's canonical text with the hash member cut out, equals
    the stated one. Anything else goes to `verify_receipt_links`, which names the failures; so
    this only saves time and can never accept what the receipts module rejects
    (tests/packets/test_packet_receipts.py checks the implication on mutated receipts).
    """
    if type(receipt) is not dict or text is None:
        return False
    hash_member, members, _, version_member, version, value_sets = _KINDS[part]
    stated = receipt.get(hash_member)
    if not _is_hex64(stated):
        return False
    for name, value in receipt.items():
        if name not in members and name != hash_member:
            return False
        kind = type(value)
        if kind not in _PLAIN_TYPES or (kind is str and not value) or (kind is dict and not value):
            return False  # null, "" and {} are compacted away: leave those to the receipts module
    if receipt.get("decision_protocol_version") != DECISION_PROTOCOL_VERSION or receipt.get(version_member) != version:
        return False
    for member, allowed in value_sets:
        value = receipt.get(member)
        if type(value) is not str or value not in allowed:
            return False
    for member, source in _RECORD_LINKS:
        mine, theirs = receipt.get(member), record.get(source)
        if mine is None and theirs is None:
            continue
        if type(mine) is not str or type(theirs) is not str or mine != theirs:
            return False
    if receipt.get("decision_found") is not True:
        return False
    binding = receipt.get("action_binding")
    if part == "execution_receipts":
        if type(binding) is not dict:
            return False
        cached = bindings.get(binding)
        if cached is None or receipt.get("action_binding_hash") != cached[0] \
                or receipt.get("action_binding_match") is not cached[1]:
            return False
    elif part == "outcome_records":
        if type(binding) is not dict or bindings.record_binding_text is None \
                or _canon(binding) != bindings.record_binding_text:
            return False
    # Cut the hash member out of the canonical text: what remains is the canonical text of the
    # preimage (all other members, same order). The needle can only occur once, as the
    # top-level member: quotes inside strings are escaped, and a second (nested) occurrence
    # sends the receipt to the slow path.
    needle = '"' + hash_member + '":"' + stated + '"'
    if text.count(needle) != 1:
        return False
    at = text.index(needle)
    if text[at - 1] == "{":
        end = at + len(needle)
        preimage = "{" + text[end + 1:] if text[end] == "," else "{}"
    else:
        preimage = text[: at - 1] + text[at + len(needle):]
    return hmac.compare_digest(hashlib.sha256(preimage.encode("utf-8")).hexdigest(), stated)


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


# ---- step 4: intelligence


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


# ---- step 4: audit chain


def _check_chain(state: _State, packet: Mapping[str, Any], record: Mapping[str, Any],
                 anchors: TrustAnchors) -> str | None:
    chain = packet["audit_chain"]
    problems: list[str] = []
    if not _exact_members(problems, "audit_chain", chain, _CHAIN_MEMBERS):
        if not isinstance(chain, Mapping):
            for name in PACKET_CHECKS:
                if name.startswith("audit_chain"):
                    state.fail(name, "audit_chain is not an object")
            return None
    if chain.get("decision_chain_version") != DECISION_CHAIN_VERSION:
        problems.append(f"decision_chain_version must be {DECISION_CHAIN_VERSION}")
    if chain.get("merkle_strategy") != CHAIN_MERKLE_STRATEGY:
        problems.append(f"merkle_strategy must be {CHAIN_MERKLE_STRATEGY}")
    if not isinstance(chain.get("chain_id"), str) or not chain.get("chain_id"):
        problems.append("chain_id must be a non-empty string")
    size, position = chain.get("chain_size"), chain.get("record_position")
    if not _is_int(size) or size < 1:
        problems.append("chain_size must be a positive integer")
    if not _is_int(position) or not _is_int(size) or not 1 <= position <= size:
        problems.append("record_position must be an integer in 1..chain_size")
    for name in ("merkle_root", "head_link_hash"):
        if not _is_hex64(chain.get(name)):
            problems.append(f"{name} must be a sha256 hex")
    if chain.get("verification_hints") != VERIFICATION_HINTS:
        problems.append("verification_hints are not the decision_packet_v1 hints")
    state.conclude("audit_chain", problems)

    links = chain.get("links")
    links = links if isinstance(links, list) else None
    state.guard("audit_chain.window", _check_window, state, packet, chain, links)
    state.guard("audit_chain.links", _check_chain_links, state, chain, links)
    state.guard("audit_chain.record_link", _check_record_link, state, chain, links, record)
    state.guard("audit_chain.head", _check_head, state, chain, links)
    state.guard("audit_chain.inclusion_proof", _check_inclusion, state, chain, record)
    source: list[str | None] = [None]
    state.guard("audit_chain.checkpoint", _check_checkpoint, state, chain, anchors, source)
    return source[0]


def _check_window(state: _State, packet: Mapping[str, Any], chain: Mapping[str, Any], links: list | None) -> None:
    problems: list[str] = []
    window = chain.get("window")
    if not _exact_members(problems, "window", window, _WINDOW_MEMBERS) or not links:
        if not links:
            problems.append("links must be a non-empty array")
        state.conclude("audit_chain.window", problems)
        return
    first, last = window.get("first_position"), window.get("last_position")
    stated = [link.get("chain_position") if isinstance(link, Mapping) else None for link in links]
    if not _is_int(first) or not _is_int(last) or stated != list(range(first, last + 1)):
        problems.append(f"window {first!r}..{last!r} does not match the link positions")
    options = packet.get("packet_manifest", {}).get("options", {}) if isinstance(packet.get("packet_manifest"), Mapping) else {}
    limit = options.get("chain_limit") if isinstance(options, Mapping) else None
    try:
        rule = chain_window(chain.get("record_position"), chain.get("chain_size"), limit)
    except (ValueError, TypeError):
        rule = None
    if rule != (first, last):
        problems.append(f"window {first!r}..{last!r} is not the chain_limit window {rule}")
    previous = (window.get("previous_link_hash"), window.get("previous_merkle_root"))
    if first == 1:
        if previous != (None, None):
            problems.append("a window starting at position 1 has null previous hashes")
    elif not all(_is_hex64(value) for value in previous):
        problems.append("a window starting after position 1 states both previous hashes")
    state.conclude("audit_chain.window", problems)


def _check_chain_links(state: _State, chain: Mapping[str, Any], links: list | None) -> None:
    if not links:
        state.fail("audit_chain.links", "links must be a non-empty array")
        return
    problems: list[str] = []
    for index, link in enumerate(links):
        _exact_members(problems, f"links[{index}]", link, _LINK_MEMBERS)
        if isinstance(link, Mapping) and link.get("chain_id") != chain.get("chain_id"):
            problems.append(f"links[{index}].chain_id is not audit_chain.chain_id")
    window = chain.get("window") if isinstance(chain.get("window"), Mapping) else {}
    start_link, start_root = window.get("previous_link_hash"), window.get("previous_merkle_root")
    result = verify_links(
        [dict(link) if isinstance(link, Mapping) else link for link in links],
        expected_start_previous_link_hash=start_link if isinstance(start_link, str) else None,
        expected_start_previous_root=start_root if isinstance(start_root, str) else None,
    )
    for failure in result.failures:
        name = f"audit_chain.links[{failure['chain_position']}].{failure['check']}"
        problems.append(f"position {failure['chain_position']!r}: {failure['check']} expected "
                        f"{failure['expected']!r}, got {failure['actual']!r}")
        state.value(name, failure["expected"], failure["actual"])
    first = links[0].get("chain_position") if isinstance(links[0], Mapping) else None
    if not result.anchored and _is_int(first) and first > 1:
        problems.append("the window's first link is not anchored to window.previous_* hashes")
    state.conclude("audit_chain.links", problems)


def _link_at(links: list | None, position: Any) -> Mapping[str, Any] | None:
    for link in links or ():
        if isinstance(link, Mapping) and link.get("chain_position") == position and _is_int(position):
            return link
    return None


def _check_record_link(state: _State, chain: Mapping[str, Any], links: list | None, record: Mapping[str, Any]) -> None:
    position = chain.get("record_position")
    link = _link_at(links, position)
    if link is None:
        state.fail("audit_chain.record_link", f"no link at record_position {position!r} in the window")
        return
    problems = []
    for member in ("decision_id", "record_hash", "receipt_hash", "policy_id", "policy_version"):
        if link.get(member) != record.get(member) or (member in ("decision_id", "record_hash", "receipt_hash")
                                                      and not isinstance(link.get(member), str)):
            problems.append(f"the link's {member} is not the record's")
    own = record.get("audit_chain")
    if own is not None and not _canon_equal(own, record_audit_chain(dict(link))):
        problems.append("the record's audit_chain member does not equal its link")
    state.conclude("audit_chain.record_link", problems)


def _check_head(state: _State, chain: Mapping[str, Any], links: list | None) -> None:
    if not links or not isinstance(links[-1], Mapping):
        state.fail("audit_chain.head", "no links")
        return
    last = links[-1]
    if last.get("chain_position") != chain.get("chain_size"):
        return  # the window does not reach the head: not checkable
    problems = []
    if not _digest_equal(last.get("link_hash"), chain.get("head_link_hash")):
        problems.append("head_link_hash is not the last link's link_hash")
    if not _digest_equal(last.get("merkle_root"), chain.get("merkle_root")):
        problems.append("merkle_root is not the last link's rolling root")
    state.conclude("audit_chain.head", problems)


def _check_inclusion(state: _State, chain: Mapping[str, Any], record: Mapping[str, Any]) -> None:
    problems: list[str] = []
    proof = chain.get("inclusion_proof")
    checkpoint = chain.get("checkpoint") if isinstance(chain.get("checkpoint"), Mapping) else {}
    if not _exact_members(problems, "inclusion_proof", proof, _PROOF_MEMBERS):
        if not isinstance(proof, Mapping):
            state.conclude("audit_chain.inclusion_proof", problems)
            return
    if proof.get("tree_algorithm") != CHAIN_TREE_ALGORITHM:
        problems.append(f"tree_algorithm must be {CHAIN_TREE_ALGORITHM}")
    position = chain.get("record_position")
    if not _is_int(position) or proof.get("leaf_index") != position - 1 or not _is_int(proof.get("leaf_index")):
        problems.append("leaf_index must be record_position - 1")
    if proof.get("tree_size") != checkpoint.get("tree_size") or not _is_int(proof.get("tree_size")):
        problems.append("tree_size must equal checkpoint.tree_size")
    try:
        expected_leaf = leaf_hash(record.get("decision_id"), record.get("record_hash"), record.get("receipt_hash"))
    except (CanonicalJSONError, TypeError, ValueError):
        expected_leaf = None
    state.value("audit_chain.inclusion_proof.leaf_hash", expected_leaf, proof.get("leaf_hash"))
    if not _digest_equal(expected_leaf, proof.get("leaf_hash")):
        problems.append("leaf_hash is not the leaf of this record")
    path = proof.get("proof")
    if not isinstance(path, list) or not verify_inclusion(
        proof.get("leaf_index"), proof.get("tree_size"), expected_leaf or "", path, checkpoint.get("root_hash")
    ):
        problems.append("the audit path does not lead from the record's leaf to checkpoint.root_hash")
    state.conclude("audit_chain.inclusion_proof", problems)


def _check_checkpoint(state: _State, chain: Mapping[str, Any], anchors: TrustAnchors, source: list) -> None:
    checkpoint = chain.get("checkpoint")
    problems: list[str] = []
    if not isinstance(checkpoint, Mapping):
        state.fail("audit_chain.checkpoint", "checkpoint must be an object")
        state.fail("audit_chain.checkpoint_signature", "checkpoint must be an object")
        return
    checkpoint = dict(checkpoint)
    signature = checkpoint.get("signature")
    unsigned = signature is None  # a gate without an Ed25519 key states its checkpoints unsigned
    if not unsigned:
        _exact_members(problems, "checkpoint.signature", signature, _CHECKPOINT_SIGNATURE_MEMBERS)
    if checkpoint.get("chain_id") != chain.get("chain_id"):
        problems.append("checkpoint.chain_id is not audit_chain.chain_id")
    if checkpoint.get("tree_size") != chain.get("chain_size"):
        problems.append("checkpoint.tree_size is not chain_size")
    if not _is_iso_ms(checkpoint.get("created_at")):
        problems.append("checkpoint.created_at must be ISO 8601 UTC with milliseconds and Z")
    signature = signature if isinstance(signature, Mapping) else {}
    key = anchors.select_ed25519(signature.get("key_id"), signature.get("public_key_fingerprint"))
    result = verify_checkpoint(checkpoint, key.public_key_pem if key is not None else "")
    state.value("audit_chain.checkpoint.checkpoint_hash", result.expected_checkpoint_hash,
                checkpoint.get("checkpoint_hash"))
    problems += [f"checkpoint {name} check failed" for name in _CHECKPOINT_INTEGRITY if not result.checks.get(name)]
    state.conclude("audit_chain.checkpoint", problems)

    if unsigned:
        state.fail("audit_chain.checkpoint_signature", "the checkpoint is unsigned: the chain excerpt is not authenticated")
        return
    if key is None:
        state.notes.append("checkpoint signature not checked: no trusted key for it; keys in the packet are not trust anchors")
        return
    signature_problems = [f"checkpoint {name} check failed"
                          for name in _CHECKPOINT_AUTHENTICITY if not result.checks.get(name)]
    if key.key_id is not None and signature.get("key_id") != key.key_id:
        signature_problems.append("checkpoint signature.key_id is not the trusted key's id")
    state.conclude("audit_chain.checkpoint_signature", signature_problems)
    source[0] = key.source
