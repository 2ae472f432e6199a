"""Promoting a rulebook binds a new immutable snapshot through the service layer."""

from __future__ import annotations

import copy

import pytest

from gate.errors import GateError
from gate.keys.config import SigningSetup
from gate.ledger import Ledger
from gate.services.root import decision_services


@pytest.fixture
def service(backend, database_url, gate_env):
    from gate.settings import Settings

    settings = Settings.from_env(gate_env)
    signing = SigningSetup.load(settings.signing_key_file, settings.hmac_secret, settings.hmac_key_id,
                                settings.require_signing)
    ledger = Ledger(database_url)
    yield decision_services(ledger, signing, releases=False).decisions
    ledger.dispose()


def test_promotion_binds_a_new_current_version(service, sample_rulebook):
    registry, created = service.register_rulebook("acme", sample_rulebook)
    assert created and registry["rulebook_id"] == sample_rulebook["rulebook_id"]
    draft = copy.deepcopy(sample_rulebook)
    draft["version"] = "2026-12-01"
    draft["rules"][0]["condition"]["value"] = 30
    registry2, created2 = service.register_rulebook("acme", draft)
    assert created2 and registry2["version"] == "2026-12-01"
    current = service.ledger.latest_rulebook_snapshot("acme", sample_rulebook["rulebook_id"])
    assert current["version"] == "2026-12-01"
    assert service.ledger.rulebook_ids("acme") == [sample_rulebook["rulebook_id"]]
    # Another scope sees nothing of it.
    assert service.ledger.latest_rulebook_snapshot("other", sample_rulebook["rulebook_id"]) is None


def test_promoting_the_same_content_again_is_a_no_op(service, sample_rulebook):
    first, _ = service.register_rulebook("acme", sample_rulebook)
    again, created = service.register_rulebook("acme", sample_rulebook)
    assert created is False and again == first


def test_changed_content_under_a_bound_version_is_refused(service, sample_rulebook):
    service.register_rulebook("acme", sample_rulebook)
    changed = copy.deepcopy(sample_rulebook)
    changed["rules"][0]["condition"]["value"] = 99
    with pytest.raises(GateError) as refused:
        service.register_rulebook("acme", changed)
    assert refused.value.code == "RULEBOOK_VERSION_CONFLICT"
    stored = service.ledger.rulebook_snapshot("acme", rulebook_id=changed["rulebook_id"],
                                              version=changed["version"])
    assert '"value":25' in stored["body_json"]


@pytest.mark.parametrize("bad", [[], {"schema_version": "rulebook_v1"}])
def test_an_invalid_draft_binds_nothing(service, bad):
    with pytest.raises(GateError) as refused:
        service.register_rulebook("acme", bad)
    assert refused.value.code == "RULEBOOK_INVALID"
    assert service.ledger.rulebook_ids("acme") == []
