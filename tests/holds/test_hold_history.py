"""`verify_hold_history`, pure (gate/holds/history.py): a scope's whole hold chain verifies offline,
and an edited, deleted, reordered, inserted or re-signed event, a policy that does not parse, a
closing that breaks the rules, or newest events cut off under the signed head is named."""

from __future__ import annotations

import copy

import pytest

from gate.chain.links import scope_hash
from gate.chain.sealing import UNSIGNED, seal
from gate.holds.events import Step, build_event, hold_events_problems
from gate.holds.history import HoldHistoryCheck, verify_hold_history
from gate.keys.signing import Ed25519ReceiptSigner, HmacKey, HmacReceiptSigner
from gate.principals import Principal
from gate.verify import TrustAnchors
from tests.holds.chain_support import AS_OF, KEY, OTHER, RECORDS, SCOPE, anchors, chain, history, of_decision

ANCHORS = anchors()
OTHER_ENTRY = {"key_id": OTHER.key_id, "algorithm": "ed25519", "public_key": OTHER.public_key_pem,
               "public_key_fingerprint": OTHER.fingerprint, "status": "active", "not_before": "2026-01-01T00:00:00.000Z"}


def _problems(document, trust=ANCHORS) -> list[str]:
    """The problems of a document that fails, its result held exactly: not valid, whether keys
    were used, and how many events it holds (none when the document itself is malformed)."""
    check = verify_hold_history(document, trust)
    events = document.get("events") if isinstance(document, dict) else None
    counted = len(events) if isinstance(events, list) and check.problems[0].startswith(("event ", "decision ", "head")) else 0
    keyed = trust is not None and not trust.empty
    assert (check.valid, check.signatures_checked, check.events) == (False, keyed, counted)
    assert check.valid is False and check.signatures_checked is keyed and check.problems
    assert check.problem == check.problems[0] and check.verified is False
    if not check.problems[0].startswith("decision "):  # the chain broke: nothing is summed up
        assert check == HoldHistoryCheck(valid=False, signatures_checked=keyed, events=counted,
                                         problems=check.problems)
    return list(check.problems)


def _resealed(events, signer_key=KEY) -> list[dict]:
    """The events chained and signed again from the first (what an editor with a key would do)."""
    signer = Ed25519ReceiptSigner(signer_key)
    previous = None
    for seq, event in enumerate(events, start=1):
        event["seq"], event["previous_event_hash"] = seq, previous
        seal(event, signer)
        previous = event["event_hash"]
    return events


def test_a_whole_chain_verifies_with_its_outcomes_and_policy_changes():
    check = verify_hold_history(history(), ANCHORS)
    assert check.verified and check.valid and check.signatures_checked and check.events == 7
    assert check.problems == () and check.problem is None
    assert check.closed == {"approved": 2, "denied": 1, "expired": 1}
    first = chain()[0]
    assert check.policy_changes == ({"seq": 1, "created_at": first["created_at"], "actor": "operator:ops",
                                     "principal": {"kind": "operator", "id": "operator:ops"},
                                     "policy": first["policy"]},)
    assert check.as_of == AS_OF
    assert check.to_json() == {"verified": True, "valid": True, "signatures_checked": True, "events": 7,
                               "as_of": AS_OF, "problems": [], "closed": {"approved": 2, "denied": 1, "expired": 1},
                               "policy_changes": list(check.policy_changes)}
    empty = verify_hold_history(history([]), ANCHORS)
    assert empty.verified and empty.events == 0 and empty.as_of == AS_OF
    assert history([])["head"]["seq"] == 0 and history([])["head"]["head_event_hash"] is None


def test_without_a_trusted_key_it_is_intact_but_never_verified():
    for trust in (None, TrustAnchors()):
        check = verify_hold_history(history(), trust)
        assert check.valid and not check.signatures_checked and not check.verified
    assert _problems(history(), anchors(OTHER)) == ["event 1 (seq 1): signature has no trusted key"]


