"""`gate.packets.chain_checks` called directly: each tampering of the record's `audit_chain` member
or of the packet's chain excerpt fails exactly the checks named for it, and no other."""

from __future__ import annotations

import copy
import hashlib
from types import MappingProxyType

import pytest
from packet_support import ACTIVE, RETIRED, anchors, scenario

from gate.packets.chain_checks import _check_chain, _check_record_audit_chain
from gate.packets.common import PACKET_CHECKS, _is_hex64
from gate.packets.result import _State
from gate.verify import TrustAnchors

ANCHORS = anchors()
BASE = scenario(n_exec=1, n_out=1, n_crm=1, reports=False)  # record at 25 of 40, window 21..40
CHAIN_NAMES = tuple(name for name in PACKET_CHECKS if name.startswith("audit_chain"))
HEX = "ab" * 32


def run(tamper=None, *, packet=None, record=None, anchors=ANCHORS):
    """(state, key source) of step 4 over a copy of the packet after `tamper(packet)`."""
    packet = copy.deepcopy(BASE.packet if packet is None else packet)
    if tamper is not None:
        tamper(packet)
    state = _State()
    source = _check_chain(state, packet, packet["decision_record"] if record is None else record, anchors)
    return state, source


def failing(state) -> set[str]:
    """The failed checks; none of them may be a step that raised (each failure is a finding)."""
    assert not any(detail.startswith("could not be checked") for details in state.details.values()
                   for detail in details), state.details
    return {name for name, ok in state.checks.items() if ok is False}


def chain(packet):
    return packet["audit_chain"]


def test_an_intact_excerpt_passes_every_chain_check_and_names_the_checkpoint_key_source():
    state, source = run()
    assert {name: state.checks[name] for name in CHAIN_NAMES} == dict.fromkeys(CHAIN_NAMES, True)
    assert source == "server_key_registry" and state.notes == []
    leaf = BASE.packet["decision_record"]["audit_chain"]["leaf_hash"]
    assert state.expected["audit_chain.inclusion_proof.leaf_hash"] == leaf
    assert state.actual["audit_chain.inclusion_proof.leaf_hash"] == leaf
    stated = chain(BASE.packet)["checkpoint"]["checkpoint_hash"]
    assert state.expected["audit_chain.checkpoint.checkpoint_hash"] == stated
    assert state.actual["audit_chain.checkpoint.checkpoint_hash"] == stated


def test_an_audit_chain_that_is_not_an_object_fails_every_chain_check():
    state, source = run(lambda p: p.__setitem__("audit_chain", ["links"]))
    assert failing(state) == set(CHAIN_NAMES) and source is None
    assert all(state.details[name] == ["audit_chain is not an object"] for name in CHAIN_NAMES)


def _set(*path, value):
    def tamper(packet):
        target = packet
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
    return tamper


def _drop(*path):
    def tamper(packet):
        target = packet
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]
    return tamper


A, W, L, P, C = "audit_chain", "audit_chain.window", "audit_chain.links", "audit_chain.inclusion_proof", \
    "audit_chain.checkpoint"
RL, H, CS = "audit_chain.record_link", "audit_chain.head", "audit_chain.checkpoint_signature"

