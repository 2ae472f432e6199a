"""Building packets from real parts and verifying them: the valid cases and the trust rules."""

from __future__ import annotations

import copy

import pytest
from packet_support import (
    ACTIVE,
    ATTACKER,
    REQUEST,
    RETIRED,
    Chain,
    anchors,
    at,
    chained_record,
    make_record,
    scenario,
    seal,
)

from gate.chain.merkle import checkpoint_body, sign_checkpoint
from gate.packets import (
    PACKET_CHECKS,
    VERIFICATION_HINTS,
    ChainExcerpt,
    PacketInputError,
    PacketOptions,
    PacketSourceError,
    build_packet,
    chain_window,
    report_hash,
    verify_packet,
    verify_packet_body,
)
from gate.protocol.canonical import canonical_text, parse_strict, sha256_hex
from gate.verify import TrustAnchors

ANCHORS = anchors()


def rehash(packet: dict) -> dict:
    packet["packet_hash"] = sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})
    return packet


@pytest.fixture(scope="module")
def base():
    return scenario()


def test_valid_packet_verifies(base):
    result = verify_packet(base.packet, anchors=ANCHORS)
    assert result.verified and result.integrity_valid and result.authenticity_valid, result.details
    assert result.failed_checks == ()
    assert result.key_source == "server_key_registry"
    assert result.checkpoint_key_source == "server_key_registry"
    assert set(PACKET_CHECKS) <= set(result.checks)
    # only with consistency_from / a checkpoint log / a held decision's hold events
    witnessed = ("chain_consistency", "checkpoint_log", "hold_events", "hold_events_signature", "hold_commitment",
                 "hold_commitment_signature", "hold_checkpoint_log")
    assert all(result.checks[name] is True for name in PACKET_CHECKS if name not in witnessed), result.checks
    assert all(result.checks[name] is None for name in witnessed)
    assert result.record["verified"] is True
    body = result.to_dict()
    assert body["verified"] is True and body["artifact"] == "decision_packet_v1"
    assert canonical_text(body)  # the result is JSON


def test_packet_survives_a_json_round_trip(base):
    text = canonical_text(base.packet)
    result = verify_packet(parse_strict(text.encode()), anchors=ANCHORS)
    assert result.verified, result.failed_checks


def test_packet_shape(base):
    packet = base.packet
    assert list(packet) == [
        "decision_packet_version", "decision_id", "record_hash", "receipt_hash", "exported_at",
        "packet_manifest", "decision_record", "original_input", "execution_receipts",
        "outcome_records", "crm_sync_records", "policy_intelligence", "audit_chain", "receipt_chain_head",
        "packet_hash",
    ]
    assert packet["packet_hash"] == sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})
    assert packet["decision_record"] == base.record
    manifest = packet["packet_manifest"]
    assert manifest["options"] == {"include_input": True, "include_chain": True, "include_intelligence": True,
                                   "execution_limit": 3, "outcome_limit": 2, "chain_limit": 20}
    assert manifest["components"] == {"decision_record": 1, "original_input": 1, "execution_receipts": 3,
                                      "outcome_records": 2, "crm_sync_records": 2, "audit_chain_links": 20,
                                      "intelligence_reports": 2}
    assert manifest["totals"] == {"execution_receipts": 5, "outcome_records": 3, "crm_sync_records": 2}
    assert manifest["truncated"] == {"execution_receipts": True, "outcome_records": True, "crm_sync_records": False}
    # newest first: the first exported receipts are the last ones stored
    assert [r["execution_receipt_id"] for r in packet["execution_receipts"]] == ["exr_000004", "exr_000003", "exr_000002"]
    chain = packet["audit_chain"]
    assert chain["chain_size"] == 40 and chain["record_position"] == 25
    assert chain["window"]["first_position"] == 21 and chain["window"]["last_position"] == 40
    assert [link["chain_position"] for link in chain["links"]] == list(range(21, 41))
    assert all(set(link) == set(base.chain.links[0]) for link in chain["links"])  # store columns dropped
    assert chain["head_link_hash"] == base.chain.links[-1]["link_hash"]
    assert chain["inclusion_proof"]["leaf_index"] == 24 and chain["inclusion_proof"]["tree_size"] == 40
    assert chain["checkpoint"]["tree_size"] == 40
    assert chain["verification_hints"] == VERIFICATION_HINTS
    reports = packet["policy_intelligence"]
    assert list(reports) == ["effectiveness", "anomalies"]
    assert reports["anomalies"]["anomaly_hash"] == report_hash(reports["anomalies"], "anomaly")
    assert reports["effectiveness"]["decision_effectiveness_report_version"] == "decision_effectiveness_report_v1"