def test_a_changed_byte_is_tampering_and_a_new_hash_breaks_the_signature():
    events = chain()
    events[2]["note"] = "fine by finance!"
    assert _problems(history(events)) == ["event 3 (seq 3): event_hash does not match its content (tampered)"]
    moved = chain()
    moved[1]["public_key_fingerprint"] = OTHER.fingerprint
    assert _problems(history(moved)) == ["event 2 (seq 2): public_key_fingerprint does not name the trusted key"]
    seal(events[2], None)  # the hash recomputed over the edit, the old signature kept
    assert _problems(history(events)) == ["event 3 (seq 3): signature fails"]
    resigned = chain()
    resigned[2]["note"] = "edited"
    assert _problems(history(_resealed(resigned, OTHER))) == ["event 1 (seq 1): signature has no trusted key"]


def test_every_single_character_edit_of_any_event_is_named():
    base = chain()
    edited = 0
    for index, event in enumerate(base):
        for name, value in event.items():
            if not isinstance(value, str) or not value:
                continue
            events = copy.deepcopy(base)
            middle = len(value) // 2
            events[index][name] = value[:middle] + ("0" if value[middle] != "0" else "1") + value[middle + 1:]
            assert not verify_hold_history(history(events), ANCHORS).valid, (index, name)
            edited += 1
    assert edited > 80


def test_deleted_reordered_and_inserted_events_break_the_sequence():
    events = chain()
    assert _problems(history(events[1:])) == ["event 1 (seq 2): seq 2, expected 1 (gap or reorder)"]
    assert _problems(history(events[:3] + events[4:])) == ["event 4 (seq 5): seq 5, expected 4 (gap or reorder)"]
    swapped = events[:3] + [events[4], events[3]] + events[5:]
    assert _problems(history(swapped)) == ["event 4 (seq 5): seq 5, expected 4 (gap or reorder)"]
    doubled = events[:3] + [events[2]] + events[3:]
    assert _problems(history(doubled)) == ["event 4 (seq 3): seq 3, expected 4 (gap or reorder)"]
    # renumbered after a deletion: the link to the deleted event's hash is gone
    renumbered = copy.deepcopy(events[:3] + events[4:])
    for seq, event in enumerate(renumbered, start=1):
        event["seq"] = seq
    assert _problems(history(renumbered)) == ["event 4 (seq 4): previous_event_hash does not link to the event before it"]


def test_another_scopes_chain_is_refused():
    assert _problems(history(chain(), scope="tenant_b")) == ["event 1 (seq 1): belongs to another scope"]
    assert verify_hold_history(history(chain(scope="tenant_b"), scope="tenant_b"), ANCHORS).verified


def test_a_policy_that_does_not_parse_is_named():
    events = chain()
    events[0]["policy"] = {**events[0]["policy"], "default_queue": "nowhere"}
    problems = _problems(history(_resealed(events)))
    assert len(problems) == 1 and problems[0].startswith("event 1 (seq 1): its policy does not parse (")


def test_a_closing_that_breaks_the_rules_is_named_per_decision():
    events = chain()
    events[6]["votes"] = []  # bob's approval no longer rests on alice's vote
    problems = _problems(history(_resealed(events)))
    assert problems == ["decision dec_d: an approval's votes must list the hashes of the earlier approving votes, in order"]
    events = chain()
    lonely = events[:5] + [events[6]]
    lonely[5]["votes"] = []
    assert _problems(history(_resealed(lonely))) == [
        "decision dec_d: approved by 1 distinct holder(s), the quorum needs 2"]
    events = chain()
    events[3]["action"] = "escalate"  # an escalation cannot close a hold as expired
    assert _problems(history(_resealed(events))) == [
        "decision dec_b: a escalate event cannot close a hold as 'expired'"]
    events = chain()
    events[3]["record_hash"] = "f" * 64  # one of dec_b's events bound to another record
    events.insert(3, copy.deepcopy(events[1]))
    events[3]["decision_id"] = RECORDS["b"]["decision_id"]
    problems = _problems(history(_resealed(events)))
    assert problems[0].startswith("decision dec_b: hold_events[1]: record_hash is not the decision record's")


