"""Report envelopes: version label first, hash = sha256(canonical JSON without the hash member),
the same hash the packet builder computes."""

from __future__ import annotations

import pytest

from gate.packets.common import report_hash as packet_report_hash
from gate.protocol.canonical import sha256_hex
from gate.protocol.report_envelopes import KINDS, report_hash, seal, verify


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_seal_puts_version_first_and_hash_last(kind):
    spec = KINDS[kind]
    report = seal(kind, {"policy_id": "p", "score": 0.5, "items": [1, 2]})
    keys = list(report)
    assert keys[0] == spec.version_member and keys[-1] == spec.hash_member
    assert report[spec.version_member] == spec.version
    body = {k: v for k, v in report.items() if k != spec.hash_member}
    assert report[spec.hash_member] == sha256_hex(body) == report_hash(kind, report)
    assert verify(kind, report)
    # the packet builder computes the same hash for this report type
    assert packet_report_hash(report, kind) == report[spec.hash_member]


def test_any_change_breaks_the_hash():
    report = seal("anomaly", {"anomaly_count": 1, "anomalies": [{"anomaly_score": 0.5}]})
    assert report["decision_anomaly_report_version"] == "decision_anomaly_report_v1"
    tampered = dict(report, anomaly_count=2)
    assert not verify("anomaly", tampered)
    assert not verify("anomaly", dict(report, decision_anomaly_report_version="decision_anomaly_report_v2"))
    assert not verify("benchmark", report)


def test_labels_of_the_reference():
    assert KINDS["anomaly"].version == "decision_anomaly_report_v1"
    assert KINDS["benchmark"].version == "decision_benchmark_v1"
    assert KINDS["effectiveness"].hash_member == "effectiveness_hash"
    assert KINDS["benchmark"].hash_member == "benchmark_hash"


def test_packet_sections_use_the_same_labels():
    from gate.packets.common import INTELLIGENCE_SECTIONS

    for section in INTELLIGENCE_SECTIONS.values():
        spec = KINDS[section.kind]
        assert (section.version_member, section.version, section.hash_member) == \
            (spec.version_member, spec.version, spec.hash_member)
