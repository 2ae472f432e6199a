"""`gate.packets.common`: the small value helpers and the sealed-report rule, called directly."""

from __future__ import annotations

import pytest
from packet_support import seal

from gate.packets import (
    INTELLIGENCE_SECTIONS,
    PacketInputError,
    PacketSourceError,
    report_hash,
)
from gate.packets.common import (
    _canon,
    _canon_equal,
    _digest_equal,
    _exact_members,
    _is_hex64,
    _is_int,
    _is_iso_ms,
    _short,
    sealed_report_problem,
)
from gate.verify import VerificationInputError


def test_the_packet_errors_carry_their_codes_and_messages():
    source = PacketSourceError("the chain head cannot be read")
    assert (source.code, source.message) == ("PACKET_SOURCE_UNAVAILABLE", "the chain head cannot be read")
    invalid = PacketInputError("not an object")
    assert (invalid.code, invalid.message) == ("VERIFY_PACKET_INVALID", "not an object")
    assert isinstance(invalid, VerificationInputError)


def test_is_int_is_a_plain_integer_only():
    assert _is_int(0) and _is_int(-3) and _is_int(2**70)
    assert not _is_int(True) and not _is_int(1.0) and not _is_int("1") and not _is_int(None)


def test_is_hex64_is_exactly_64_lowercase_hex_characters():
    assert _is_hex64("0123456789abcdef" * 4)
    for value in ("A" * 64, "a" * 63, "a" * 65, "a" * 64 + "\n", "g" * 64, None, 7):
        assert not _is_hex64(value), value


def test_is_iso_ms_is_a_real_utc_time_with_milliseconds_and_z():
    assert _is_iso_ms("2026-02-28T23:59:59.999Z")
    assert _is_iso_ms("2024-02-29T00:00:00.000Z")
    for value in ("2026-02-29T00:00:00.000Z", "2026-13-01T00:00:00.000Z", "2026-01-01T24:00:00.000Z",
                  "2026-01-01T00:00:00Z", "2026-01-01T00:00:00.0000Z", "2026-01-01T00:00:00.000+00:00",
                  "2026-01-01 00:00:00.000Z", "2026-01-01T00:00:00.000Z\n", None, 20260101):
        assert not _is_iso_ms(value), value


def test_short_keeps_a_repr_of_up_to_width_characters_and_cuts_longer_ones():
    assert _short("x" * 78) == "'" + "x" * 78 + "'"  # 80 characters
    assert _short("x" * 79) == "'" + "x" * 78 + "…"  # 81 cut to 80
    assert len(_short("y" * 500)) == 80
    assert _short([1, 2], width=5) == "[1, 2]"[:4] + "…"
    assert _short(None) == "None"


def test_canon_is_canonical_json_and_none_for_what_is_not():
    assert _canon({"b": 1, "a": [True]}) == '{"a":[true],"b":1}'
    assert _canon(float("nan")) is None and _canon(object()) is None and _canon([1] * 3) == "[1,1,1]"


def test_the_packet_checks_compare_with_the_record_verifiers_functions():
    """Packets and records share one constant-time digest compare (gate.keys.detached) and one
    canonical equality (gate.verify.checks), both tested in tests/crypto/test_verify_checks_exact.py."""
    import gate.keys.detached as detached
    import gate.verify.checks as record_checks

    assert _digest_equal is detached._digest_equal and _canon_equal is record_checks._canon_equal


def test_report_hash_leaves_out_only_its_own_hash_member():
    report = {"v": 1, "effectiveness_hash": "x", "anomaly_hash": "y"}
    assert report_hash(report, "effectiveness") == report_hash({"v": 1, "anomaly_hash": "y"}, "effectiveness")
    assert report_hash(report, "effectiveness") != report_hash({"v": 1}, "effectiveness")
    assert report_hash(report, "anomaly") == report_hash({"v": 1, "effectiveness_hash": "x"}, "anomaly")


@pytest.mark.parametrize("section", sorted(INTELLIGENCE_SECTIONS))
def test_a_sealed_report_of_each_section_is_accepted(section):
    spec = INTELLIGENCE_SECTIONS[section]
    assert spec.hash_member == spec.kind + "_hash"
    assert sealed_report_problem(section, seal(spec.kind, {"policy_id": "p", "n": 1})) is None


def test_a_report_that_is_not_a_sealed_report_of_its_section_is_refused_with_the_reason():
    report = seal("effectiveness", {"policy_id": "p"})
    assert sealed_report_problem("effectivness", report).startswith("not one of ")
    assert sealed_report_problem("effectiveness", [report]) == "a report must be an object"
    assert sealed_report_problem("anomalies", report) == (
        "decision_anomaly_report_version must be decision_anomaly_report_v1")
    assert sealed_report_problem("effectiveness", dict(report, policy_id="q")) == (
        "effectiveness_hash is not the sha256 of the report without it")
    assert sealed_report_problem("effectiveness", {k: v for k, v in report.items() if k != "effectiveness_hash"}) \
        == "effectiveness_hash is not the sha256 of the report without it"
    assert sealed_report_problem("effectiveness", dict(report, score=float("nan"))) == (
        "the report is not canonical JSON")


def test_exact_members_names_unknown_and_missing_members():
    problems: list[str] = []
    assert _exact_members(problems, "w", {"a": 1, "b": 2}, frozenset({"a", "b"})) is True
    assert problems == []
    assert _exact_members(problems, "w", {"a": 1, "z": 2, 3: 4}, frozenset({"a", "b", "c"})) is False
    assert problems == ["w has unknown members [3, 'z']", "w lacks members ['b', 'c']"]
    problems.clear()
    assert _exact_members(problems, "w", {"a": 1}, frozenset({"a", "b"})) is False
    assert problems == ["w lacks members ['b']"]
    problems.clear()
    assert _exact_members(problems, "w", {"a": 1, "b": 1}, frozenset({"a"})) is False
    assert problems == ["w has unknown members ['b']"]
    problems.clear()
    assert _exact_members(problems, "w", ["a"], frozenset({"a"})) is False
    assert problems == ["w must be an object"]
