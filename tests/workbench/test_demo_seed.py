"""`gate demo seed`'s library: a deterministic ledger written through the real services
(signed, chained, verifiable), refusing a ledger that already holds decisions."""

from __future__ import annotations

import json

import pytest

from gate.keys.config import SigningSetup
from gate.keys.signing import generate_keyring
from gate.ledger import Ledger, stream
from gate.verify import verify_record
from workbench.demo import scenario as S
from workbench.demo.seed import SeedError, seed_ledger, seed_ledger_at


@pytest.fixture
def signing(tmp_path):
    path = tmp_path / "keys.json"
    generate_keyring(path, "2026-01-01T00:00:00.000Z")
    return SigningSetup.load(path, None, "hmac")


def history(url: str) -> tuple[list, list]:
    ledger = Ledger(url)
    try:
        decisions = [(row["decision_id"], row["scope"], row["created_at"], row["verdict"], row["policy_version"],
                      json.loads(row["request_json"])["context"]["inputs"])
                     for batch in stream.iter_decisions(ledger) for row in batch]
        receipts = [(row["decision_id"], kind, row["reported_at"], json.loads(row["receipt_json"]).get(
                     {"execution": "execution_status", "outcome": "outcome_status", "crm_sync": "sync_status"}[kind]))
                    for kind in stream.RECEIPT_KINDS for batch in stream.iter_receipts(ledger, kind) for row in batch]
        return decisions, receipts
    finally:
        ledger.dispose()


def test_same_seed_same_ledger_other_seed_other_ledger(tmp_path, signing):
    urls = [f"sqlite:///{tmp_path / name}.db" for name in ("a", "b", "c")]
    progress = []
    # 40 decisions already span five scopes, the three verdicts and all six months (seed 11);
    # three ledgers of them take half the time 80 did.
    first = seed_ledger_at(urls[0], signing, decisions=40, seed=11, progress=lambda d, t: progress.append((d, t)))
    seed_ledger_at(urls[1], signing, decisions=40, seed=11)
    seed_ledger_at(urls[2], signing, decisions=40, seed=12)
    a, b, c = history(urls[0]), history(urls[1]), history(urls[2])
    assert a == b
    assert a[0] != c[0]
    assert first.decisions == 40 == len(a[0]) and first.receipts == len(a[1]) > 40
    assert progress[0] == (0, 40 + first.receipts) and progress[-1] == (40 + first.receipts,) * 2
    assert {row[1] for row in a[0]} <= set(S.SCOPES) and len({row[1] for row in a[0]}) >= 4
    assert {row[3] for row in a[0]} == {"yes", "no", "review"}
    months = {row[2][:7] for row in a[0]}
    assert len(months) >= 5 and min(months) == "2026-05"


def test_seeded_records_are_signed_chained_and_verify(tmp_path, signing):
    url = f"sqlite:///{tmp_path / 'seed.db'}"
    seed_ledger_at(url, signing, decisions=40, seed=3)
    ledger = Ledger(url)
    try:
        rows = [row for batch in stream.iter_decisions(ledger) for row in batch]
        for row in rows[:10]:
            record = json.loads(row["record_json"])
            result = verify_record(record, anchors=signing.trust_anchors(),
                                   original_input=json.loads(row["request_json"]))
            assert result.integrity_valid and result.authenticity_valid, result.to_dict()
        heads = {head["scope"]: head["size"] for head in stream.chain_heads_of(ledger)}
        for scope, size in heads.items():
            positions = sorted(row["chain_position"] for row in rows if row["scope"] == scope)
            assert positions == list(range(1, size + 1))
        with pytest.raises(SeedError, match="already holds decisions"):
            seed_ledger(ledger, signing, decisions=5)
        assert sum(heads.values()) == 40
    finally:
        ledger.dispose()


@pytest.mark.parametrize("kwargs, message", [({"decisions": 0}, "decisions"), ({"decisions": "9"}, "decisions"),
                                             ({"seed": -1}, "seed")])
def test_bad_arguments_write_nothing(tmp_path, signing, kwargs, message):
    url = f"sqlite:///{tmp_path / 'bad.db'}"
    with pytest.raises(SeedError, match=message):
        seed_ledger_at(url, signing, **kwargs)
    assert history(url) == ([], [])


