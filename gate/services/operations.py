"""The operational use cases behind `api/routes/operations.py` (docs/operations.md).

* `PilotService`: pilot intake, stored once per idempotency key, and its confirmation; the CSV
  export of intakes (spreadsheet-safe cells).
* `ProofMetricsService`: aggregate counts over the whole ledger (no scope names, no identifiers).
* `PolicyAlertService`: alerts from the anomaly engine over a scope's recent policies, and from
  vendor policy table rows verified longer ago than the configured age.
* `token_matches`: the constant-time comparison of a presented token with a configured one
  (the metrics token here, the workflow token in `gate.services.workflows`).

The HTTP shell parses the request and shapes the answer; these raise `GateError` for refusals.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, NotRequired, TypedDict

from gate.bodies import problems
from gate.clock import Clock, iso_ms
from gate.errors import GateError
from gate.ledger import Ledger
from gate.ledger.operations import PilotStore, proof_counts, recent_policy_ids
from gate.policychecks.tables import VendorRow, load_tables
from gate.protocol.canonical import sha256_hex
from gate.strict_json import JsonValue

# The two bodies of POST /api/pilot, each checked by its schema alone (gate/bodies/pilot.schema.json).
PILOT_SUBMISSION, PILOT_CONFIRMATION = "pilot#submission", "pilot#confirmation"
PILOT_TEXT = ("company", "contact_name", "contact_email", "use_case")  # required, read stripped
_KEY = re.compile(r"^[\x21-\x7e]{1,300}$")
_PILOT_ID = re.compile(r"^pilot_[0-9a-f]{24}$")
EXPORT_COLUMNS = ("pilot_id", "created_at", "status", "confirmed_at", "company", "contact_name", "contact_email",
                  "use_case", "monthly_decisions", "notes")
MAX_ALERT_POLICIES = 10
CONFIRMATION_HINT = "POST /api/pilot with {pilot_id, confirmation_token} to confirm; the token is shown once"


class PilotIntake(TypedDict):
    """A pilot intake's values once checked (`validate_submission`): its text stripped."""

    company: str
    contact_name: str
    contact_email: str
    use_case: str
    notes: str
    monthly_decisions: int


class PilotAnswer(TypedDict):
    """What a submission or confirmation answers about the stored intake."""

    ok: bool
    pilot_id: str
    status: str
    created_at: str
    use_case: str
    confirmed_at: NotRequired[str]


class PilotCreated(PilotAnswer):
    """A new submission's answer: the intake and its one-time confirmation token."""

    confirmation_token: str
    confirmation: str


class PilotReplayed(PilotAnswer):
    """A submission sent again: the intake, its token not shown again (`confirmation_token_shown` false)."""

    confirmation_token_shown: bool


class AnomalyAlert(TypedDict):
    """An alert of the anomaly engine over one policy's recent decisions."""

    alert_id: str
    source: str
    kind: str
    severity: str
    policy_id: str
    anomaly_id: str
    anomaly_score: float
    reasons: list[str]
    decision_ids: list[str]
    anomaly_hash: str


class SourceAlert(TypedDict):
    """An alert for a vendor policy table row verified longer ago than the allowed age."""

    alert_id: str
    source: str
    kind: str
    severity: str
    service: str
    vendor: str
    region: str
    plan: str
    last_verified: str
    age_days: int
    reasons: list[str]
    source_url: str
    source_hash: str


class GuardrailAlert(TypedDict):
    """An alert for a canary its guardrail halted (`ReleaseGuardrails.guardrail_alerts`)."""

    alert_id: str
    source: str
    kind: str
    severity: str
    policy_id: str
    canary_version: object
    guardrails: object
    release_seq: int
    event_hash: str
    halted_at: str
    trigger: object
    reasons: list[str]


PolicyAlert = AnomalyAlert | SourceAlert | GuardrailAlert


class AnomalyReportSummary(TypedDict):
    policy_id: str
    anomaly_hash: str
    anomaly_count: int
    recommendation: str


class VendorTablesChecked(TypedDict):
    rows: int
    max_age_days: int
    table_versions: dict[str, str]


class AlertsChecked(TypedDict):
    anomaly_reports: list[AnomalyReportSummary]
    vendor_tables: VendorTablesChecked


