"""A held decision's packet carries its signed hold events (`hold_events`, issue 43), checked by two
named checks: `hold_events` (integrity, binding and the closing rules) and `hold_events_signature`
(authenticity). Any edit of any hold event fails one of them, even with `packet_hash` recomputed;
a packet of a decision without hold events is byte for byte what it was before the member existed.
Its signed `hold_commitment` (issue 52) states how many events it has and the newest one's hash, so
an event or the whole member dropped from the packet fails `hold_commitment`."""

from __future__ import annotations

import copy

import pytest
from packet_support import (
    ACTIVE,
    ATTACKER,
    REQUEST,
    anchors,
    at,
    intelligence_reports,
    receipt_head,
    scenario,
)

from gate.chain.merkle import mth
from gate.holds.events import Step, build_commitment, build_event
from gate.keys.signing import Ed25519ReceiptSigner
from gate.packets import PacketOptions, PacketSourceError, build_packet, verify_packet
from gate.principals import Principal
from gate.protocol.canonical import sha256_hex

ANCHORS = anchors()
BASE = scenario()
# The packet hashes of these scenarios as the builder made them before `hold_events` existed
# (computed at f353c0d): a packet of a decision without hold events has not changed by a byte.
BEFORE = {"default": "2036d1a2b0286a93ac79000913e99492d42cfed6dc4af72bf9b1008be95a2955",
          "link_outcome": "0347da1e5006da74152766bb39dae8feafcb6b463f8e73fac3f9facc17faa6f8",
          "bare": "08168693d0ea89f1e829d193864ffced226d6e92013027e36e1f2177fb56c3bc"}


def hold_events(record: dict, key=ACTIVE) -> list[dict]:
    """A claim, then two reviewers' approvals closing a quorum-two hold: seq 3, 5 and 8 of the
    scope's hold chain (other decisions' events sit between them)."""
    signer = Ed25519ReceiptSigner(key)
    alice, bob = Principal.person("https://id.example", "alice"), Principal.person("https://id.example", "bob")
    bound = {"decision_id": record["decision_id"], "record_hash": record["record_hash"]}
    close = {"four_eyes": True, "requested_by": "key_caller", "queue": "pair"}
    events: list[dict] = []
    for seq, make in ((3, lambda: Step("claim", alice, at(3000), **bound, queue="pair")),
                      (5, lambda: Step("vote", alice, at(3001), **bound, vote="approve", reason_code="CHECKED",
                                       **close)),
                      (8, lambda: Step("vote", bob, at(3002), **bound, vote="approve", reason_code="CHECKED",
                                       note="margin accepted by finance", outcome="approved", approvals_needed=2,
                                       votes=(events[1]["event_hash"],), **close))):
        events.append(build_event(make(), scope_hash="5" * 64, seq=seq, previous_event_hash=f"{seq - 1:x}" * 64,
                                  signer=signer))
    return events


CHAIN = [f"{seq:x}" * 64 for seq in range(1, 9)]  # the scope's hold chain of 8 events (as hashes)


def commitment_of(record: dict, events: list[dict], key=ACTIVE) -> dict:
    """The signed hold commitment of `events` on the 8-event chain, as of just after the last."""
    return build_commitment("5" * 64, record, events, (8, mth(CHAIN)), at(3003), Ed25519ReceiptSigner(key))


def packet_of(events, exported_at: str = at(7200), commitment: dict | None = None) -> dict:
    """The default scenario's packet, with `events` as the decision's hold events and their
    commitment (default: made of them)."""
    record = BASE.record
    commitment = commitment if commitment is not None or not events else commitment_of(record, list(events))
    options = PacketOptions(execution_limit=3, outcome_limit=2, include_input=True, include_chain=True)
    return build_packet(record=record, exported_at=exported_at, options=options,
                        receipt_head=receipt_head(record, 10, ACTIVE), original_input=copy.deepcopy(REQUEST),
                        chain=BASE.chain.excerpt(25, options.chain_limit), policy_intelligence=intelligence_reports(record),
                        hold_events=events, hold_commitment=commitment, **BASE.parts)


HELD = packet_of(hold_events(BASE.record))


def _rehash(packet: dict) -> dict:
    packet["packet_hash"] = sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})
    return packet


def test_a_packet_without_hold_events_is_as_before():
    assert packet_of(()) == BASE.packet and "hold_events" not in BASE.packet
    assert BASE.packet["packet_hash"] == BEFORE["default"]
    assert scenario(link_outcome=True).packet["packet_hash"] == BEFORE["link_outcome"]
    assert scenario(include_chain=False, reports=False, include_input=False).packet["packet_hash"] == BEFORE["bare"]
    result = verify_packet(BASE.packet, anchors=ANCHORS)
    assert result.verified and result.checks["hold_events"] is None and result.checks["hold_events_signature"] is None


