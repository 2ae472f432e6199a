"""Each kind of tampering is caught by the check named for it.

Every tamper below recomputes `packet_hash` afterwards (anyone can), unless it targets the
packet hash itself, so the named check is what catches it.
"""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packet_support import ATTACKER, anchors, scenario

from gate.chain.merkle import checkpoint_body, sign_checkpoint
from gate.packets import verify_packet
from gate.protocol.canonical import canonical_text, sha256_hex
from gate.receipts import execution_hash_of, outcome_hash_of

ANCHORS = anchors()
BASE = scenario()


def rehash(packet: dict) -> dict:
    packet["packet_hash"] = sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})
    return packet


def _set_exec_status(p):
    p["execution_receipts"][2]["execution_status"] = "failed"


def _foreign_receipt(p):
    receipt = p["execution_receipts"][0]
    receipt["decision_record_hash"] = "f" * 64
    receipt["execution_hash"] = execution_hash_of(receipt)


def _swap_receipts(p):
    r = p["execution_receipts"]
    r[0], r[1] = r[1], r[0]


def _duplicate_receipt(p):
    p["execution_receipts"][1] = copy.deepcopy(p["execution_receipts"][0])


def _outcome_binding(p):
    outcome = p["outcome_records"][0]
    outcome["action_binding"] = dict(outcome["action_binding"], amount="99")
    outcome["outcome_hash"] = outcome_hash_of(outcome)


def _drop_link(p):
    del p["audit_chain"]["links"][3]


def _link_created(p):
    p["audit_chain"]["links"][7]["created_at"] = "2026-11-03T09:30:01.000Z"


def _resign_checkpoint_with_other_root(p):
    cp = p["audit_chain"]["checkpoint"]
    body = {k: cp[k] for k in ("chain_id", "tree_size", "created_at")}
    from packet_support import (
        ACTIVE,  # the operator's own key cannot sign a wrong root unnoticed
    )

    p["audit_chain"]["checkpoint"] = sign_checkpoint(
        checkpoint_body(body["chain_id"], body["tree_size"], "ab" * 32, body["created_at"]), ACTIVE)


def _checkpoint_by_attacker(p):
    cp = p["audit_chain"]["checkpoint"]
    p["audit_chain"]["checkpoint"] = sign_checkpoint(
        checkpoint_body(cp["chain_id"], cp["tree_size"], cp["root_hash"], cp["created_at"]), ATTACKER)


def _report_policy(p):
    report = p["policy_intelligence"]["effectiveness"]
    report["policy_id"] = "refund_review"
    from gate.packets import report_hash

    report["effectiveness_hash"] = report_hash(report, "effectiveness")


def _receipt_signature(p):
    signature = p["decision_record"]["receipt_signature"]
    p["decision_record"]["receipt_signature"] = signature[:-2] + ("AA" if signature[-2:] != "AA" else "BA")