TAMPERS = [
    # the excerpt's own members
    ("unknown member", _set("audit_chain", "note", value="x"), {A}),
    ("missing member", _drop("audit_chain", "verification_hints"), {A}),
    ("chain version", _set("audit_chain", "decision_chain_version", value="decision_chain_v2"), {A}),
    ("merkle strategy", _set("audit_chain", "merkle_strategy", value="sha256_pairs"), {A}),
    ("empty chain id", _set("audit_chain", "chain_id", value=""), {A, L, C}),
    ("chain id not text", _set("audit_chain", "chain_id", value=7), {A, L, C}),
    ("chain size 0", _set("audit_chain", "chain_size", value=0), {A, W, C}),
    ("chain size as text", _set("audit_chain", "chain_size", value="40"), {A, W, C}),
    ("position beyond the size", _set("audit_chain", "record_position", value=41), {A, W, RL, P}),
    ("position 0", _set("audit_chain", "record_position", value=0), {A, W, RL, P}),
    ("position as text", _set("audit_chain", "record_position", value="25"), {A, W, RL, P}),
    ("merkle root", _set("audit_chain", "merkle_root", value=HEX), {H}),
    ("merkle root not hex", _set("audit_chain", "merkle_root", value="x"), {A, H}),
    ("head link hash not hex", _set("audit_chain", "head_link_hash", value=HEX.upper()), {A, H}),
    ("hints", _set("audit_chain", "verification_hints", "checkpoint", value="Use the packet's key."), {A}),
    # window
    ("no window", _set("audit_chain", "window", value=None), {W, L}),
    ("window member", _set("audit_chain", "window", "note", value=1), {W}),
    ("window start", _set("audit_chain", "window", "first_position", value=22), {W}),
    ("window end", _set("audit_chain", "window", "last_position", value=39), {W}),
    ("window start as text", _set("audit_chain", "window", "first_position", value="21"), {W}),
    ("chain limit", _set("packet_manifest", "options", "chain_limit", value=19), {W}),
    ("no manifest", _set("packet_manifest", value=None), {W}),
    ("no options", _set("packet_manifest", "options", value=[20]), {W}),
    ("previous link hash missing", _set("audit_chain", "window", "previous_link_hash", value=None), {W, L}),
    ("previous root not hex", _set("audit_chain", "window", "previous_merkle_root", value="x"), {W, L}),
    # links
    ("no links", _set("audit_chain", "links", value=[]), {W, L, RL, H}),
    ("links not an array", _set("audit_chain", "links", value={"21": {}}), {W, L, RL, H}),
    ("link member", _set("audit_chain", "links", 2, "note", value="x"), {L}),
    ("link chain id", _set("audit_chain", "links", 2, "chain_id", value="chain_other"), {L}),
    ("link created", _set("audit_chain", "links", 2, "created_at", value="2026-11-03T09:30:01.000Z"), {L}),
    ("link not an object", _set("audit_chain", "links", 2, value=7), {W, L}),
    ("first link not an object", _set("audit_chain", "links", 0, value=7), {W, L}),
    ("last link not an object", _set("audit_chain", "links", -1, value=7), {W, L, H}),
    ("last link hash", _set("audit_chain", "links", -1, "link_hash", value=HEX), {L, H}),
    ("last link root", _set("audit_chain", "links", -1, "merkle_root", value=HEX), {L, H}),
    # record link (the link at record_position is links[4])
    ("record link policy", _set("audit_chain", "links", 4, "policy_id", value="refund_review"), {L, RL}),
    ("record link record hash", _set("audit_chain", "links", 4, "record_hash", value=HEX), {L, RL}),
    ("record link position", _set("audit_chain", "links", 4, "chain_position", value=26), {W, L, RL}),
    ("record link decision", _set("audit_chain", "links", 4, "decision_id", value="dec_other"), {L, RL}),
    ("record link receipt hash", _set("audit_chain", "links", 4, "receipt_hash", value=HEX), {L, RL}),
    ("record link version", _set("audit_chain", "links", 4, "policy_version", value="2020-01-01"), {L, RL}),
    # inclusion proof
    ("no proof", _set("audit_chain", "inclusion_proof", value=None), {P}),
    ("proof member", _set("audit_chain", "inclusion_proof", "note", value=1), {P}),
    ("proof without its path", _drop("audit_chain", "inclusion_proof", "proof"), {P}),
    ("tree algorithm", _set("audit_chain", "inclusion_proof", "tree_algorithm", value="sha256"), {P}),
    ("leaf index", _set("audit_chain", "inclusion_proof", "leaf_index", value=23), {P}),
    ("leaf index as a float", _set("audit_chain", "inclusion_proof", "leaf_index", value=24.0), {P}),
    ("tree size", _set("audit_chain", "inclusion_proof", "tree_size", value=39), {P}),
    ("tree size as a float", _set("audit_chain", "inclusion_proof", "tree_size", value=40.0), {P}),
    ("leaf hash", _set("audit_chain", "inclusion_proof", "leaf_hash", value=HEX), {P}),
    ("audit path", _set("audit_chain", "inclusion_proof", "proof", 0, value=HEX), {P}),
    ("audit path not an array", _set("audit_chain", "inclusion_proof", "proof", value=HEX), {P}),
    # checkpoint
    ("no checkpoint", _set("audit_chain", "checkpoint", value=None), {P, C, CS}),
    ("checkpoint chain id", _set("audit_chain", "checkpoint", "chain_id", value="chain_other"), {C, CS}),
    ("checkpoint size", _set("audit_chain", "checkpoint", "tree_size", value=39), {P, C, CS}),
    ("checkpoint time", _set("audit_chain", "checkpoint", "created_at", value="2026-11-03T10:30:00Z"), {C, CS}),
    ("checkpoint root", _set("audit_chain", "checkpoint", "root_hash", value=HEX), {P, C, CS}),
    ("checkpoint hash", _set("audit_chain", "checkpoint", "checkpoint_hash", value=HEX), {C}),
    ("signature member", _set("audit_chain", "checkpoint", "signature", "note", value="x"), {C}),
    ("signature bytes", _set("audit_chain", "checkpoint", "signature", "signature", value="A" * 86), {CS}),
]


