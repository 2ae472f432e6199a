"""Settings read from the environment: the request read timeout (issue 6, defect 9)."""

from __future__ import annotations

import pytest

from gate.settings import Settings, SettingsError


def test_the_read_timeout_defaults_to_ten_seconds_and_accepts_fractions(tmp_path):
    assert Settings.from_env({"GATE_HOME": str(tmp_path)}).request_read_timeout == 10.0
    env = {"GATE_HOME": str(tmp_path), "GATE_REQUEST_READ_TIMEOUT": "2.5"}
    assert Settings.from_env(env).request_read_timeout == 2.5


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "601", "ten", ""])
def test_an_unusable_read_timeout_refuses_to_start(tmp_path, value):
    with pytest.raises(SettingsError, match="GATE_REQUEST_READ_TIMEOUT"):
        Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_REQUEST_READ_TIMEOUT": value})


def test_the_checkpoint_log_defaults_under_gate_home_and_can_be_moved_or_turned_off(tmp_path):
    """Issue 18 item 4: the gate's own witness log of checkpoints (docs/verification.md §7.4)."""
    settings = Settings.from_env({"GATE_HOME": str(tmp_path)})
    assert settings.checkpoint_log == tmp_path.resolve() / "checkpoints.jsonl" and settings.checkpoint_every == 100
    moved = Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_CHECKPOINT_LOG": str(tmp_path / "w" / "c.jsonl"),
                               "GATE_CHECKPOINT_EVERY": "0"})
    assert moved.checkpoint_log == (tmp_path / "w" / "c.jsonl").resolve() and moved.checkpoint_every == 0
    assert Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_CHECKPOINT_LOG": "OFF"}).checkpoint_log is None


@pytest.mark.parametrize("value", ["-1", "1000001", "ten", "", "1.5"])
def test_an_unusable_checkpoint_cadence_refuses_to_start(tmp_path, value):
    with pytest.raises(SettingsError, match="GATE_CHECKPOINT_EVERY"):
        Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_CHECKPOINT_EVERY": value})


def test_the_events_lease_defaults_to_a_minute_and_refuses_what_it_cannot_use(tmp_path):
    """A dead dispatcher's lease on a subscription expires after GATE_EVENTS_LEASE_SECONDS."""
    assert Settings.from_env({"GATE_HOME": str(tmp_path)}).events_lease_seconds == 60
    assert Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_EVENTS_LEASE_SECONDS": "10"}).events_lease_seconds == 10
    for value in ("0", "3601", "1.5", "ten"):
        with pytest.raises(SettingsError, match="GATE_EVENTS_LEASE_SECONDS"):
            Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_EVENTS_LEASE_SECONDS": value})


def test_the_events_concurrency_defaults_to_eight_and_refuses_what_it_cannot_use(tmp_path):
    """GATE_EVENTS_CONCURRENCY: the delivery threads of a dispatcher (one scope gets half)."""
    assert Settings.from_env({"GATE_HOME": str(tmp_path)}).events_concurrency == 8
    assert Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_EVENTS_CONCURRENCY": "2"}).events_concurrency == 2
    for value in ("0", "65", "1.5", "many"):
        with pytest.raises(SettingsError, match="GATE_EVENTS_CONCURRENCY"):
            Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_EVENTS_CONCURRENCY": value})


def test_the_worker_timeout_defaults_to_thirty_seconds_and_reaches_gunicorn(tmp_path):
    """`GATE_WORKER_TIMEOUT`: how long a serving worker's loop may go silent before gunicorn's
    arbiter restarts it (the unread-close tests run with 10 s to prove no stall in less time)."""
    from api.serving import GateServer

    assert Settings.from_env({"GATE_HOME": str(tmp_path)}).worker_timeout == 30
    settings = Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_WORKER_TIMEOUT": "12"})
    assert settings.worker_timeout == 12
    assert GateServer(settings, "127.0.0.1", 0, workers=1).cfg.timeout == 12
    assert GateServer(Settings.from_env({"GATE_HOME": str(tmp_path)}), "127.0.0.1", 0, workers=1).cfg.timeout == 30


@pytest.mark.parametrize("value", ["4", "3601", "0", "-1", "ten", "", "7.5"])
def test_an_unusable_worker_timeout_refuses_to_start(tmp_path, value):
    with pytest.raises(SettingsError, match="GATE_WORKER_TIMEOUT must be a whole number from 5 to 3600"):
        Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_WORKER_TIMEOUT": value})