def test_a_held_decisions_packet_carries_its_events_and_verifies():
    assert [e["seq"] for e in HELD["hold_events"]] == [3, 5, 8]
    assert list(HELD)[-3:] == ["hold_events", "hold_commitment", "packet_hash"]
    assert HELD["packet_manifest"] == BASE.packet["packet_manifest"]  # no component, no option: as before
    result = verify_packet(HELD, anchors=ANCHORS)
    assert result.verified, result.details
    assert result.checks["hold_events"] is True and result.checks["hold_events_signature"] is True
    assert result.checks["hold_commitment"] is True and result.checks["hold_commitment_signature"] is True


def test_without_a_trusted_key_the_events_are_intact_but_not_authentic():
    result = verify_packet(HELD, anchors=None)
    assert result.checks["hold_events"] is True and result.checks["hold_events_signature"] is False
    assert not result.authenticity_valid
    assert result.checks["hold_commitment"] is True and result.checks["hold_commitment_signature"] is False
    assert result.details["hold_commitment_signature"] == ["hold_commitment: signature has no trusted key"]
    assert result.details["hold_events_signature"][0] == "hold_events[0]: signature has no trusted key"
    unsigned = packet_of(hold_events(BASE.record), commitment=commitment_of(BASE.record, hold_events(BASE.record),
                                                                            key=ATTACKER))
    result = verify_packet(unsigned, anchors=ANCHORS)
    assert result.failed_checks == ("hold_commitment_signature",)
    assert result.integrity_valid and not result.authenticity_valid and not result.verified
    foreign = packet_of(hold_events(BASE.record, key=ATTACKER))
    result = verify_packet(foreign, anchors=ANCHORS)
    assert result.integrity_valid and not result.authenticity_valid and not result.verified
    assert result.failed_checks == ("hold_events_signature",)
    assert result.details["hold_events_signature"][0] == "hold_events[0]: signature has no trusted key"


def test_a_changed_byte_of_the_resolution_fails_the_named_check():
    packet = copy.deepcopy(HELD)
    packet["hold_events"][-1]["note"] = "margin accepted by Finance"
    result = verify_packet(packet, anchors=ANCHORS)
    assert {"packet_hash", "hold_events"} <= set(result.failed_checks) and not result.verified
    assert result.details["hold_events"] == ["hold_events[2]: event_hash does not match its content (tampered)"]
    rehashed = verify_packet(_rehash(packet), anchors=ANCHORS)
    assert rehashed.failed_checks == ("hold_events",) and not rehashed.integrity_valid and not rehashed.verified
    first = copy.deepcopy(HELD)
    first["hold_events"][0]["queue"] = "other"  # the first event's, the later two intact
    result = verify_packet(_rehash(first), anchors=ANCHORS)
    assert result.details["hold_events"] == ["hold_events[0]: event_hash does not match its content (tampered)"]
    assert result.checks["hold_events_signature"] is True  # it signs the stated event_hash, which is intact


