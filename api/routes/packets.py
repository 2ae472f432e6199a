"""Decision Packets: export (keyed) and verification (public).

An export is charged to the key's cost window before its work (`api.costs`): one unit,
four per full 16 KiB of the stored request, one per started 10 of the three `*_limit`
receipts and links, and 20 for the embedded policy intelligence (unless `include_intelligence`
is false).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from flask import Response, request

from api import openapi_params as P
from api.costs import LINKS_PER_UNIT, PACKET_INTELLIGENCE_UNITS, Weight, charged, units
from api.errors import json_response
from api.public_limits import verification_body
from api.query import int_arg
from api.routing import AUTH_ERRORS, BODY_ERRORS, MEDIA, Endpoint, Routes
from api.runtime import keyed
from gate import bodies
from gate import vocabulary as C
from gate.chain.event_witness import hold_chain_id
from gate.clock import iso_ms
from gate.errors import GateError
from gate.keys.config import LiveSigning, SigningSetup
from gate.ledger import Ledger
from gate.packets import (
    ChainExcerpt,
    ConsistencyFrom,
    PacketOptions,
    PacketSourceError,
    build_packet,
    packet_sources,
    verify_packet,
)
from gate.services.analytics import Analytics
from gate.services.chains import AuditChainService, packet_chain_excerpt
from gate.services.decide import Caller, DecisionService
from gate.services.holds import HoldService
from gate.services.lifecycle import KINDS, LifecycleService
from gate.settings import Settings
from gate.strict_json import JsonValue

routes = Routes("packets", __name__)

PACKET_VERIFY_DESCRIPTION = {
    "ok": True,
    "endpoint": "/api/decision/packet/verify",
    "method": "POST",
    "auth": "public",
    "request": {"packet": "an exported decision_packet_v1", "input": "optional original request body"},
    "steps": [
        "packet_hash over the canonical packet without packet_hash",
        "the embedded record's hashes, bundle hash and signatures",
        ("execution, outcome and CRM sync hashes against the record's ids, hashes and action binding; a held "
         "decision's hold events: hashes, binding, order, closing rules and signatures"),
        ("intelligence report hashes; retained audit-chain links, the RFC 6962 inclusion proof and "
         "the signed checkpoint"),
    ],
    "trust": "signatures are checked only with this gate's keys; a key inside the packet is never trusted",
    "algorithm_document": "docs/verification.md",
}


def _options() -> PacketOptions:
    """The export options (a bad query is a 400, before the charge)."""
    return PacketOptions.from_query(
        {name: values[0] if len(values) == 1 else values for name, values in request.args.lists()})


def _packet_query_units() -> int:
    options = _options()
    rows = options.execution_limit + options.outcome_limit + options.chain_limit
    return units(rows, LINKS_PER_UNIT) + (PACKET_INTELLIGENCE_UNITS if options.include_intelligence else 0)


PACKET_WEIGHT = Weight(stored=4, query=_packet_query_units)


def _consistency_from(audit: AuditChainService, chain: ChainExcerpt | None, first: int | None) -> ConsistencyFrom | None:
    """`{first, first_root, proof}` from the stored nodes, for `consistency_from=<first>`: the
    proof that the tree a witness holds (of `first` leaves) is a prefix of the exported one."""
    if first is None or chain is None:
        return None
    if first > chain.chain_size:
        raise GateError("REQUEST_INVALID", f"consistency_from must be between 1 and {chain.chain_size}",
                        errors=[{"field": "consistency_from", "code": "out_of_range",
                                 "message": f"1 to {chain.chain_size}"}])
    return {"first": first, "first_root": audit.tree_root(chain.chain_id, first),
            "proof": audit.consistency_proof(chain.chain_id, first, chain.chain_size)}


def _receipts_under_head(
    lifecycle: LifecycleService, decision_id: str, options: PacketOptions,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, int], dict[str, Any] | None]:
    """The newest receipts of each kind, their stored totals and the signed receipt head they
    were read under, all read in one snapshot of the ledger: the head's count describes the lists
    exported beside it, whatever receipt a concurrent request writes meanwhile."""
    store = lifecycle.store
    with store.ledger.one_snapshot():
        head = store.receipt_head(decision_id)
        parts: dict[str, list[dict[str, Any]]] = {}
        totals: dict[str, int] = {}
        for name, kind in KINDS.items():
            limit = options.limit_for(kind.list_name)
            parts[name], totals[kind.list_name] = lifecycle.all_for(kind, decision_id, limit)
    return parts, totals, head


@routes.route(Endpoint(
    "get", "/api/decision/{decision_id}/packet",
    "Export a portable decision_packet_v1: the record, receipts, outcomes, CRM syncs, a held decision's signed "
    "hold events and the audit-chain excerpt with its inclusion proof and signed checkpoint. Never partial: 503 "
    "when a source cannot be read.",
    True, {200: "packet", 400: "bad query", 401: "missing or invalid key", 403: "disabled key",
           404: "not in scope", 409: "the stored chain head contradicts its links or nodes",
           503: "a packet source cannot be read, or its intelligence asked of a gate composed without report "
                "engines"},
    errors=AUTH_ERRORS + ("REQUEST_INVALID", "DECISION_NOT_FOUND", "PACKET_SOURCE_UNAVAILABLE",
                          "CHAIN_INTEGRITY_FAILED", "REPORTS_UNAVAILABLE"),
    query=(("include_input", "boolean", "default false"), ("include_chain", "boolean", "default true"),
           ("include_intelligence", "boolean", "default true"),
           *[(name, "integer", "1-1000, default 20", P.packet_limit("1-1000, default 20"))
             for name in ("execution_limit", "outcome_limit", "chain_limit")],
           ("consistency_from", "integer", ("optional, 1 … chain size: add chain_consistency, the proof that "
                                            "the tree of that size (a witness's checkpoint) is a prefix of the "
                                            "exported one"), P.integer(1, P.INT_ARG_MAX))),
    response_headers=("x-decision-packet-version", "x-decision-packet-hash"), tags=("packets",), charged=True,
))
@keyed("SVC_API_UNAUTHORIZED")
@charged(PACKET_WEIGHT)
def export_packet(caller: Caller, decision_id: str, *, service: DecisionService, lifecycle: LifecycleService,
                  audit: AuditChainService, holds: HoldService, analytics: Analytics, ledger: Ledger) -> Response:
    options = _options()
    consistency_from = int_arg("consistency_from")
    if consistency_from is not None and not options.include_chain:
        raise GateError("REQUEST_INVALID", "consistency_from needs include_chain",
                        errors=[{"field": "consistency_from", "code": "invalid_value",
                                 "message": "only with the audit chain"}])
    stored = service.bound_decision(caller, decision_id)
    if stored is None:
        raise GateError("DECISION_NOT_FOUND", "no decision with this id in your scope")
    with packet_sources():  # SECURITY: spec — never return partial proof material
        parts, totals, receipt_head = _receipts_under_head(lifecycle, decision_id, options)
        if receipt_head is None and any(totals.values()):  # stored receipts, but no head
            raise PacketSourceError("the decision's receipt chain head is missing but receipts are stored")
        chain = packet_chain_excerpt(audit, decision_id, options.chain_limit) if options.include_chain else None
        if options.include_chain and chain is None:
            raise PacketSourceError("the decision's audit chain link cannot be read")
        consistency = _consistency_from(audit, chain, consistency_from)
        record = json.loads(stored.record_json)
        # A held decision's signed hold events (issue 43), oldest first (none: no member), and its
        # signed hold commitment (issue 52), read from a hold chain that extends its witnessed checkpoint.
        hold_events, hold_commitment = holds.packet_part(caller.scope, record)
        intelligence = None
        if options.include_intelligence and isinstance(record.get("policy_id"), str):
            # The policy reports of the caller's scope, by the report endpoints' engines (none
            # composed: 503 REPORTS_UNAVAILABLE; include_intelligence=false exports without them).
            intelligence = analytics.packet_intelligence(ledger, caller.scope, record)
        packet = build_packet(
            record=record,
            exported_at=iso_ms(service.clock.now()),
            options=options,
            original_input=json.loads(stored.request_json) if options.include_input else None,
            executions=parts["execution"],
            outcomes=parts["outcome"],
            crm_syncs=parts["crm_sync"],
            totals=totals,
            chain=chain,
            policy_intelligence=intelligence,
            receipt_head=receipt_head,
            consistency=consistency,
            hold_events=hold_events,
            hold_commitment=hold_commitment,
        )
    headers = {"x-decision-packet-version": C.DECISION_PACKET_VERSION, "x-decision-packet-hash": packet["packet_hash"]}
    return json_response(200, packet, headers)


def _held_hold_checkpoint(holds: HoldService, packet: dict[str, JsonValue]) -> list[Mapping[str, JsonValue]]:
    """The newest checkpoint the gate's own log holds of the packet's hold chain (named by its
    hold commitment), for the `hold_checkpoint_log` check: [] when none is held or the packet
    names none; 503 when the log cannot be read."""
    commitment = packet.get("hold_commitment")
    scope = commitment.get("scope_hash") if isinstance(commitment, dict) else None
    if not isinstance(scope, str):
        return []
    held = holds.witness.held_for_proof(hold_chain_id(scope))
    return [held] if held is not None else []


@routes.route(Endpoint("get", "/api/decision/packet/verify", "Describe packet verification.", False,
                       {200: "endpoint metadata"}, tags=("verification",), budget="public"))
def describe_packet_verify() -> Response:
    return json_response(200, PACKET_VERIFY_DESCRIPTION)


@routes.route(Endpoint(
    "post", "/api/decision/packet/verify",
    "Verify an exported packet `{packet, input?}`: packet hash, embedded record, receipt links, hold events, "
    "report hashes, chain links, inclusion proof and checkpoint signature. A key inside the packet is never "
    "trusted.",
    False, {200: "verification result", 400: "malformed body", 413: "body too large", 415: MEDIA},
    errors=BODY_ERRORS, request_body="PacketVerificationRequest", tags=("verification",), budget="verify",
))
def verify_exported_packet(*, settings: Settings, signing: SigningSetup | LiveSigning, holds: HoldService) -> Response:
    with verification_body(settings.max_packet_bytes) as parsed:  # issue 18: 413, 503 when busy, then parsed
        # gate/bodies/packet-verification.schema.json alone (SECURITY: `input: null` is refused, not ignored).
        body = bodies.checked("packet-verification", parsed, "REQUEST_INVALID")
        result = verify_packet(body["packet"], anchors=signing.trust_anchors(), original_input=body.get("input"),
                               hold_checkpoints=_held_hold_checkpoint(holds, body["packet"]))
    return json_response(200, {"ok": True, **result.to_dict()})
