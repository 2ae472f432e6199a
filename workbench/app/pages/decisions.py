"""Decisions page: filters, a paged table, and one decision's record, receipts, proof and
verification."""

from __future__ import annotations

import json
from typing import Any

import panel as pn
import param

from workbench.app.pages.common import note
from workbench.app.state.decisions import DecisionsState
from workbench.reports.textsafe import md_cell, md_text

# What each verification check establishes, in plain words (docs/verification.md names them all).
CHECK_TEXT = {
    "record_members": "the record has every member its version requires",
    "record_hash": "the record's hash matches its content",
    "receipt_hash": "the receipt hash matches the record",
    "input_hash": "the input hash matches the request",
    "output_hash": "the output hash matches the verdict",
    "compact_verdict": "the compact verdict agrees with the full one",
    "integrity_block": "the integrity block mirrors the record's hashes and signature",
    "urls": "the verify and replay URLs name this decision",
    "policy_consistency": "the policy named agrees with the rulebook bound and its hash",
    "policy_bundle_hash": "the policy bundle hash matches the bundle",
    "receipt_signature": "the gate's signature over the receipt is valid",
    "receipt_public_key_fingerprint": "the signing key is the registered one",
    "audit_chain": "the record is linked into the audit chain",
    "audit_chain_signature": "the audit chain link is signed",
    "rulebook_attestation_signature": "the rulebook attestation is signed",
    "registry_attestation_signature": "the rulebook registry attestation is signed",
    "ledger_record_hash": "the ledger stores this exact record",
    "ledger_receipt_hash": "the ledger stores this exact receipt hash",
    "ledger_input_hash": "the ledger stores this exact request",
    "chain_link": "the ledger holds the chain link",
    "chain_link_matches_record": "the chain link names this record",
    "chain_head": "the chain's head names its newest link and the Merkle tree's root",
    "ledger_columns": "the ledger's columns that copy the record equal it",
    "ledger_row_hash": "the ledger row's hash is intact",
    "ledger_row_signature": "the ledger row's signature is valid",
    "rulebook_snapshot": "the stored rulebook still hashes to the one the record names",
    "lifecycle_receipts": "each stored execution, outcome and CRM receipt verifies",
    "receipt_chain": "the receipts form an unbroken chain",
    "rulebook_attestation_bundle_hash": "the rulebook attestation names the policy bundle",
    "rulebook_attestation_consistency": "the rulebook attestation agrees with the record",
    "rulebook_attestation_input_hash": "the rulebook attestation names this input",
    "rulebook_registry_consistency": "the rulebook registry entry agrees with the rulebook",
    "registry_attestation_hash": "the registry attestation's hash matches it",
    "confidence_hash": "the decision confidence block's hash matches it",
    "confidence_signature": "the decision confidence block is signed",
    "trusted_adapter_lineage": "the trusted adapter's facts are bound to the record",
    "signature_matches_untrusted_key": "diagnostic: the signature checked with the request's untrusted key",
    "rulebook_attestation_signature_matches_untrusted_key": "diagnostic: the attestation checked with an untrusted key",
    "ledger_decision_id": "the ledger row is this decision's",
    "ledger_scope": "the ledger row is in the record's scope",
    "ledger_chain_position": "the ledger row's chain position is the link's",
}
MARKS = {True: "✓ pass", False: "✗ FAIL", None: "· not applicable"}  # glyphs every font has
DECISION_FIELDS = ("decision_id", "created_at", "policy_id", "policy_version", "verdict", "application_verdict",
                   "reason_code", "matched_rule_id", "action", "status")


def _verification_markdown(detail: dict[str, Any] | None) -> str:
    """The fresh verification as a checklist: each named check, pass / FAIL / not applicable,
    and what it establishes (check names come from the verifier; still shown as text)."""
    if not detail:
        return "*Open a decision to verify it.*"
    result = detail.get("verification") or {}
    verdict = "verified" if result.get("verified") else "NOT verified"
    failed = result.get("failed_checks") or []
    lines = [f"**{verdict}** (recomputed now from the ledger)"]
    if failed:
        lines.append("Failed checks: " + ", ".join(md_text(name) for name in failed))
    checks = result.get("checks") or {}
    order = sorted(checks, key=lambda name: (checks[name] is not False, checks[name] is None))
    items = [f"- {MARKS.get(checks[name], md_text(checks[name]))} · **{md_text(name)}**"
             + (f" · {md_text(CHECK_TEXT[name])}" if name in CHECK_TEXT else "") for name in order]
    return "\n\n".join(lines) + ("\n\n" + "\n".join(items) if items else "")