def test_malformed_events_and_documents_are_named():
    events = chain()
    events[1]["extra"] = 1
    assert _problems(history(_resealed(events))) == ["event 2 (seq 2): members differ from hold_event_v1's"]
    events = chain()
    events[1]["action"] = "approve_all"
    assert _problems(history(_resealed(events))) == ["event 2 (seq 2): unknown action 'approve_all'"]
    events = chain()
    events[1]["actor"] = "person:someone#else"
    assert _problems(history(_resealed(events))) == ["event 2 (seq 2): actor is not its principal's"]
    assert _problems(history([1])) == ["event 1: must be a JSON object"]
    for document, problem in (([], "a hold history must be a JSON object"),
                              ({**history(), "hold_history_version": "v0"}, "hold_history_version must be hold_history_v1"),
                              ({**history(), "scope_hash": SCOPE}, "scope_hash must be a sha256 hex"),
                              ({**history(), "events": {}}, "events must be an array")):
        assert _problems(document) == [problem]


@pytest.mark.parametrize("kind", ["unsigned", "float"])
def test_unsigned_or_odd_content_fails_without_raising(kind):
    events = chain()
    if kind == "unsigned":
        step = Step("claim", Principal.operator("ops"), "2026-11-03T10:00:00.000Z", "dec_a", "a" * 64, queue="default")
        events.append(build_event(step, scope_hash=scope_hash(SCOPE), seq=8, previous_event_hash=events[-1]["event_hash"],
                                  signer=None))
        assert _problems(history(events)) == [f"event 8 (seq 8): {UNSIGNED}"]
        # Without keys its form holds (what a gate with signing off writes:
        # tests/holds/test_unsigned_chains.py); a claim after dec_a closed breaks the hold's rules.
        assert verify_hold_history(history(events), None).problems == ("decision dec_a: a hold closes once, with its last event",)
    else:
        events[1]["note"] = float("nan")
        assert _problems(history(events)) == ["event 2 (seq 2): is not canonical JSON"]


def test_the_stated_fingerprint_names_the_key_that_signed_among_several():
    both = anchors(KEY) + anchors(OTHER)
    assert verify_hold_history(history(), both).verified
    events = chain()
    events[1]["public_key_fingerprint"] = OTHER.fingerprint  # another trusted key's, not the signer's
    assert _problems(history(events), both) == ["event 2 (seq 2): public_key_fingerprint does not name the trusted key"]


def test_hmac_signed_events_state_no_fingerprint_and_need_their_key_ids_secret():
    key = HmacKey("hmac-1", b"a shared secret")
    signer = HmacReceiptSigner(key)
    events = chain(signer=signer)
    trust = TrustAnchors.from_hmac_key(key)
    assert events[0]["public_key_fingerprint"] is None
    assert verify_hold_history(history(events, signer=signer), trust).verified
    assert _problems(history(events), trust) == ["head: signature has no trusted key"]  # the head by another key
    events[1]["public_key_fingerprint"] = KEY.fingerprint
    assert _problems(history(events, signer=signer), trust) == [
        "event 2 (seq 2): an HMAC signature states no public_key_fingerprint"]
    other = TrustAnchors.from_hmac_key(HmacKey("hmac-2", b"a shared secret"))
    assert _problems(history(chain(signer=signer), signer=signer), other) == [
        "event 1 (seq 1): signature has no trusted key"]