class PolicyAlerts(TypedDict):
    """`/api/policy-alerts`: the alerts and what was checked to find them."""

    ok: bool
    policy_alerts_version: str
    generated_at: str
    count: int
    alerts: list[PolicyAlert]
    checked: AlertsChecked


def problem(field: str, code: str, message: str) -> dict[str, str]:
    return {"field": field, "code": code, "message": message}


def token_matches(given: str | None, configured: str) -> bool:
    """SECURITY: constant time over fixed-length digests (no early exit on the first wrong byte)."""
    if given is None:
        return False
    return hmac.compare_digest(hashlib.sha256(given.strip().encode("utf-8", "replace")).digest(),
                               hashlib.sha256(configured.encode("utf-8")).digest())


# --------------------------------------------------------------------------- pilot intake


def _checked(name: str, body: JsonValue, what: str) -> dict[str, JsonValue]:
    """`body` once its schema `name` finds no problem, else `REQUEST_INVALID` naming every problem
    (`gate.bodies.problems`: the unknown members first, then the schema's order), the first in
    the message."""
    errors = problems(name, body)
    if errors or not isinstance(body, dict):
        first = errors[0] if errors else {"field": "body", "message": "a JSON object"}
        raise GateError("REQUEST_INVALID", f"invalid pilot {what}: {first['field']} {first['message']}",
                        errors=errors)
    return body


def validate_submission(body: JsonValue) -> PilotIntake:
    """The intake's values (its text stripped, `notes` "" when absent), or `REQUEST_INVALID`
    naming every problem its schema finds (`PILOT_SUBMISSION`)."""
    checked = _checked(PILOT_SUBMISSION, body, "intake")
    text = {name: str(checked[name]).strip() for name in PILOT_TEXT}
    count = checked["monthly_decisions"]
    if not isinstance(count, int | float):  # pragma: no cover - its schema takes whole numbers only
        raise TypeError("pilot#submission passed a monthly_decisions that is not a number")
    return {"company": text["company"], "contact_name": text["contact_name"], "contact_email": text["contact_email"],
            "use_case": text["use_case"], "notes": str(checked.get("notes", "")).strip(),
            "monthly_decisions": int(count)}  # 7.0 is 7, as its schema reads a whole number


def pilot_idempotency_key(given: str | None, values: PilotIntake) -> str:
    """The `Idempotency-Key` header when given (1 to 300 visible ASCII characters), else a hash
    of the e-mail address and company."""
    if given is not None:
        given = given.strip()
        if not _KEY.fullmatch(given):
            raise GateError("REQUEST_INVALID", "Idempotency-Key must be 1 to 300 visible ASCII characters",
                            errors=[problem("Idempotency-Key", "invalid_value", "1 to 300 visible ASCII characters")])
        return given
    return "pilot:" + sha256_hex({"contact_email": values["contact_email"].lower(),
                                  "company": values["company"].casefold()})


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def pilot_answer(row: Mapping[str, Any]) -> PilotAnswer:
    answer: PilotAnswer = {"ok": True, "pilot_id": row["pilot_id"], "status": row["status"], "created_at": row["created_at"],
              "use_case": row["use_case"]}
    if row.get("confirmed_at"):
        answer["confirmed_at"] = row["confirmed_at"]
    return answer


@dataclass(frozen=True, slots=True)
class PilotOutcome:
    """The answer to a submission: `created` (with the one-time token) or `replayed`."""

    status: str
    answer: PilotCreated | PilotReplayed


