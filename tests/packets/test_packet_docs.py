"""docs/verification.md §8 documents every packet check and the export claims."""

from __future__ import annotations

from pathlib import Path

from gate.packets import PACKET_CHECKS, REPORT_TYPES, VERIFICATION_HINTS

DOC = (Path(__file__).resolve().parents[2] / "docs" / "verification.md").read_text(encoding="utf-8")
SECTION = DOC[DOC.index("## 8. Decision Packets"):]


def test_every_check_is_documented():
    for name in PACKET_CHECKS:
        assert f"`{name}`" in SECTION, name


def test_formats_and_claims_are_documented():
    for text in ("last = min(n, p + L − 1)", "first = max(1, last − L + 1)", "execution_limit",
                 "PACKET_SOURCE_UNAVAILABLE", "VERIFY_PACKET_INVALID", "out_of_range", "invalid_type",
                 "invalid_value", "test_packet_mutations.py", "exported_at", "totals"):
        assert text in SECTION, text
    for report_type in REPORT_TYPES:
        assert f"`{report_type}`" in SECTION
    for hint in VERIFICATION_HINTS:
        assert hint in SECTION