def _leaves(value, path=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    elif isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        yield path


def _edit(value):
    if isinstance(value, int):
        return value + 1
    middle = len(value) // 2
    return value[:middle] + ("0" if value[middle:middle + 1] != "0" else "1") + value[middle + 1:]


LEAVES = list(_leaves(HELD["hold_events"]))


@pytest.mark.parametrize("path", LEAVES, ids=["/".join(map(str, p)) for p in LEAVES])
def test_any_single_edit_of_a_hold_event_fails_a_hold_check_even_rehashed(path):
    packet = copy.deepcopy(HELD)
    target = packet["hold_events"]
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = _edit(target[path[-1]])
    result = verify_packet(_rehash(packet), anchors=ANCHORS)
    assert not result.verified
    assert {"hold_events", "hold_events_signature"} & set(result.failed_checks), result.failed_checks


def test_dropped_reordered_foreign_or_empty_events_fail():
    events = hold_events(BASE.record)
    cases = {
        "an approval without its earlier vote": [events[0], events[2]],
        "reordered": [events[1], events[0], events[2]],
        "twice": [events[0], events[0], events[1], events[2]],
        "another decision's": hold_events({**BASE.record, "decision_id": "dec_other"}),
    }
    for name, listed in cases.items():
        packet = _rehash({**copy.deepcopy(HELD), "hold_events": listed,
                          "hold_commitment": commitment_of(BASE.record, listed)})
        result = verify_packet(packet, anchors=ANCHORS)
        assert "hold_events" in result.failed_checks and not result.verified, name
    for empty in ([], {}, None):
        result = verify_packet(_rehash({**copy.deepcopy(HELD), "hold_events": empty}), anchors=ANCHORS)
        assert result.details["hold_events"] == ["hold_events must be a non-empty array"]
    result = verify_packet(_rehash({**copy.deepcopy(HELD), "hold_events": [1, *events]}), anchors=ANCHORS)
    assert result.details["hold_events"] == ["hold_events[0]: a hold event must be a JSON object"]
    assert result.details["hold_events_signature"] == ["hold_events[0]: not an object"]


def test_an_export_before_the_last_event_is_named():
    packet = _rehash({**copy.deepcopy(HELD), "exported_at": at(3001)})
    result = verify_packet(packet, anchors=ANCHORS)
    assert "exported_at" in result.failed_checks
    assert any("hold_events[].created_at" in reason for reason in result.details["exported_at"])


def test_the_builder_refuses_events_that_are_not_the_records():
    with pytest.raises(PacketSourceError, match="hold events do not verify"):
        packet_of(hold_events({**BASE.record, "record_hash": "0" * 64}))
    with pytest.raises(PacketSourceError, match="exported_at is earlier than hold_events"):
        packet_of(hold_events(BASE.record), exported_at=at(3001))


def test_a_hold_events_step_that_raises_fails_closed_under_its_own_name(monkeypatch):
    """Any surprise inside the hold events' step fails `hold_events`, named, never a crash or a pass."""
    import gate.packets.verify as packet_verify

    def explode(*_args, **_kwargs):
        raise RuntimeError("surprise")

    monkeypatch.setattr(packet_verify, "check_hold_events", explode)
    result = verify_packet(copy.deepcopy(HELD), anchors=ANCHORS)
    assert result.verified is False and result.checks["hold_events"] is False
    assert result.details["hold_events"] == ["could not be checked (RuntimeError)"]


def test_a_dropped_event_or_member_fails_the_commitment_even_rehashed():
    """Issue 52 defect 7: the newest event (a deny, an approval) or the whole member removed and
    `packet_hash` recomputed is named by `hold_commitment`; so is a commitment removed with them."""
    events = HELD["hold_events"]
    for name, packet in {
        "the newest event dropped": {**copy.deepcopy(HELD), "hold_events": events[:-1]},
        "the member removed": {k: v for k, v in copy.deepcopy(HELD).items() if k != "hold_events"},
    }.items():
        result = verify_packet(_rehash(packet), anchors=ANCHORS)
        assert "hold_commitment" in result.failed_checks and not result.verified, name
        assert any("events omitted" in reason for reason in result.details["hold_commitment"]), name
    # Events without their commitment (the record's verdict aside) fail too.
    result = verify_packet(_rehash({k: v for k, v in copy.deepcopy(HELD).items() if k != "hold_commitment"}),
                           anchors=ANCHORS)
    assert result.failed_checks == ("hold_commitment",) and result.checks["hold_commitment_signature"] is None
    # A record whose verdict holds the action needs the commitment, with or without events.
    bare = {k: v for k, v in copy.deepcopy(HELD).items() if k not in ("hold_events", "hold_commitment")}
    result = verify_packet(_rehash({**bare, "decision_record": {**bare["decision_record"], "verdict": "review"}}),
                           anchors=ANCHORS)
    assert result.checks["hold_commitment"] is False and not result.verified
    assert result.details["hold_commitment"] == [
        "a held decision's packet must carry its hold_commitment (the record's verdict holds the action)"]
    edited = copy.deepcopy(HELD)
    edited["hold_commitment"]["count"] = 2
    result = verify_packet(_rehash(edited), anchors=ANCHORS)
    assert result.details["hold_commitment"][0] == "event_hash does not match its content (tampered)"


def test_the_builder_refuses_a_commitment_that_does_not_state_the_events():
    with pytest.raises(PacketSourceError, match="hold commitment does not state its events"):
        packet_of(hold_events(BASE.record), commitment=commitment_of(BASE.record, hold_events(BASE.record)[:2]))


def _witnessed(size: int, root: str | None = None, created: str = at(3003), key=ACTIVE) -> dict:
    from gate.chain.event_witness import hold_chain_id
    from gate.chain.merkle import checkpoint_body, sign_checkpoint

    return sign_checkpoint(checkpoint_body(hold_chain_id("5" * 64), size, root or mth(CHAIN[:size]), created), key)


def test_the_commitment_against_the_witnessed_hold_chain():
    """Issue 52, defect 6: `hold_checkpoint_log` compares the commitment's hold chain with the newest
    checkpoint witnessed by its `as_of`: a longer one means the chain was cut back before the export,
    another root at the same size that it was rewritten."""
    def check(log):
        return verify_packet(HELD, anchors=ANCHORS, hold_checkpoints=log)

    assert check(None).checks["hold_checkpoint_log"] is None
    result = check([_witnessed(8)])
    assert result.verified and result.checks["hold_checkpoint_log"] is True
    assert (result.expected["hold_checkpoint_log.tree_size"], result.actual["hold_checkpoint_log.tree_size"]) == (8, 8)
    assert check([_witnessed(5)]).checks["hold_checkpoint_log"] is True
    cut = check([_witnessed(5), _witnessed(9, root="ab" * 32)])
    assert cut.failed_checks == ("hold_checkpoint_log",) and not cut.verified and not cut.integrity_valid
    assert cut.details["hold_checkpoint_log"] == [(
        f"the hold chain had 8 events when the packet was exported, fewer than the 9 of the checkpoint witnessed at "
        f"{at(3003)}: the chain was cut back")]
    rewritten = check([_witnessed(8, root="ab" * 32)])
    assert rewritten.details["hold_checkpoint_log"] == [
        "the hold chain of 8 events has another root than the witnessed checkpoint of that size: the chain was rewritten"]
    later = check([_witnessed(9, root="ab" * 32, created=at(3004))])  # made after the export: not compared
    assert later.verified and later.checks["hold_checkpoint_log"] is None
    assert "holds no checkpoint of the hold chain made by the packet's hold commitment" in later.notes[0]
    forged = check([_witnessed(8, key=ATTACKER)])
    assert forged.details["hold_checkpoint_log"] == ["no trusted key for the held checkpoint's signature"]
    assert verify_packet(BASE.packet, anchors=ANCHORS, hold_checkpoints=[_witnessed(9)]).checks[
        "hold_checkpoint_log"] is None  # a packet of a decision never held
    odd = _rehash({**copy.deepcopy(HELD), "hold_commitment": {**HELD["hold_commitment"], "chain_size": "8"}})
    odd_result = verify_packet(odd, anchors=ANCHORS, hold_checkpoints=[_witnessed(8)])
    assert odd_result.details["hold_checkpoint_log"] == [(
        f"the hold chain had '8' events when the packet was exported, fewer than the 8 of the checkpoint witnessed at "
        f"{at(3003)}: the chain was cut back")]
    offline = verify_packet(HELD, anchors=ANCHORS, checkpoint_log=[_witnessed(9, root="ab" * 32)])
    assert offline.checks["hold_checkpoint_log"] is False  # `gate verify --checkpoints`: the same log


def test_a_hold_checkpoint_step_that_raises_fails_closed_under_its_own_name(monkeypatch):
    import gate.packets.verify as packet_verify

    def explode(*_args, **_kwargs):
        raise RuntimeError("surprise")

    monkeypatch.setattr(packet_verify, "check_hold_checkpoint_log", explode)
    result = verify_packet(copy.deepcopy(HELD), anchors=ANCHORS, hold_checkpoints=[])
    assert result.verified is False and result.failed_checks == ("hold_checkpoint_log",)
    assert result.details["hold_checkpoint_log"] == ["could not be checked (RuntimeError)"]


def test_commitment_problems_by_value():
    from gate.chain.merkle import EMPTY_ROOT
    from gate.chain.sealing import seal
    from gate.holds.events import commitment_problems

    record, events = BASE.record, hold_events(BASE.record)
    good = commitment_of(record, events)
    assert commitment_problems(good, record, events) == []

    def resealed(**changes):
        edited = {**good, **changes}
        seal(edited, Ed25519ReceiptSigner(ACTIVE))
        return edited

    empty = build_commitment("5" * 64, record, [], (0, EMPTY_ROOT), at(3003), Ed25519ReceiptSigner(ACTIVE))
    assert empty["last_event_hash"] is None and empty["count"] == 0
    assert commitment_problems(empty, record, []) == []  # a hold without events yet, on an empty chain
    below = {**empty, "chain_size": -1}
    seal(below, Ed25519ReceiptSigner(ACTIVE))
    assert commitment_problems(below, record, []) == ["chain_size must be a whole number",
                                                       "chain_size -1 is below the newest hold event's seq 0"]
    assert commitment_problems(resealed(chain_size=7), record, events) == [
        "chain_size 7 is below the newest hold event's seq 8"]
    assert commitment_problems(resealed(count=-1), record, events) == [
        "count must be a whole number", "count is -1, the packet carries 3 hold event(s) (events omitted)"]
    assert commitment_problems(resealed(count="3"), record, events)[0] == "count must be a whole number"
    for name in ("scope_hash", "chain_root"):
        for value in (5, "zz"):
            assert f"{name} must be a sha256 hex" in commitment_problems(resealed(**{name: value}), record, events)
    for value in (5, "2026-11-03"):
        assert "as_of must be a UTC time in milliseconds" in commitment_problems(resealed(as_of=value), record, events)
    unbound = {**record, "decision_id": None}
    assert "decision_id is not the decision record's" in commitment_problems(resealed(decision_id=None), unbound,
                                                                             events)