def test_truncated_flags_follow_the_limits():
    full = scenario(execution_limit=5, outcome_limit=3).packet["packet_manifest"]
    assert full["truncated"] == {"execution_receipts": False, "outcome_records": False, "crm_sync_records": False}
    assert full["components"]["execution_receipts"] == 5
    one = scenario(execution_limit=1, outcome_limit=1)
    manifest = one.packet["packet_manifest"]
    assert manifest["truncated"] == {"execution_receipts": True, "outcome_records": True, "crm_sync_records": True}
    assert manifest["components"]["crm_sync_records"] == 1
    assert verify_packet(one.packet, anchors=ANCHORS).verified


def test_totals_may_come_from_a_count():
    """The service may read only the newest `limit` receipts and COUNT the rest."""
    s = scenario()
    options = PacketOptions(execution_limit=2, include_chain=False)
    packet = build_packet(record=s.record, exported_at=at(7200), options=options,
                          executions=s.parts["executions"][:2], totals={"execution_receipts": 5,
                                                                       "outcome_records": 0, "crm_sync_records": 0})
    assert packet["packet_manifest"]["totals"]["execution_receipts"] == 5
    assert packet["packet_manifest"]["truncated"]["execution_receipts"] is True
    assert verify_packet(packet, anchors=ANCHORS).verified
    with pytest.raises(PacketSourceError):  # fewer read than the limit allows of the total
        build_packet(record=s.record, exported_at=at(7200), options=PacketOptions(execution_limit=3, include_chain=False),
                     executions=s.parts["executions"][:2], totals={"execution_receipts": 5})
    with pytest.raises(PacketSourceError):  # a total below what was read
        build_packet(record=s.record, exported_at=at(7200), options=options,
                     executions=s.parts["executions"], totals={"execution_receipts": 1})


def test_packet_without_chain_input_or_intelligence():
    s = scenario(include_chain=False, include_input=False, reports=False)
    packet = s.packet
    assert "audit_chain" not in packet and "original_input" not in packet and "intelligence" not in packet
    assert packet["packet_manifest"]["components"]["audit_chain_links"] == 0
    result = verify_packet(packet, anchors=ANCHORS)
    assert result.verified, result.details
    assert all(result.checks[name] is None for name in PACKET_CHECKS if name.startswith("audit_chain"))
    assert result.checks["original_input"] is None and result.checks["intelligence_reports"] is None
    assert result.checks["record_audit_chain"] is True  # the record's own member is still checked
    # the original input may be supplied to the verifier instead
    with_input = verify_packet(packet, anchors=ANCHORS, original_input=copy.deepcopy(REQUEST))
    assert with_input.verified and with_input.checks["original_input"] is True
    other = dict(REQUEST, question="something else")
    wrong = verify_packet(packet, anchors=ANCHORS, original_input=other)
    assert not wrong.verified
    assert {"original_input", "record.input_hash"} <= set(wrong.failed_checks)


def test_supplied_input_must_agree_with_the_packets(base):
    result = verify_packet(base.packet, anchors=ANCHORS, original_input=dict(REQUEST, question="other"))
    assert not result.verified and "original_input" in result.failed_checks


def test_intelligence_requested_but_not_available_is_omitted():
    s = scenario(reports=False)
    assert "policy_intelligence" not in s.packet
    assert s.packet["packet_manifest"]["options"]["include_intelligence"] is True
    assert s.packet["packet_manifest"]["components"]["intelligence_reports"] == 0
    assert verify_packet(s.packet, anchors=ANCHORS).verified