class PilotService:
    def __init__(self, ledger: Ledger, clock: Clock) -> None:
        self.store = PilotStore(ledger)
        self.clock = clock

    def submit(self, body: JsonValue, idempotency_header: str | None) -> PilotOutcome:
        """Store the intake once per key; the same body again is `replayed`, another body under the
        key is 409 `PILOT_IDEMPOTENCY_CONFLICT`."""
        values = validate_submission(body)
        key = pilot_idempotency_key(idempotency_header, values)
        input_hash = sha256_hex(values | {"consent": True})
        token = "pct_" + secrets.token_urlsafe(24)
        row = {"pilot_id": "pilot_" + secrets.token_hex(12), "idempotency_key": key, "input_hash": input_hash,
               **values, "status": "submitted", "token_hash": token_hash(token),
               "created_at": iso_ms(self.clock.now()), "confirmed_at": None}
        existing = self.store.store_or_existing(row)
        if existing is None:
            return PilotOutcome("created", {**pilot_answer(row), "confirmation_token": token,
                                            "confirmation": CONFIRMATION_HINT})
        if existing["input_hash"] != input_hash:
            raise GateError("PILOT_IDEMPOTENCY_CONFLICT", "this idempotency key already holds a different pilot "
                            "intake; send another Idempotency-Key", idempotency_key=key)
        return PilotOutcome("replayed", {**pilot_answer(existing), "confirmation_token_shown": False})

    def confirm(self, body: JsonValue) -> PilotAnswer:
        """`{pilot_id, confirmation_token}` (`PILOT_CONFIRMATION`) → the confirmed intake
        (idempotent); an unknown id and a wrong token are both 404 `PILOT_NOT_FOUND`."""
        checked = _checked(PILOT_CONFIRMATION, body, "confirmation")
        pilot_id, token = str(checked["pilot_id"]), str(checked["confirmation_token"])
        row = self.store.by_id(pilot_id) if _PILOT_ID.fullmatch(pilot_id) else None
        # SECURITY: constant-time comparison of digests; an unknown id and a wrong token read alike.
        expected = row["token_hash"] if row is not None else "0" * 64
        if not hmac.compare_digest(token_hash(token), expected) or row is None:
            raise GateError("PILOT_NOT_FOUND", "no pilot intake matches this id and confirmation token")
        confirmed = self.store.confirm(pilot_id, iso_ms(self.clock.now()))
        if confirmed is None:  # pragma: no cover - the row was read above; intakes are never deleted
            raise GateError("PILOT_NOT_FOUND", "no pilot intake matches this id and confirmation token")
        return pilot_answer(confirmed)

    def export_csv(self, limit: int) -> str:
        """The `limit` oldest intakes as CSV, every field quoted, every cell spreadsheet-safe."""
        out = io.StringIO()
        # Every field quoted, so a reader splitting at , keeps each field whole whatever it holds.
        writer = csv.writer(out, lineterminator="\r\n", quoting=csv.QUOTE_ALL)
        writer.writerow(EXPORT_COLUMNS)
        for row in self.store.export(limit):
            writer.writerow([csv_cell(row[name]) for name in EXPORT_COLUMNS])
        return out.getvalue()


# SECURITY: spreadsheet formula injection. A spreadsheet may split a line at any of , ; tab |
# (whichever its locale or import dialog picks) or at a line break, and may skip spaces and
# quotes before a cell's first character; a cell that then starts with = + - @ (or their
# full-width forms) is a formula. So a single quote goes in front of the field when it starts
# that way (or with tab, CR or LF, per OWASP), and after every separator inside it that such a
# character follows: whatever the separator, no cell cut out of the field starts a formula.
_FORMULA = r"[\s\"']*[=+\-@\uff1d\uff0b\uff0d\uff20]"
_FORMULA_AT_START = re.compile(_FORMULA + r"|[\t\r\n]")
_FORMULA_AFTER_SEPARATOR = re.compile(r"([,;\t|\r\n])(?=" + _FORMULA + ")")


def csv_cell(value: Any) -> str:
    """`value` as a spreadsheet-safe CSV cell (docs/operations.md, "Pilot intake")."""
    text = "" if value is None else str(value)
    text = ("'" if _FORMULA_AT_START.match(text) else "") + text
    return _FORMULA_AFTER_SEPARATOR.sub(r"\1'", text)


# --------------------------------------------------------------------------- proof metrics


class ProofMetricsService:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def counts(self) -> dict[str, JsonValue]:
        """Decisions by authority and verdict, receipts by kind, chains, workflow runs, pilots."""
        return proof_counts(self.ledger)


# --------------------------------------------------------------------------- policy alerts

# The anomaly report of one policy in one scope, read from the ledger (the shell supplies the
# report engine: the core imports no Polars).
AnomalySource = Callable[[Ledger, str, str], Mapping[str, Any]]


