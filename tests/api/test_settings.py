"""Settings read from the environment: the request read timeout (issue 6, defect 9)."""

from __future__ import annotations

import pytest

from api.settings import Settings, SettingsError


def test_the_read_timeout_defaults_to_ten_seconds_and_accepts_fractions(tmp_path):
    assert Settings.from_env({"GATE_HOME": str(tmp_path)}).request_read_timeout == 10.0
    env = {"GATE_HOME": str(tmp_path), "GATE_REQUEST_READ_TIMEOUT": "2.5"}
    assert Settings.from_env(env).request_read_timeout == 2.5


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "601", "ten", ""])
def test_an_unusable_read_timeout_refuses_to_start(tmp_path, value):
    with pytest.raises(SettingsError, match="GATE_REQUEST_READ_TIMEOUT"):
        Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_REQUEST_READ_TIMEOUT": value})