def test_retired_key_record_verifies_with_the_full_registry():
    s = scenario(record_key=RETIRED)
    assert s.packet["decision_record"]["receipt_key_id"] == RETIRED.key_id
    result = verify_packet(s.packet, anchors=ANCHORS)
    assert result.verified, result.failed_checks
    # with only the active key the record is not authentic, the checkpoint still is
    only_active = verify_packet(s.packet, anchors=anchors((ACTIVE,)))
    assert not only_active.verified and only_active.integrity_valid
    assert "record.receipt_signature" in only_active.failed_checks
    assert only_active.checks["audit_chain.checkpoint_signature"] is True


def test_checkpoint_signed_by_a_retired_key_verifies():
    s = scenario(checkpoint_key=RETIRED)
    assert verify_packet(s.packet, anchors=ANCHORS).verified


def test_without_trust_anchors_integrity_holds_but_nothing_is_authentic(base):
    result = verify_packet(base.packet)
    assert result.integrity_valid and not result.authenticity_valid and not result.verified
    assert result.key_source is None
    assert result.checks["audit_chain.checkpoint_signature"] is None
    assert "record.receipt_signature" in result.failed_checks
    assert any("checkpoint signature not checked" in note for note in result.notes)


def test_a_key_stuffed_into_the_packet_is_not_trusted(base):
    """An attacker rewrites the decision, re-signs record and checkpoint with their own key,
    and ships that key inside the packet: it never becomes a trust anchor."""
    chain = Chain()
    chain.filler(24, start_seconds=-100)
    record = chained_record(chain, make_record(key=ATTACKER, decision_id=base.record["decision_id"]))
    chain.filler(15, start_seconds=30)
    forged = build_packet(record=record, exported_at=at(7200), options=PacketOptions(),
                          chain=chain.excerpt(25, 20, key=ATTACKER))
    forged["audit_chain"]["checkpoint"]["signature"]["public_key_pem"] = ATTACKER.public_key_pem
    forged["receipt_keys"] = {"keys": [{"key_id": ATTACKER.key_id, "public_key": ATTACKER.public_key_pem}]}
    rehash(forged)
    for trust in (ANCHORS, TrustAnchors()):
        result = verify_packet(forged, anchors=trust)
        assert not result.verified and not result.authenticity_valid
        assert result.key_source is None and result.checkpoint_key_source is None
        assert result.checks["audit_chain.checkpoint_signature"] is None
        assert {"packet_members", "audit_chain.checkpoint", "record.receipt_signature"} <= set(result.failed_checks)
    # even without the stuffed members, the attacker's signatures prove nothing
    del forged["receipt_keys"]
    del forged["audit_chain"]["checkpoint"]["signature"]["public_key_pem"]
    result = verify_packet(rehash(forged), anchors=ANCHORS)
    assert result.integrity_valid and not result.verified
    assert result.record["checks"]["signature_matches_untrusted_key"] is None


def test_checkpoint_key_selected_by_fingerprint_must_carry_the_stated_key_id(base):
    packet = copy.deepcopy(base.packet)
    packet["audit_chain"]["checkpoint"]["signature"]["key_id"] = "ed25519-0000000000000000"
    result = verify_packet(rehash(packet), anchors=ANCHORS)
    assert not result.verified and "audit_chain.checkpoint_signature" in result.failed_checks


def test_verify_packet_body(base):
    assert verify_packet_body({"packet": base.packet}, anchors=ANCHORS).verified
    assert verify_packet_body({"packet": base.packet, "input": REQUEST}, anchors=ANCHORS).verified
    with pytest.raises(PacketInputError):
        verify_packet_body({"record": {}}, anchors=ANCHORS)
    with pytest.raises(PacketInputError):
        verify_packet_body([base.packet], anchors=ANCHORS)
    with pytest.raises(PacketInputError) as caught:
        verify_packet("not a packet", anchors=ANCHORS)
    assert caught.value.code == "VERIFY_PACKET_INVALID"