def test_one_decisions_events_with_keys_name_each_signature():
    key = HmacKey("hmac-1", b"a shared secret")
    signed = of_decision(chain(signer=HmacReceiptSigner(key)), "d")
    assert hold_events_problems(RECORDS["d"], signed, TrustAnchors.from_hmac_key(key)) == []
    assert hold_events_problems(RECORDS["d"], signed, TrustAnchors.from_hmac_key(HmacKey("hmac-2", key.secret))) == [
        "hold_events[0]: signature has no trusted key", "hold_events[1]: signature has no trusted key"]
    events = of_decision(chain(), "d")
    listed = copy.deepcopy(events)
    listed[0]["public_key_fingerprint"] = [KEY.fingerprint]
    assert hold_events_problems(RECORDS["d"], listed, ANCHORS) == [
        "hold_events[0]: public_key_fingerprint does not name the trusted key"]
    assert hold_events_problems(RECORDS["d"], events, ANCHORS) == []
    assert hold_events_problems(RECORDS["d"], events, None) == []
    assert hold_events_problems(RECORDS["d"], events, anchors(OTHER)) == [
        "hold_events[0]: signature has no trusted key", "hold_events[1]: signature has no trusted key"]
    edited = copy.deepcopy(events)
    edited[0]["note"] = "added later"
    assert hold_events_problems(RECORDS["d"], edited, None) == [
        "hold_events[0]: event_hash does not match its content (tampered)"]


def test_two_trusted_keys_under_one_key_id_are_told_apart_by_the_fingerprint():
    # A registry may hold two keys with one key id; the stated fingerprint picks the signer's.
    twin = dict(OTHER_ENTRY, key_id=KEY.key_id)
    trust = anchors(KEY) + TrustAnchors.from_registry_entries([twin])
    signer = Ed25519ReceiptSigner(OTHER)
    signer.key_id = KEY.key_id
    events = of_decision(chain(signer=signer), "d")
    assert hold_events_problems(RECORDS["d"], events, trust) == []
    assert verify_hold_history(history(chain(signer=signer), signer=signer), trust).verified


def test_newest_events_cut_off_under_the_signed_head_are_named():
    """SECURITY: the head the gate signed names the chain's newest event; a document whose newest
    events were dropped (each event left intact) no longer ends where its head says."""
    whole = history()
    for kept in (6, 1, 0):
        cut = {**whole, "events": whole["events"][:kept]}
        assert _problems(cut) == [(f"head: names seq 7, the document ends at seq {kept} "
                                   "(events cut off, or a head of another chain)")]
    assert verify_hold_history(history(chain()[:6]), ANCHORS).verified  # an older, whole document with its head


def test_a_missing_forged_or_malformed_head_is_named():
    whole = history()
    head = whole["head"]
    without = {name: value for name, value in whole.items() if name != "head"}
    missing = "head: missing (the newest events could have been cut off unseen)"
    assert _problems(without) == [missing]
    assert _problems({**whole, "head": [head]}) == [missing]
    assert _problems({**whole, "head": {**head, "extra": 1}}) == ["head: members differ from hold_chain_head_v1's"]
    assert _problems({**whole, "head": {**head, "hold_chain_head_version": "v0"}}) == [
        "head: hold_chain_head_version must be hold_chain_head_v1"]
    other_scope = history(chain(scope="tenant_b"), scope="tenant_b")["head"]
    assert _problems({**whole, "head": other_scope}) == ["head: belongs to another scope"]
    for as_of in ("2026-11-03T10:00:00Z", "2026-11-03 10:00:00.000Z", 1, None, "<b>now</b>"):
        assert _problems({**whole, "head": {**head, "as_of": as_of}}) == [
            "head: as_of must be a UTC time in milliseconds (YYYY-MM-DDTHH:MM:SS.mmmZ)"], as_of
    assert _problems({**whole, "head": {**head, "as_of": "2026-11-04T10:00:00.000Z"}}) == [
        "head: event_hash does not match its content (tampered)"]
    assert _problems({**whole, "head": {**head, "head_event_hash": chain()[5]["event_hash"]}}) == [
        "head: names seq 7, the document ends at seq 7 (events cut off, or a head of another chain)"]
    resealed = {**head, "as_of": "2026-11-04T10:00:00.000Z"}
    seal(resealed, None)  # the hash recomputed over the edit, the old signature kept
    assert _problems({**whole, "head": resealed}) == ["head: signature fails"]
    assert _problems({**whole, "head": {**head, "public_key_fingerprint": OTHER.fingerprint}}) == [
        "head: public_key_fingerprint does not name the trusted key"]
    forged = history(signer=Ed25519ReceiptSigner(OTHER))
    assert _problems(forged) == ["head: signature has no trusted key"]
    assert verify_hold_history(forged, None).valid  # integrity alone does not see whose key signed
    assert _problems({**whole, "head": {**head, "key_id": float("nan")}}) == ["head: signature fails"]