TAMPERS = {
    "packet hash": (lambda p: p.__setitem__("packet_hash", "0" * 64), {"packet_hash"}, False),
    "packet version": (lambda p: p.__setitem__("decision_packet_version", "decision_packet_v2"), {"packet_version"}, True),
    "unknown member": (lambda p: p.__setitem__("note", "trust me"), {"packet_members"}, True),
    "missing member": (lambda p: p.pop("crm_sync_records"), {"packet_members", "packet_manifest"}, True),
    "components count": (lambda p: p["packet_manifest"]["components"].__setitem__("outcome_records", 3), {"packet_manifest"}, True),
    "top-level record hash": (lambda p: p.__setitem__("record_hash", "0" * 64), {"packet_manifest"}, True),
    "truncated flag": (lambda p: p["packet_manifest"]["truncated"].__setitem__("execution_receipts", False), {"packet_manifest"}, True),
    "option vs content": (lambda p: p["packet_manifest"]["options"].__setitem__("include_chain", False), {"packet_manifest"}, True),
    "limit out of bounds": (lambda p: p["packet_manifest"]["options"].__setitem__("chain_limit", 0), {"packet_manifest", "audit_chain.window"}, True),
    "canonicalization label": (lambda p: p["packet_manifest"].__setitem__("canonicalization", "json.sorted"), {"packet_manifest"}, True),
    "exported before the record": (lambda p: p.__setitem__("exported_at", "2026-11-03T09:00:00.000Z"), {"exported_at"}, True),
    "exported_at format": (lambda p: p.__setitem__("exported_at", "2026-11-03 11:30:00"), {"exported_at"}, True),
    "original input": (lambda p: p["original_input"]["context"]["inputs"].__setitem__("discount_percent", 30),
                       {"original_input", "record", "record.input_hash", "record.rulebook_attestation_input_hash"}, True),
    "record verdict": (lambda p: p["decision_record"].__setitem__("verdict", "no"), {"record", "record.record_hash"}, True),
    "record signature": (_receipt_signature, {"record.receipt_signature"}, True),
    "record audit_chain member": (lambda p: p["decision_record"]["audit_chain"].__setitem__("chain_position", 24),
                                  {"audit_chain.record_link"}, True),
    "record audit_chain leaf": (lambda p: p["decision_record"]["audit_chain"].__setitem__("leaf_hash", "1" * 64),
                                {"record_audit_chain", "audit_chain.record_link"}, True),
    "execution status": (_set_exec_status, {"execution_receipts", "execution_receipts[2].execution_hash"}, True),
    "receipt of another record": (_foreign_receipt, {"execution_receipts", "execution_receipts[0].decision_record_hash"}, True),
    "receipts reordered": (_swap_receipts, {"execution_receipts"}, True),
    "receipt duplicated": (_duplicate_receipt, {"execution_receipts"}, True),
    "unhashed receipt member": (lambda p: p["outcome_records"][1].__setitem__("note", "x"),
                                {"outcome_records", "outcome_records[1].unhashed_members"}, True),
    "outcome binding": (_outcome_binding, {"outcome_records", "outcome_records[0].action_binding"}, True),
    "crm sync hash": (lambda p: p["crm_sync_records"][1].__setitem__("sync_hash", "2" * 64),
                      {"crm_sync_records", "crm_sync_records[1].sync_hash"}, True),
    "report number": (lambda p: p["policy_intelligence"]["effectiveness"].__setitem__("effectiveness_score", 0.99),
                      {"intelligence_reports", "policy_intelligence.effectiveness.effectiveness_hash"}, True),
    "report section": (lambda p: p["policy_intelligence"].__setitem__("patterns", p["policy_intelligence"].pop("anomalies")),
                       {"intelligence_reports", "policy_intelligence.patterns.section"}, True),
    "report swapped into another section": (
        lambda p: p["policy_intelligence"].__setitem__("confidence", p["policy_intelligence"].pop("anomalies")),
        {"intelligence_reports", "policy_intelligence.confidence.decision_confidence_version",
         "policy_intelligence.confidence.confidence_hash"}, True),
    "report label": (lambda p: p["policy_intelligence"]["anomalies"].__setitem__(
        "decision_anomaly_report_version", "decision_anomaly_report_v2"),
        {"intelligence_reports", "policy_intelligence.anomalies.decision_anomaly_report_version",
         "policy_intelligence.anomalies.anomaly_hash"}, True),
    "report of another policy": (_report_policy, {"intelligence_reports", "policy_intelligence.effectiveness.policy_id"}, True),
    "chain link member": (_link_created, {"audit_chain.links"}, True),
    "chain link dropped": (_drop_link, {"audit_chain.window", "audit_chain.links", "packet_manifest"}, True),
    "chain hints": (lambda p: p["audit_chain"]["verification_hints"].__setitem__("checkpoint", "Use the key in the packet."),
                    {"audit_chain"}, True),
    "record position": (lambda p: p["audit_chain"].__setitem__("record_position", 26),
                        {"audit_chain.record_link", "audit_chain.inclusion_proof"}, True),
    "record position outside the window": (lambda p: p["audit_chain"].__setitem__("record_position", 3),
                                           {"audit_chain.record_link", "audit_chain.window"}, True),
    "head link hash": (lambda p: p["audit_chain"].__setitem__("head_link_hash", "3" * 64), {"audit_chain.head"}, True),
    "window anchor": (lambda p: p["audit_chain"]["window"].__setitem__("previous_link_hash", "4" * 64), {"audit_chain.links"}, True),
    "inclusion path": (lambda p: p["audit_chain"]["inclusion_proof"]["proof"].__setitem__(0, "5" * 64),
                       {"audit_chain.inclusion_proof"}, True),
    "checkpoint root": (lambda p: p["audit_chain"]["checkpoint"].__setitem__("root_hash", "6" * 64),
                        {"audit_chain.checkpoint", "audit_chain.checkpoint_signature", "audit_chain.inclusion_proof"}, True),
    "checkpoint re-signed over another root": (_resign_checkpoint_with_other_root, {"audit_chain.inclusion_proof"}, True),
    "checkpoint signature": (lambda p: p["audit_chain"]["checkpoint"]["signature"].__setitem__("signature", "A" * 86),
                             {"audit_chain.checkpoint_signature"}, True),
}