def test_build_refuses_missing_or_inconsistent_sources(base):
    record, chain = base.record, base.chain
    with pytest.raises(PacketSourceError):
        build_packet(record=record, exported_at=at(7200), options=PacketOptions(include_input=True, include_chain=False))
    with pytest.raises(PacketSourceError):
        build_packet(record=record, exported_at=at(7200), options=PacketOptions())
    with pytest.raises(PacketSourceError):
        build_packet(record=None, exported_at=at(7200), options=PacketOptions(include_chain=False))
    with pytest.raises(ValueError):
        build_packet(record=record, exported_at="yesterday", options=PacketOptions(include_chain=False))
    good = chain.excerpt(25, 20)
    bad_window = ChainExcerpt(**{**good.__dict__, "links": good.links[1:]})
    bad_proof = ChainExcerpt(**{**good.__dict__, "inclusion_proof": good.inclusion_proof[1:]})
    other_record = ChainExcerpt(**{**good.__dict__, "record_position": 26})
    stale = sign_checkpoint(checkpoint_body(chain.chain_id, 39, good.checkpoint["root_hash"], at(1)), ACTIVE)
    bad_checkpoint = ChainExcerpt(**{**good.__dict__, "checkpoint": stale})
    bad_head = ChainExcerpt(**{**good.__dict__, "head_link_hash": "0" * 64})
    for excerpt in (bad_window, bad_proof, other_record, bad_checkpoint, bad_head):
        with pytest.raises(PacketSourceError):
            build_packet(record=record, exported_at=at(7200), options=PacketOptions(), chain=excerpt)
    good_report = seal("benchmark", {"policy_id": record["policy_id"], "recommendation": "x"})
    for sections in ({"astrology": good_report},
                     {"benchmarks": dict(good_report, benchmark_hash="0" * 64)},
                     {"benchmarks": dict(good_report, decision_benchmark_version="v0")},
                     {"benchmarks": seal("benchmark", {"policy_id": "other_policy"})},
                     {"anomalies": good_report},
                     {"benchmarks": "report"}):
        with pytest.raises(PacketSourceError):
            build_packet(record=record, exported_at=at(7200), options=PacketOptions(include_chain=False),
                         policy_intelligence=sections)
    built = build_packet(record=record, exported_at=at(7200), options=PacketOptions(include_chain=False),
                         policy_intelligence={"benchmarks": good_report})
    assert built["policy_intelligence"] == {"benchmarks": good_report}


def test_chain_window_rule():
    assert chain_window(25, 40, 20) == (21, 40)       # reaches the head
    assert chain_window(5, 100_000, 20) == (5, 24)    # starts at the record, toward the head
    assert chain_window(1, 1, 20) == (1, 1)
    assert chain_window(3, 5, 20) == (1, 5)
    assert chain_window(100, 100, 1) == (100, 100)
    assert chain_window(99_990, 100_000, 20) == (99_981, 100_000)
    for bad in ((0, 5, 20), (6, 5, 20), (1, 5, 0), ("1", 5, 20)):
        with pytest.raises(ValueError):
            chain_window(*bad)


@pytest.mark.parametrize("position,size,limit", [(1, 1, 1), (1, 7, 3), (4, 7, 3), (7, 7, 3), (9, 33, 8), (33, 33, 40)])
def test_windows_of_all_shapes_verify(position, size, limit):
    chain = Chain()
    chain.filler(position - 1)
    record = chained_record(chain, make_record())
    chain.filler(size - position, start_seconds=10)
    packet = build_packet(record=record, exported_at=at(7200), options=PacketOptions(chain_limit=limit),
                          chain=chain.excerpt(position, limit))
    result = verify_packet(packet, anchors=ANCHORS)
    assert result.verified, result.details
    reaches_head = packet["audit_chain"]["window"]["last_position"] == size
    assert result.checks["audit_chain.head"] is (True if reaches_head else None)


