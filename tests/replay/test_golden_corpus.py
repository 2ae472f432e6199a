"""The published golden replay corpus replays historically with zero drift; tampering is caught."""

from __future__ import annotations

import json
import shutil

import pytest

from gate.replay.golden import (
    CORPUS_DIR,
    CorpusError,
    load_corpus,
    replay_corpus,
    replay_fixture,
)


def test_the_published_corpus_replays_with_zero_drift():
    result = replay_corpus()
    assert result["ok"] and result["unexpected_drift"] == []
    assert result["replay_label"] == "historical_rulebook_replay_v1"
    assert len(result["fixtures"]) >= 10
    for fixture in result["fixtures"]:
        assert fixture["replay_status"] == "matched" and fixture["drift_fields"] == []
        assert all(fixture["compared"].values())


def test_the_corpus_covers_every_outcome_path():
    index, fixtures = load_corpus()
    assert index["corpus_version"] == "rulebook_v1_golden_replay_v1"
    outcomes = {(f.expected_record["verdict"], f.expected_record["status"]) for f in fixtures}
    assert {("yes", "ok"), ("no", "ok"), ("review", "ok"), ("review", "needs_input")} <= outcomes
    assert any(f.expected_record["matched_rule_id"] is None and f.expected_record["status"] == "ok" for f in fixtures)
    assert len({f.rulebook_id for f in fixtures}) >= 3


def _copy(tmp_path):
    target = tmp_path / "corpus"
    shutil.copytree(CORPUS_DIR, target)
    return target


def test_an_edited_fixture_is_refused_by_its_index_hash(tmp_path):
    corpus = _copy(tmp_path)
    path = corpus / "fixtures" / "pricing-approve.json"
    path.write_text(path.read_text().replace('"APPROVE"', '"BLOCK"', 1))
    with pytest.raises(CorpusError, match="sha256"):
        load_corpus(corpus)


def test_a_changed_expected_record_is_drift(tmp_path):
    _, fixtures = load_corpus()
    fixture = next(f for f in fixtures if f.fixture_id == "pricing-approve")
    record = dict(fixture.expected_record, verdict="no", record_hash="0" * 64)
    changed = type(fixture)(fixture.fixture_id, fixture.description, fixture.request_text, fixture.snapshot, record)
    result = replay_fixture(changed)
    assert result["replay_status"] == "drifted" and result["drift_fields"] == ["verdict"]
    assert result["compared"] == {"verdict": False, "evidence": True, "record_hash": False, "policy_bundle_hash": True}


def test_a_changed_request_text_is_unavailable_input(tmp_path):
    _, fixtures = load_corpus()
    fixture = fixtures[0]
    changed = type(fixture)(fixture.fixture_id, fixture.description, fixture.request_text.replace("15", "16", 1),
                            fixture.snapshot, fixture.expected_record)
    assert replay_fixture(changed)["error"]["code"] == "REPLAY_INPUT_UNAVAILABLE"


def test_the_corpus_is_served_byte_for_byte(client):
    index = client.get("/schemas/golden-replay/index.json")
    assert index.status_code == 200 and index.data == (CORPUS_DIR / "index.json").read_bytes()
    for entry in json.loads(index.data)["fixtures"]:
        served = client.get("/schemas/golden-replay/" + entry["path"])
        assert served.data == (CORPUS_DIR / entry["path"]).read_bytes()