def _checkpoint(events: list[dict], size: int, at: str = "2026-11-03T09:59:00.000Z", key=KEY) -> dict:
    from gate.chain.event_witness import hold_chain_id
    from gate.chain.merkle import checkpoint_body, mth, sign_checkpoint

    body = checkpoint_body(hold_chain_id(scope_hash(SCOPE)), size, mth([e["event_hash"] for e in events[:size]]), at)
    return sign_checkpoint(body, key)


def test_against_a_witnessed_checkpoint_a_cut_back_or_rewritten_chain_is_named():
    """Issue 52, defect 6: the gate signs a head over whatever its ledger holds, so a chain whose
    newest event was deleted (the head signed again over what is left) verifies alone; against a
    checkpoint witnessed before the head's `as_of` it fails, and an older document still verifies."""
    events = chain()
    log = [_checkpoint(events, 7)]
    assert verify_hold_history(history(events), ANCHORS, log).verified
    assert verify_hold_history(history(events), ANCHORS, []).verified
    cut = history(events[:6])
    assert verify_hold_history(cut, ANCHORS).verified  # what the document alone cannot show
    check = verify_hold_history(cut, ANCHORS, log)
    assert (check.valid, check.signatures_checked, check.events, check.as_of) == (False, True, 6, None)
    assert check.problems == ((f"checkpoint_log: the checkpoint of 7 events of hold_chain_{scope_hash(SCOPE)[:32]} "
                               "witnessed at 2026-11-03T09:59:00.000Z is longer than the document's 6 events "
                               "(checkpoint_log.size: the chain was cut back)"),)
    assert verify_hold_history(cut, ANCHORS, [_checkpoint(events, 7, at="2026-11-03T10:00:00.001Z")]).verified
    assert verify_hold_history(cut, ANCHORS, [_checkpoint(events, 7, at=AS_OF)]).valid is False
    rewritten = _resealed(copy.deepcopy(events[:3]) + copy.deepcopy(events[4:]))
    assert "checkpoint_log.consistency" in verify_hold_history(history(rewritten), ANCHORS, [_checkpoint(events, 5)]
                                                               ).problems[0]
    forged = [_checkpoint(events, 7, key=OTHER)]
    assert verify_hold_history(history(events), ANCHORS, forged).problems == (
        "no trusted key for the held checkpoint's signature",)
    assert verify_hold_history(history(events), None, forged).valid  # integrity only: the held line is not checked


# --------------------------------------------------------------------------- holders (issue 52)

ANN, BOB = "person:https://id.example#ann", "person:https://id.example#bob"


def _pair(first: Principal, second: Principal, requester_holder: str | None = None, four_eyes: bool = True,
          needed: int = 2) -> list[dict]:
    """Two approving votes on one hold of a two-person queue, the second closing it."""
    record = RECORDS["d"]
    close = {"four_eyes": four_eyes, "requested_by": "key_caller", "requested_holder": requester_holder}
    signer = Ed25519ReceiptSigner(KEY)
    one = build_event(Step("vote", first, "2026-11-03T09:00:01.000Z", record["decision_id"], record["record_hash"],
                           vote="approve", reason_code="OK", queue="pair", **close),
                      scope_hash=scope_hash(SCOPE), seq=1, previous_event_hash=None, signer=signer)
    two = build_event(Step("vote", second, "2026-11-03T09:00:02.000Z", record["decision_id"], record["record_hash"],
                           vote="approve", reason_code="OK", queue="pair", outcome="approved", approvals_needed=needed,
                           votes=(one["event_hash"],), **close),
                      scope_hash=scope_hash(SCOPE), seq=2, previous_event_hash=one["event_hash"], signer=signer)
    return [one, two]