# The exact findings of some tampers (a member list names its object; a window names its rule).
DETAILS = {
    "unknown member": (A, ["audit_chain has unknown members ['note']"]),
    "missing member": (A, ["audit_chain lacks members ['verification_hints']",
                           "verification_hints are not the decision_packet_v1 hints"]),
    "no window": (W, ["window must be an object"]),
    "window member": (W, ["window has unknown members ['note']"]),
    "no manifest": (W, ["window 21..40 is not the chain_limit window None"]),
    "chain limit": (W, ["window 21..40 is not the chain_limit window (22, 40)"]),
    "link member": (L, ["links[2] has unknown members ['note']"]),
    "link not an object": (L, ["links[2] must be an object"]),
    "no proof": (P, ["inclusion_proof must be an object"]),
    "proof member": (P, ["inclusion_proof has unknown members ['note']"]),
    "signature member": (C, ["checkpoint.signature has unknown members ['note']"]),
    "record link receipt hash": (RL, ["the link's receipt_hash is not the record's"]),
    "record link version": (RL, ["the link's policy_version is not the record's"]),
}


@pytest.mark.parametrize("name, tamper, expected", TAMPERS, ids=[case[0] for case in TAMPERS])
def test_each_tampering_fails_exactly_its_checks(name, tamper, expected):
    state, _ = run(tamper)
    assert failing(state) == expected, state.details
    assert all(state.details.get(check) for check in expected)
    assert all(state.checks[check] is True for check in set(CHAIN_NAMES) - expected - {H})
    if name in DETAILS:
        check, details = DETAILS[name]
        assert state.details[check][:len(details)] == details


def test_a_changed_link_records_the_expected_and_stated_hash_of_its_position():
    state, _ = run(_set("audit_chain", "links", 2, "created_at", value="2026-11-03T09:30:01.000Z"))
    names = [name for name in state.expected if name.startswith("audit_chain.links[")]
    assert "audit_chain.links[23].link_hash" in names
    assert all(name.startswith("audit_chain.links[23].") for name in names)
    for name in names:
        stated = chain(BASE.packet)["links"][2][name.rpartition(".")[2]]
        assert state.actual[name] == stated and _is_hex64(state.expected[name]) and state.expected[name] != stated


def test_links_and_checkpoint_given_as_read_only_mappings_verify_as_objects():
    def freeze(packet):
        excerpt = chain(packet)
        excerpt["links"] = [MappingProxyType(link) for link in excerpt["links"]]
        excerpt["checkpoint"] = MappingProxyType(excerpt["checkpoint"])
    state, source = run(freeze)
    assert failing(state) == set() and source == "server_key_registry"


def test_a_window_start_that_is_not_text_leaves_the_links_unanchored():
    state, _ = run(_set("audit_chain", "window", "previous_link_hash", value=5))
    assert failing(state) == {W, L}
    assert state.details[L] == ["the window's first link is not anchored to window.previous_* hashes"]
    state, _ = run(_set("audit_chain", "window", "previous_merkle_root", value=5))
    assert state.details[L] == ["the window's first link is not anchored to window.previous_* hashes"]


def test_a_window_from_position_2_must_be_anchored():
    second = scenario(n_exec=1, n_out=1, n_crm=1, reports=False, before=1, after=2, chain_limit=3)  # 2..4 of 4
    assert chain(second.packet)["window"]["first_position"] == 2
    assert failing(run(packet=second.packet)[0]) == set()
    state, _ = run(_set("audit_chain", "window", "previous_link_hash", value=None), packet=second.packet)
    assert failing(state) == {W, L}
    assert state.details[L] == ["the window's first link is not anchored to window.previous_* hashes"]