def _facts_markdown(detail: dict[str, Any] | None) -> str:
    """The decision's facts as a table: its record's key fields, then every fact the rulebook
    evaluated (names and values are caller text: table cells of text)."""
    if not detail:
        return ""
    record = detail.get("record") or {}
    rows = [(name, record.get(name)) for name in DECISION_FIELDS if record.get(name) is not None]
    rows += [(f"fact · {name}", value) for name, value in sorted((detail.get("facts") or {}).items())]
    cells = [f"| {md_cell(name)} | {md_cell(value if isinstance(value, str) else json.dumps(value))} |"
             for name, value in rows]
    return "\n".join(["### Decision facts", "", "| field | value |", "|---|---|", *cells])


def _filters(state: DecisionsState, policies: list[str]) -> pn.Row:
    return pn.Row(
        pn.widgets.Select.from_param(state.param.policy_id, name="Policy", options=[""] + policies),
        pn.widgets.Select.from_param(state.param.verdict, name="Verdict"),
        pn.widgets.TextInput.from_param(state.param.rule, name="Matched rule"),
        pn.widgets.TextInput.from_param(state.param.search, name="Decision id starts with"),
    )


def _decision_table(state: DecisionsState) -> pn.widgets.Tabulator:
    """The current page of decisions, kept in step with the view-model; a picked row opens."""
    table = pn.widgets.Tabulator(state.rows.to_pandas() if state.rows is not None else None,
                                 selectable=1, disabled=True, show_index=False, height=420,
                                 sizing_mode="stretch_width", name="decisions")

    def rows_changed(event: param.parameterized.Event) -> None:
        table.value = event.new.to_pandas() if event.new is not None else None

    state.param.watch(rows_changed, "rows")

    def picked(event: param.parameterized.Event) -> None:
        if event.new and table.value is not None:
            state.open(str(table.value.iloc[event.new[0]]["decision_id"]))

    table.param.watch(picked, "selection")
    return table


def _paging_and_open(state: DecisionsState) -> pn.Row:
    """Previous and next page, and a decision opened by its id."""
    previous = pn.widgets.Button(name="◀ Previous")
    following = pn.widgets.Button(name="Next ▶")
    previous.on_click(lambda _: state.previous_page())
    following.on_click(lambda _: state.next_page())
    open_id = pn.widgets.TextInput(name="Open decision id", placeholder="dec_…")
    open_button = pn.widgets.Button(name="Open", button_type="primary")
    open_button.on_click(lambda _: state.open(open_id.value or ""))
    return pn.Row(previous, following, open_id, open_button, align="end")


def _detail_tabs(detail: dict[str, Any] | None) -> pn.viewable.Viewable:
    """The open decision's record, receipts, inclusion proof and verification, one tab each."""
    if not detail:
        return pn.pane.Markdown("*Select a row or enter a decision id.*")
    receipts = detail["receipts"]
    return pn.Tabs(
        ("Record", pn.pane.JSON(detail["record"], depth=1, sizing_mode="stretch_width")),
        (f"Executions ({receipts['execution']['total']})",
         pn.pane.JSON(receipts["execution"]["items"], depth=2)),
        (f"Outcomes ({receipts['outcome']['total']})", pn.pane.JSON(receipts["outcome"]["items"], depth=2)),
        (f"CRM syncs ({receipts['crm_sync']['total']})", pn.pane.JSON(receipts["crm_sync"]["items"], depth=2)),
        ("Inclusion proof", pn.pane.JSON(detail["inclusion"], depth=2)),
        ("Verification", pn.pane.JSON(detail["verification"], depth=1)),
        dynamic=False,
    )


def decisions_page(state: DecisionsState, policies: list[str]) -> pn.viewable.Viewable:
    return pn.Column(
        _filters(state, policies),
        note(state.param.message),
        _decision_table(state),
        _paging_and_open(state),
        pn.Row(
            pn.pane.Markdown(pn.bind(_facts_markdown, state.param.detail), css_classes=["decision-facts"],
                             width=620),
            pn.pane.Markdown(pn.bind(_verification_markdown, state.param.detail), css_classes=["verification"],
                             sizing_mode="stretch_width"),
        ),
        pn.bind(_detail_tabs, state.param.detail),
        name="Decisions",
    )