def test_a_quorum_and_four_eyes_count_holders_not_keys():
    ann_a, ann_b, bob = Principal.api_key("key_a", ANN), Principal.api_key("key_b", ANN), Principal.api_key("key_c", BOB)
    record = RECORDS["d"]
    assert hold_events_problems(record, _pair(ann_a, bob), ANCHORS) == []
    assert hold_events_problems(record, _pair(ann_a, ann_b), ANCHORS) == [
        "one holder approved twice", "approved by 1 distinct holder(s), the quorum needs 2"]
    assert hold_events_problems(record, _pair(ann_a, ann_b, needed=1), ANCHORS) == ["one holder approved twice"]
    # Ann's key and Ann signed in (a person): one holder.
    assert hold_events_problems(record, _pair(ann_a, Principal.person("https://id.example", "ann")), ANCHORS)[0] == (
        "one holder approved twice")
    # Keys of no stated holder are their own: two keys, two holders (as before holders).
    assert hold_events_problems(record, _pair(Principal.api_key("key_a"), Principal.api_key("key_b")), ANCHORS) == []
    # Four eyes: the requester's holder, stated or its key's own.
    assert hold_events_problems(record, _pair(ann_a, bob, requester_holder=BOB), ANCHORS) == [
        "approved by the holder that asked for the action (four eyes)"]
    assert hold_events_problems(record, _pair(ann_a, bob, requester_holder=ANN), ANCHORS) == [
        "approved by the holder that asked for the action (four eyes)"]
    assert hold_events_problems(record, _pair(ann_a, bob, requester_holder=BOB, four_eyes=False), ANCHORS) == []
    assert hold_events_problems(record, _pair(ann_a, Principal.api_key("key_caller")), ANCHORS) == [
        "approved by the holder that asked for the action (four eyes)"]
    assert hold_events_problems(record, _pair(ann_a, bob, requester_holder="service:crm"), ANCHORS) == []
    # A closing that names no requester (never written by the gate) names no four-eyes breach, and never raises.
    nobody = _pair(ann_a, bob)
    for event in nobody:
        event["requested_by"] = None
    nobody[1]["votes"] = [_resealed(nobody[:1])[0]["event_hash"]]
    assert hold_events_problems(record, _resealed(nobody), ANCHORS) == []


def test_requested_holder_is_written_only_when_stated_and_checked_when_present():
    ann_a, bob = Principal.api_key("key_a", ANN), Principal.api_key("key_c", BOB)
    record = RECORDS["d"]
    stated, bare = _pair(ann_a, bob, requester_holder="service:crm"), _pair(ann_a, bob)
    assert stated[1]["requested_holder"] == "service:crm" and "requested_holder" not in bare[1]
    assert stated[1]["principal"] == {"kind": "api_key", "id": "key_c", "holder": BOB}
    bad = copy.deepcopy(stated)
    bad[1]["requested_holder"] = "crm"
    malformed = ("hold_events[1]: requested_holder is malformed (a holder is person:<issuer>#<subject>, "
                 "service:<name> or operator:<login>)")
    assert hold_events_problems(record, _resealed(bad), ANCHORS) == [malformed]
    extra = copy.deepcopy(bare)
    extra[1]["requested_holders"] = "service:crm"
    assert hold_events_problems(record, _resealed(extra), ANCHORS) == ["hold_events[1]: members differ from hold_event_v1's"]
    assert verify_hold_history(history(_resealed(copy.deepcopy(stated))), ANCHORS).valid
    assert _problems(history(_resealed(extra))) == ["event 2 (seq 2): members differ from hold_event_v1's"]
