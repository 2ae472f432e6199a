"""`LiveSigning`: the keyring file followed at a bounded interval, never replaced by a broken one."""

from __future__ import annotations

import os

import pytest

from gate.keys import config as keyconfig
from gate.keys.config import LiveSigning
from gate.keys.signing import generate_keyring, rotate_keyring

T0 = "2026-11-01T00:00:00.000Z"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def counted_stats(monkeypatch):
    calls = []
    real = keyconfig.file_identity

    def counting(path):
        calls.append(path)
        return real(path)

    monkeypatch.setattr(keyconfig, "file_identity", counting)
    return calls


def test_the_file_is_checked_at_most_once_per_interval(tmp_path, counted_stats):
    path = tmp_path / "keys.json"
    first = generate_keyring(path, T0).active.key_id
    clock = Clock()
    live = LiveSigning(path, None, "h", check_interval=1.0, monotonic=clock)
    counted_stats.clear()
    for _ in range(1000):  # the decide path: no stat while the interval runs
        assert live.receipt_signer().key_id == first
    assert counted_stats == []
    rotated = rotate_keyring(path, "2026-11-02T00:00:00.000Z").active.key_id
    clock.now += 0.999
    assert live.receipt_signer().key_id == first and counted_stats == []
    clock.now += 0.002
    assert live.receipt_signer().key_id == rotated and len(counted_stats) == 1
    assert {e["key_id"]: e["status"] for e in live.registry_entries()} == {rotated: "active", first: "retired"}
    assert live.anchors is live.current().anchors  # the new keyring's anchors, with the retired key


def test_a_broken_or_missing_file_never_replaces_a_working_keyring(tmp_path, caplog):
    path = tmp_path / "keys.json"
    first = generate_keyring(path, T0).active.key_id
    clock = Clock()
    live = LiveSigning(path, None, "h", check_interval=0.5, monotonic=clock)
    path.write_text("{not json")
    clock.now += 1
    assert live.receipt_signer().key_id == first and live.ready()
    assert "not usable" in caplog.text and "PRIVATE KEY" not in caplog.text
    os.unlink(path)
    clock.now += 1
    assert live.receipt_signer().key_id == first
    fresh = generate_keyring(path, T0).active.key_id  # a good file again: taken
    clock.now += 1
    assert live.receipt_signer().key_id == fresh


def test_a_worker_without_keys_picks_up_a_new_keyring(tmp_path):
    path = tmp_path / "keys.json"
    clock = Clock()
    live = LiveSigning(path, None, "h", check_interval=0.25, monotonic=clock)
    assert not live.ready() and "does not exist" in live.problem and "gate keys signing-init" in live.fix
    key_id = generate_keyring(path, T0).active.key_id
    assert not live.ready()  # not before the interval
    clock.now += 0.25
    assert live.ready() and live.receipt_signer().key_id == key_id and live.problem is None and live.fix is None


def test_a_pinned_request_signs_with_one_keyring(tmp_path):
    path = tmp_path / "keys.json"
    first = generate_keyring(path, T0).active.key_id
    clock = Clock()
    live = LiveSigning(path, None, "h", check_interval=0.1, monotonic=clock)
    token = live.pin()
    rotate_keyring(path, "2026-11-02T00:00:00.000Z")
    clock.now += 1
    assert live.receipt_signer().key_id == first and live.attestation_key().key_id == first
    live.unpin(token)
    assert live.receipt_signer().key_id != first


def test_zero_interval_never_reloads(tmp_path, counted_stats):
    path = tmp_path / "keys.json"
    first = generate_keyring(path, T0).active.key_id
    clock = Clock()
    live = LiveSigning(path, None, "h", check_interval=0, monotonic=clock)
    rotate_keyring(path, "2026-11-02T00:00:00.000Z")
    clock.now += 3600
    counted_stats.clear()
    assert live.receipt_signer().key_id == first and counted_stats == []


@pytest.mark.parametrize("value", ["-1", "3600001", "soon", "1.5", ""])
def test_the_check_interval_setting_is_validated(tmp_path, value):
    from gate.settings import Settings, SettingsError

    with pytest.raises(SettingsError, match="GATE_SIGNING_KEY_CHECK_MS"):
        Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_SIGNING_KEY_CHECK_MS": value})
    assert Settings.from_env({"GATE_HOME": str(tmp_path)}).signing_key_check_ms == 1000