def test_a_record_whose_leaf_cannot_be_computed_fails_its_link_and_inclusion_and_records_no_leaf():
    record = dict(copy.deepcopy(BASE.packet["decision_record"]), record_hash=float("nan"))
    state, _ = run(record=record)
    assert failing(state) == {RL, P}
    assert state.expected["audit_chain.inclusion_proof.leaf_hash"] is None
    # An empty stated leaf is not the leaf of a record without one.
    state, _ = run(_set("audit_chain", "inclusion_proof", "leaf_hash", value=""), record=record)
    assert "leaf_hash is not the leaf of this record" in state.details[P]


def test_a_record_without_a_computable_leaf_has_no_audit_path_even_to_a_root_of_the_empty_leaf():
    record = dict(copy.deepcopy(BASE.packet["decision_record"]), record_hash=float("nan"))

    def empty_leaf_tree(packet):
        proof = chain(packet)["inclusion_proof"]
        proof.update(leaf_index=0, tree_size=1, proof=[])
        chain(packet)["checkpoint"]["root_hash"] = hashlib.sha256(b"\x00").hexdigest()

    state, _ = run(empty_leaf_tree, record=record)
    assert P in failing(state)
    assert "the audit path does not lead from the record's leaf to checkpoint.root_hash" in state.details[P]


def test_links_are_anchored_to_the_windows_previous_hashes():
    state, _ = run(_set("audit_chain", "window", "previous_link_hash", value=HEX))
    assert failing(state) == {L}


def test_the_record_link_must_equal_the_records_own_audit_chain_member():
    record = copy.deepcopy(BASE.packet["decision_record"])
    record["audit_chain"]["link_hash"] = HEX
    state, _ = run(record=record)
    assert failing(state) == {RL}
    del record["audit_chain"]
    assert failing(run(record=record)[0]) == set()


def test_a_record_of_another_decision_fails_its_link_and_inclusion():
    record = dict(BASE.packet["decision_record"], decision_id="dec_other")
    assert failing(run(record=record)[0]) == {RL, P}
    record = dict(BASE.packet["decision_record"], policy_version="2020-01-01")
    assert failing(run(record=record)[0]) == {RL}


@pytest.mark.parametrize("member", ["decision_id", "record_hash", "receipt_hash"])
def test_the_record_link_needs_text_identifiers_even_when_both_sides_lack_them(member):
    record = {k: v for k, v in BASE.packet["decision_record"].items() if k not in (member, "audit_chain")}
    state, _ = run(_drop("audit_chain", "links", 4, member), record=record)
    assert failing(state) == {L, RL, P}
    assert state.details[RL] == [f"the link's {member} is not the record's"]


def test_members_both_sides_may_lack_are_only_compared():
    # Members that may be absent on both sides (policy_id, policy_version) are only compared.
    record = {k: v for k, v in BASE.packet["decision_record"].items() if k not in ("policy_version", "audit_chain")}
    state, _ = run(_drop("audit_chain", "links", 4, "policy_version"), record=record)
    assert failing(state) == {L}


def test_a_window_that_does_not_reach_the_head_leaves_the_head_unchecked():
    short = scenario(n_exec=1, n_out=1, n_crm=1, reports=False, chain_limit=10)  # window 25..34
    state, _ = run(packet=short.packet)
    assert state.checks[H] is None
    assert failing(state) == set()
    assert all(state.checks[name] is True for name in CHAIN_NAMES if name != H)


def test_a_window_from_position_1_states_no_previous_hashes():
    first = scenario(n_exec=1, n_out=1, n_crm=1, reports=False, before=0, after=3)  # record at 1 of 4
    assert failing(run(packet=first.packet)[0]) == set()
    state, _ = run(_set("audit_chain", "window", "previous_link_hash", value=HEX), packet=first.packet)
    assert failing(state) == {W}
    state, _ = run(_set("audit_chain", "window", "previous_merkle_root", value=HEX), packet=first.packet)
    assert failing(state) == {W}


def test_an_unsigned_checkpoint_is_intact_but_not_authentic():
    state, source = run(_set("audit_chain", "checkpoint", "signature", value=None))
    assert failing(state) == {CS} and state.checks[C] is True and source is None


def test_a_checkpoint_signature_that_is_not_an_object_fails_the_checkpoint_and_names_no_key():
    state, source = run(_set("audit_chain", "checkpoint", "signature", value="sig"))
    assert failing(state) == {C} and state.checks[CS] is None and source is None
    assert state.details[C] == ["checkpoint.signature must be an object"]