@pytest.mark.parametrize("name", list(TAMPERS))
def test_tamper_is_named(name):
    tamper, expected, recompute = TAMPERS[name]
    packet = copy.deepcopy(BASE.packet)
    tamper(packet)
    if recompute:
        rehash(packet)
    result = verify_packet(packet, anchors=ANCHORS)
    assert result.verified is False
    assert expected <= set(result.failed_checks), (result.failed_checks, result.details)
    if recompute:
        assert result.checks["packet_hash"] is True
    for check in expected:
        if "[" not in check and not check.startswith("record."):
            assert result.details.get(check) or check in ("record",), (check, result.details)


def test_checkpoint_signed_by_an_untrusted_key_is_not_authentic():
    packet = copy.deepcopy(BASE.packet)
    _checkpoint_by_attacker(packet)
    result = verify_packet(rehash(packet), anchors=ANCHORS)
    assert result.integrity_valid and not result.authenticity_valid and not result.verified
    assert result.checks["audit_chain.checkpoint_signature"] is None
    assert result.checkpoint_key_source is None


def test_authenticity_failures_are_not_integrity_failures():
    packet = copy.deepcopy(BASE.packet)
    _receipt_signature(packet)
    result = verify_packet(rehash(packet), anchors=ANCHORS)
    assert result.integrity_valid and not result.authenticity_valid
    packet = copy.deepcopy(BASE.packet)
    packet["audit_chain"]["checkpoint"]["signature"]["signature"] = "A" * 86
    result = verify_packet(rehash(packet), anchors=ANCHORS)
    assert result.integrity_valid and not result.authenticity_valid


def test_malformed_parts_never_raise():
    for mutate in (
        lambda p: p.__setitem__("decision_record", []),
        lambda p: p.__setitem__("audit_chain", "chain"),
        lambda p: p["audit_chain"].__setitem__("links", {"1": {}}),
        lambda p: p["audit_chain"].__setitem__("links", []),
        lambda p: p["audit_chain"]["links"].__setitem__(0, 7),
        lambda p: p["audit_chain"].__setitem__("inclusion_proof", None),
        lambda p: p["audit_chain"].__setitem__("window", None),
        lambda p: p["audit_chain"].__setitem__("checkpoint", []),
        lambda p: p["audit_chain"]["checkpoint"].__setitem__("signature", "sig"),
        lambda p: p.__setitem__("packet_manifest", None),
        lambda p: p["packet_manifest"].__setitem__("options", []),
        lambda p: p.__setitem__("execution_receipts", {"0": {}}),
        lambda p: p["execution_receipts"].__setitem__(0, None),
        lambda p: p.__setitem__("policy_intelligence", {"effectiveness": None, "anomalies": 3, "x": {}}),
        lambda p: p.__setitem__("policy_intelligence", []),
        lambda p: p.__setitem__("exported_at", 20261103),
        lambda p: p["decision_record"].__setitem__("audit_chain", "x"),
        lambda p: p["packet_manifest"]["options"].__setitem__("chain_limit", float("nan")),
    ):
        packet = copy.deepcopy(BASE.packet)
        mutate(packet)
        result = verify_packet(packet, anchors=ANCHORS)
        assert result.verified is False and result.failed_checks


def _nodes(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _nodes(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _nodes(item, path + (index,))


NODES = [path for path in _nodes(BASE.packet) if path]
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=4),
    lambda children: st.lists(children, max_size=2) | st.dictionaries(st.text(max_size=4), children, max_size=2),
    max_leaves=4,
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_structural_damage_never_raises_and_never_verifies(data):
    packet = copy.deepcopy(BASE.packet)
    path = data.draw(st.sampled_from(NODES), label="path")
    parent = packet
    for step in path[:-1]:
        parent = parent[step]
    if data.draw(st.booleans(), label="delete") and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(JSON, label="value")
    rehashed = data.draw(st.booleans(), label="rehash")
    if rehashed:
        rehash(packet)  # a rehash restores a deleted or altered packet_hash: compare the content

    def content(p):
        return canonical_text({k: v for k, v in p.items() if k != "packet_hash"} if rehashed else p)

    changed = content(packet) != content(BASE.packet)
    result = verify_packet(packet, anchors=ANCHORS)
    # Claims aside, a change is caught. Inside the record, dropping (or nulling) a member that
    # `verify_record` treats as optional (engine, evaluation, integrity, ...) is the record
    # verifier's business (tests/crypto), not the packet's.
    exempt = path[:1] in (("exported_at",), ("packet_manifest",), ("decision_record",))
    if path == ("receipt_chain_head",) and "receipt_chain_head" not in packet:
        # A packet without a head is a packet from before heads (or the reference's): it verifies
        # only with the note that its receipt lists are unproven (SECURITY.md, issue 18 item 4d).
        assert not result.verified or any("no receipt_chain_head" in note for note in result.notes)
        exempt = True
    assert not (changed and result.verified and not exempt), path
    canonical_text(result.to_dict())
