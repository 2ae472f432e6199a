"""Intelligence report envelopes and their hashes (reference facts §6–7).

A report is a JSON object that starts with its version member (for example
`decision_anomaly_report_version: "decision_anomaly_report_v1"`) and ends with its hash member;
the hash is the bare sha256 of the canonical JSON (`gate.protocol.canonical`) of the report without that
member. The packet builder uses the same rule (`gate.packets.common.report_hash`), so a hash an
endpoint published stays valid inside a packet. Every producer of a report (the API, the CLI,
packet intelligence, decide-time confidence) seals it here, and every checker verifies it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gate.protocol.canonical import sha256_hex


@dataclass(frozen=True)
class Envelope:
    """A report's envelope: its version member and version first, its hash member last. (The
    report kinds the shells serve are `gate.reports.registry.ReportKind`, each sealed in one.)"""

    kind: str             # the packet's report_type
    version_member: str
    version: str
    hash_member: str


KINDS: dict[str, Envelope] = {
    k.kind: k
    for k in (
        Envelope("effectiveness", "decision_effectiveness_report_version", "decision_effectiveness_report_v1",
                   "effectiveness_hash"),
        Envelope("anomaly", "decision_anomaly_report_version", "decision_anomaly_report_v1", "anomaly_hash"),
        Envelope("benchmark", "decision_benchmark_version", "decision_benchmark_v1", "benchmark_hash"),
        Envelope("confidence", "decision_confidence_version", "decision_confidence_v1", "confidence_hash"),
    )
}


def spec_of(kind: str | Envelope) -> Envelope:
    """A kind's envelope: one of `KINDS` by name, or a report's own (a report kind the
    workbench's registry adds beside these, which no packet embeds)."""
    return kind if isinstance(kind, Envelope) else KINDS[kind]


def report_hash(kind: str | Envelope, report: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of `report` without its hash member."""
    member = spec_of(kind).hash_member
    return sha256_hex({k: v for k, v in report.items() if k != member})


def seal(kind: str | Envelope, body: Mapping[str, Any]) -> dict[str, Any]:
    """The report: version member first, then `body`, then the hash member over both."""
    spec = spec_of(kind)
    report: dict[str, Any] = {spec.version_member: spec.version}
    report.update((k, v) for k, v in body.items() if k not in (spec.version_member, spec.hash_member))
    report[spec.hash_member] = report_hash(kind, report)
    return report


def verify(kind: str | Envelope, report: Mapping[str, Any]) -> bool:
    """True when the report carries its version label and a hash that matches its content."""
    spec = spec_of(kind)
    return (
        isinstance(report, Mapping)
        and report.get(spec.version_member) == spec.version
        and report.get(spec.hash_member) == report_hash(kind, report)
    )


__all__ = ["KINDS", "Envelope", "report_hash", "seal", "spec_of", "verify"]