def test_a_checkpoint_key_no_anchor_trusts_is_noted_not_failed():
    state, source = run(anchors=anchors((RETIRED,)))
    assert failing(state) == set() and state.checks[CS] is None and source is None
    assert state.notes and state.notes[0].startswith("checkpoint signature not checked")


def test_a_key_found_by_fingerprint_must_carry_the_stated_key_id_unless_it_has_none():
    state, _ = run(_set("audit_chain", "checkpoint", "signature", "key_id", value="key_other"))
    assert failing(state) == {CS}
    assert "checkpoint signature.key_id is not the trusted key's id" in state.details[CS]
    loose = TrustAnchors.from_public_key_pem(ACTIVE.public_key_pem)  # no key id
    state, source = run(_set("audit_chain", "checkpoint", "signature", "key_id", value="key_other"), anchors=loose)
    assert failing(state) == set() and source == "public_key_pem"


# --------------------------------------------------------------------------- step 2


def record_member_problems(record) -> tuple[bool | None, list[str]]:
    state = _State()
    _check_record_audit_chain(state, record)
    return state.checks["record_audit_chain"], state.details.get("record_audit_chain", [])


RECORD = BASE.packet["decision_record"]


def with_member(**changes):
    record = copy.deepcopy(RECORD)
    record["audit_chain"].update(changes)
    return record


def test_the_records_own_audit_chain_member_passes_and_a_record_without_one_is_not_checked():
    assert record_member_problems(RECORD) == (True, [])
    assert record_member_problems({k: v for k, v in RECORD.items() if k != "audit_chain"}) == (None, [])


@pytest.mark.parametrize("changes, problem", [
    ({"leaf_hash": HEX}, "audit_chain.leaf_hash is not the leaf of this record"),
    ({"entry_type": "checkpoint"}, "audit_chain.entry_type must be 'decision'"),
    ({"chain_position": 0}, "audit_chain.chain_position must be a positive integer"),
    ({"chain_position": "25"}, "audit_chain.chain_position must be a positive integer"),
    ({"chain_position": 25.0}, "audit_chain.chain_position must be a positive integer"),
    ({"chain_position": 1}, "at position 1 the rolling merkle_root is the leaf hash"),
    ({"link_hash": "x"}, "audit_chain.link_hash must be a sha256 hex"),
    ({"merkle_root": None}, "audit_chain.merkle_root must be a sha256 hex"),
    ({"chain_id": ""}, "audit_chain.chain_id must be a non-empty string"),
    ({"chain_id": 7}, "audit_chain.chain_id must be a non-empty string"),
])
def test_each_bad_member_is_named(changes, problem):
    assert record_member_problems(with_member(**changes)) == (False, [problem])


def test_at_position_1_the_root_is_the_leaf():
    member = RECORD["audit_chain"]
    assert record_member_problems(with_member(chain_position=1, merkle_root=member["leaf_hash"])) == (True, [])


def test_a_member_with_other_members_is_refused_before_its_values_are_read():
    record = with_member(note="x", leaf_hash=HEX)
    assert record_member_problems(record) == (False, ["decision_record.audit_chain has unknown members ['note']"])
    assert record_member_problems(dict(RECORD, audit_chain="x")) == (False, ["decision_record.audit_chain must be an object"])


def test_a_record_whose_leaf_cannot_be_computed_fails_the_leaf():
    record = dict(copy.deepcopy(RECORD), record_hash=float("nan"))
    assert record_member_problems(record) == (False, ["audit_chain.leaf_hash is not the leaf of this record"])
    record["audit_chain"]["leaf_hash"] = ""  # an empty stated leaf is not the leaf of a record without one
    assert record_member_problems(record) == (False, ["audit_chain.leaf_hash is not the leaf of this record"])


import gate.packets.chain_checks as chain_checks  # noqa: E402

STEPS = [("_check_window", W), ("_check_chain_links", L), ("_check_record_link", RL), ("_check_head", H),
         ("_check_inclusion", P), ("_check_checkpoint", C)]


@pytest.mark.parametrize("function, check", STEPS)
def test_a_chain_step_that_raises_fails_closed_under_its_own_name(monkeypatch, function, check):
    def explode(*_args, **_kwargs):
        raise RuntimeError("surprise")

    monkeypatch.setattr(chain_checks, function, explode)
    state, _ = run()
    assert {name for name, ok in state.checks.items() if ok is False} == {check}
    assert state.details[check] == ["could not be checked (RuntimeError)"]