def test_hmac_signed_record_needs_the_secret():
    from gate.keys.signing import HmacKey, HmacReceiptSigner
    from gate.protocol.records import seal_record

    s = scenario(include_chain=False)
    key = HmacKey("hmac-ops-1", b"operator-secret-please-rotate")
    from gate.protocol.decision_record import AUDIT_CHAIN_MEMBERS, audit_chain_part

    sealed = seal_record(s.record, receipt_signer=HmacReceiptSigner(key))
    record = {**{k: v for k, v in sealed.items() if k not in AUDIT_CHAIN_MEMBERS},
              **audit_chain_part(sealed["decision_id"], s.record["audit_chain"], HmacReceiptSigner(key))}
    packet = build_packet(record=record, exported_at=at(7200), options=PacketOptions(include_chain=False))
    assert not verify_packet(packet, anchors=ANCHORS).verified
    trusted = ANCHORS + TrustAnchors.from_hmac_key(key)
    result = verify_packet(packet, anchors=trusted)
    assert result.verified and result.key_source == "hmac_secret"


def test_build_refuses_raw_store_rows_and_an_export_time_before_its_content(base):
    good = base.chain.excerpt(25, 20)
    rows = tuple({k: link[k] for k in ("chain_id", "chain_position", "decision_id", "leaf_hash", "link_hash")}
                 for link in good.links)
    with pytest.raises(PacketSourceError):
        build_packet(record=base.record, exported_at=at(7200), options=PacketOptions(),
                     chain=ChainExcerpt(**{**good.__dict__, "links": rows}))
    broken = tuple(dict(link, created_at="2026-01-01T00:00:00.000Z") if i == 3 else link
                   for i, link in enumerate(good.links))
    with pytest.raises(PacketSourceError):
        build_packet(record=base.record, exported_at=at(7200), options=PacketOptions(),
                     chain=ChainExcerpt(**{**good.__dict__, "links": broken}))
    with pytest.raises(PacketSourceError):  # the checkpoint was signed after this export time
        build_packet(record=base.record, exported_at=at(1800), options=PacketOptions(), chain=good)


def test_unsigned_checkpoint_is_intact_but_not_authentic(base):
    """A gate without an Ed25519 key states checkpoints as body + checkpoint_hash + signature null."""
    from gate.chain.merkle import checkpoint_hash

    good = base.chain.excerpt(25, 20)
    body = {k: good.checkpoint[k] for k in ("checkpoint_version", "chain_id", "tree_size", "root_hash",
                                            "hash_algorithm", "tree_algorithm", "created_at")}
    unsigned = {**body, "checkpoint_hash": checkpoint_hash(body), "signature": None}
    packet = build_packet(record=base.record, exported_at=at(7200), options=PacketOptions(),
                          chain=ChainExcerpt(**{**good.__dict__, "checkpoint": unsigned}))
    result = verify_packet(packet, anchors=ANCHORS)
    assert result.integrity_valid and not result.authenticity_valid and not result.verified
    assert result.failed_checks == ("audit_chain.checkpoint_signature",)
    assert result.checks["audit_chain.checkpoint"] is True
    without_hash = dict(unsigned)
    del without_hash["checkpoint_hash"]
    packet = build_packet(record=base.record, exported_at=at(7200), options=PacketOptions(),
                          chain=ChainExcerpt(**{**good.__dict__, "checkpoint": without_hash}))
    assert "audit_chain.checkpoint" in verify_packet(packet, anchors=ANCHORS).failed_checks


def test_the_intelligence_part_verifies_under_the_reference_rules(base):
    """The reference's public verifier: packet_hash over the packet without it, and
    effectiveness_hash / anomaly_hash over policy_intelligence.effectiveness / .anomalies."""
    packet = base.packet
    assert packet["packet_hash"] == sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})
    for section, member in (("effectiveness", "effectiveness_hash"), ("anomalies", "anomaly_hash")):
        report = packet["policy_intelligence"][section]
        assert report[member] == sha256_hex({k: v for k, v in report.items() if k != member})
    assert packet["packet_manifest"]["components"]["intelligence_reports"] == len(packet["policy_intelligence"])