def anomaly_alerts(policy_id: str, report: Mapping[str, Any]) -> list[AnomalyAlert]:
    return [{"alert_id": "anomaly:" + sha256_hex([policy_id, anomaly["anomaly_id"]])[:24],
             "source": "anomaly_engine", "kind": anomaly["kind"], "severity": anomaly["severity"],
             "policy_id": policy_id, "anomaly_id": anomaly["anomaly_id"],
             "anomaly_score": anomaly["anomaly_score"], "reasons": anomaly["reasons"],
             "decision_ids": anomaly["decision_ids"], "anomaly_hash": report["anomaly_hash"]}
            for anomaly in report["anomalies"]]


def stale_source_alert(service: str, row: VendorRow, today: date, max_age: int) -> SourceAlert:
    age = (today - row.last_verified).days
    return {"alert_id": "source:" + row.source_hash[:24], "source": "vendor_policy_table",
            "kind": "policy_source_stale", "severity": "high" if age > 2 * max_age else "medium",
            "service": service, "vendor": row.vendor, "region": row.region, "plan": row.plan,
            "last_verified": row.last_verified.isoformat(), "age_days": age,
            "reasons": [(f"{service} terms of {row.vendor} ({row.region}, {row.plan}) were last "
                         f"verified {age} days ago, beyond the {max_age}-day limit; re-verify "
                         f"{row.source_url}")],
            "source_url": row.source_url, "source_hash": row.source_hash}


class PolicyAlertService:
    def __init__(self, ledger: Ledger, clock: Clock, anomalies: AnomalySource, *, max_age_days: int,
                 release_alerts: Callable[[str], list[GuardrailAlert]] | None = None) -> None:
        self.ledger = ledger
        self.clock = clock
        self.anomalies = anomalies
        self.max_age_days = max_age_days
        self.release_alerts = release_alerts  # canary guardrail halts (gate.services.releases)

    def alerts(self, scope: str, wanted: str | None) -> PolicyAlerts:
        """The alerts of the named policy, else of the scope's MAX_ALERT_POLICIES most recent ones,
        and of every stale vendor policy table row."""
        policies = [wanted] if wanted is not None else recent_policy_ids(self.ledger, scope, MAX_ALERT_POLICIES)
        alerts: list[PolicyAlert] = []
        reports: list[AnomalyReportSummary] = []
        for policy_id in policies:
            report = self.anomalies(self.ledger, scope, policy_id)
            reports.append({"policy_id": policy_id, "anomaly_hash": report["anomaly_hash"],
                            "anomaly_count": report["anomaly_count"], "recommendation": report["recommendation"]})
            alerts.extend(anomaly_alerts(policy_id, report))
        if self.release_alerts is not None:
            alerts.extend(a for a in self.release_alerts(scope) if wanted is None or a["policy_id"] == wanted)
        now = self.clock.now()
        source_alerts, rows_checked = self._stale_sources(now)
        alerts.extend(source_alerts)
        return {"ok": True, "policy_alerts_version": "decision_policy_alerts_v1", "generated_at": iso_ms(now),
                "count": len(alerts), "alerts": alerts,
                "checked": {"anomaly_reports": reports,
                            "vendor_tables": {"rows": rows_checked, "max_age_days": self.max_age_days,
                                              "table_versions": {s: t.policy_version() for s, t in
                                                                 sorted(load_tables().items())}}}}

    def _stale_sources(self, now: datetime) -> tuple[list[SourceAlert], int]:
        """Alerts for vendor table rows last verified before the allowed age, and rows checked."""
        oldest_allowed = (now - timedelta(days=self.max_age_days)).date()
        alerts: list[SourceAlert] = []
        rows_checked = 0
        for service, table in sorted(load_tables().items()):
            for row in table.rows:
                rows_checked += 1
                if row.last_verified < oldest_allowed:
                    alerts.append(stale_source_alert(service, row, now.date(), self.max_age_days))
        return alerts, rows_checked


__all__ = [
    "EXPORT_COLUMNS",
    "MAX_ALERT_POLICIES",
    "PILOT_CONFIRMATION",
    "PILOT_SUBMISSION",
    "AnomalySource",
    "PilotOutcome",
    "PilotService",
    "PolicyAlertService",
    "ProofMetricsService",
    "csv_cell",
    "problem",
    "token_matches",
    "validate_submission",
]