def test_unsigned_gate_is_refused(tmp_path):
    with pytest.raises(SeedError, match="signing"):
        seed_ledger_at(f"sqlite:///{tmp_path / 'x.db'}", SigningSetup(None, None), decisions=3)


def test_seeded_holds_are_resolved_by_reviewers_or_expired_and_verify(tmp_path, signing):
    from gate.holds.events import hold_events_problems
    from gate.ledger.holds import HoldLedger
    from workbench.demo.seed import DEMO_ISSUER

    url = f"sqlite:///{tmp_path / 'holds.db'}"
    # 60 decisions of seed 5 hold 23 reviews: approved, denied and expired ones, none left open
    # (a fifth of the 300 this wrote before, the same three kinds of hold chain).
    seed_ledger_at(url, signing, decisions=60, seed=5)
    ledger = Ledger(url)
    try:
        holds = HoldLedger(ledger)
        records = {row["decision_id"]: json.loads(row["record_json"])
                   for batch in stream.iter_decisions(ledger) for row in batch}
        held = [r for r in records.values() if r["verdict"] == "review"]
        states: dict[str, int] = {}
        for record in held:
            scope = next(s for s in ("demo", "acme-retail", "globex-saas", "initech-finance", "umbrella-health")
                         if holds.hold(s, record["decision_id"]))
            row = holds.hold(scope, record["decision_id"])
            states[row["state"]] = states.get(row["state"], 0) + 1
            events = holds.events_of(scope, record["decision_id"])
            assert hold_events_problems(record, events, signing.trust_anchors()) == []
            if row["state"] in ("approved", "denied"):
                assert events[-1]["principal"]["issuer"] == DEMO_ISSUER
        assert len(held) == sum(states.values()) and set(states) == {"approved", "denied", "expired"}
    finally:
        ledger.dispose()


def test_seed_beside_a_live_gate_whose_sweeper_runs(gate_env, make_app, issue_key):
    """Issue 53 (defect 5): a live gate on the same ledger sweeps its holds with the real clock
    while the seed writes six backdated months, every deadline of which has passed. The seed
    writes each hold closed in one transaction, so the sweeper never finds one of its holds open
    before its reviewer resolves it: the seed succeeds, and its hold chains and held packets verify."""
    import threading
    from pathlib import Path

    from gate.holds.history import verify_hold_history

    signing = SigningSetup.load(Path(gate_env["GATE_SIGNING_KEY_FILE"]), None, "hmac")
    gate = make_app()
    holds = gate.extensions["gate"].holds  # the live gate's hold service, on the system clock
    stop, passes = threading.Event(), []

    def sweeper() -> None:
        while not stop.is_set():
            passes.append(holds.sweep())
            stop.wait(0.005)

    thread = threading.Thread(target=sweeper, daemon=True)
    thread.start()
    try:
        seeded = seed_ledger_at(gate_env["GATE_DATABASE_URL"], signing, decisions=60, seed=5)
    finally:
        stop.set()
        thread.join(30)
    assert seeded.decisions == 60 and len(passes) > 10
    client = gate.test_client()
    anchors = signing.trust_anchors()
    one_of_each: dict[str, tuple[str, str]] = {}  # state -> (key, decision id)
    for scope in S.SCOPES:
        key = issue_key(scope=scope)["api_key"]
        answer = client.get("/api/holds/history", headers={"x-api-key": key})
        assert answer.status_code == 200, answer.get_json()
        check = verify_hold_history(answer.get_json(), anchors)
        assert check.valid and check.signatures_checked, (scope, check.problems)
        for hold in client.get("/api/holds?state=all&limit=200", headers={"x-api-key": key}).get_json()["holds"]:
            one_of_each.setdefault(hold["state"], (key, hold["decision_id"]))
    assert {"approved", "denied", "expired"} <= set(one_of_each)
    for state, (key, decision_id) in one_of_each.items():
        packet = client.get(f"/api/decision/{decision_id}/packet", headers={"x-api-key": key}).get_json()
        result = client.post("/api/decision/packet/verify", json={"packet": packet}).get_json()
        assert result["verified"] is True, (state, result["failed_checks"])
