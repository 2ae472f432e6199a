"""Decision Packets (`decision_packet_v1`): the portable export of one decision, and its verifier.

A packet carries one Decision Record with everything needed to check it offline: optionally
the original request, the newest execution receipts, Outcome Records and CRM sync records, the
policy intelligence reports (`policy_intelligence.{effectiveness, anomalies, confidence,
benchmarks}`, each a sealed report with its own hash), and an excerpt of the caller's audit chain with an RFC 6962 inclusion
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
signed tree of `chain_size` leaves (inclusion proof + checkpoint). A held decision's hold events
(`hold_events`) are each authentic against trusted keys and bound to the record. Intact and
consistent but unkeyed (anyone rewriting a packet can recompute them): `packet_hash`, receipt and report hashes,
the window's rolling links and head. Every member is covered by some check besides
`packet_hash`, except these export claims, checked only for form and consistency: `exported_at`
(beyond being later than everything in the packet), `packet_manifest.totals.*` of a truncated
list, and a `packet_manifest.options.*_limit` whose lists are complete.
`tests/packets/test_packet_mutations.py` pins this list.
"""

from gate.packets.build import build_packet
from gate.packets.common import (
    INTELLIGENCE_SECTIONS,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    LIMIT_MIN,
    PACKET_CHECKS,
    PACKET_MEMBERS,
    REPORT_TYPES,
    VERIFICATION_HINTS,
    PacketInputError,
    PacketSourceError,
    packet_sources,
    report_hash,
)
from gate.packets.excerpt import ChainExcerpt, chain_window
from gate.packets.members import ConsistencyFrom
from gate.packets.options import PacketOptions

# Private fast-path names, importable from the package path for tests/packets/test_packet_receipts.py.
from gate.packets.receipts_fast import _BindingCache as _BindingCache
from gate.packets.receipts_fast import _fast_receipt_ok as _fast_receipt_ok
from gate.packets.receipts_fast import _packet_text as _packet_text
from gate.packets.receipts_fast import _ReceiptTexts as _ReceiptTexts
from gate.packets.result import PacketVerification
from gate.packets.verify import verify_packet, verify_packet_body

__all__ = [
    "INTELLIGENCE_SECTIONS",
    "LIMIT_DEFAULT",
    "LIMIT_MAX",
    "LIMIT_MIN",
    "PACKET_CHECKS",
    "PACKET_MEMBERS",
    "REPORT_TYPES",
    "VERIFICATION_HINTS",
    "ChainExcerpt",
    "ConsistencyFrom",
    "PacketInputError",
    "PacketOptions",
    "PacketSourceError",
    "PacketVerification",
    "build_packet",
    "chain_window",
    "packet_sources",
    "report_hash",
    "verify_packet",
    "verify_packet_body",
]
