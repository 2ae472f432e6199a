"""Attempts to get past the adapter worker's capability hook (review): each one comes from a test
adapter that tries it on purpose (tests/adapters/fixtures/escapes.py) and leaves a trace when it
works (a file at `path`, or a secret returned as `leak`). Every attempt must end as 500
TRUSTED_ADAPTER_CAPABILITY_DENIED with no trace, through the real worker process and through
`POST /api/decide`."""

from __future__ import annotations

import importlib.util
import os

import pytest

from gate.adapters import AdapterRegistry
from gate.adapters.executor import WorkerPool
from gate.errors import GateError
from tests.adapters.support import (
    GENEROUS_TIMEOUT_MS,
    adapter_request,
    decide,
    escapes,
    generous_time_budget,
    invocation,
    sample,
)

SECRET = "gate-secret-" + "k" * 24


@pytest.fixture(scope="module")
def registry():
    """Workers with a generous time budget: the refusal a test is about strikes, never the
    1,000 ms budget first on a loaded host (issue 53, defect 6)."""
    registry = AdapterRegistry([escapes()], pool=WorkerPool(size=1, memory_mb=256, timeout_ms=GENEROUS_TIMEOUT_MS))
    yield registry
    registry.pool.close()


@pytest.fixture(scope="module")
def timed_registry():
    """The production budget (1,000 ms), for the time limit's own test."""
    registry = AdapterRegistry([escapes()], pool=WorkerPool(size=1, memory_mb=256))
    yield registry
    registry.pool.close()


def run(registry, mode, **extra):
    return registry.run(invocation(registry.get("test.escapes", "1.0.0"), {"mode": mode, **extra}))


def denied(registry, mode, **extra) -> GateError:
    with pytest.raises(GateError) as caught:
        run(registry, mode, **extra)
    assert caught.value.code == "TRUSTED_ADAPTER_CAPABILITY_DENIED", caught.value.details
    return caught.value


@pytest.mark.parametrize("mode", [
    "rebind_worker_globals",  # was: the hook read its deny lists from rebindable module globals
    "rebind_builtins",
    "forge_then_deny",
    "posixsubprocess",        # was: fork+exec with no audit event (and RLIMIT_NPROC does not bind root)
    "cffi",                   # was: native calls with no audit event
    "subinterpreter",
    "multiprocessing",
])
def test_escapes_that_would_create_a_file_are_denied_and_create_nothing(registry, tmp_path, mode):
    if mode == "cffi" and importlib.util.find_spec("cffi") is None:
        pytest.skip("cffi is not installed")
    target = tmp_path / "escaped"
    denied(registry, mode, path=str(target))
    assert not target.exists()


def test_a_denial_cannot_be_caught_and_followed_by_a_forged_clean_result(registry):
    error = denied(registry, "forge_after_denial")
    assert error.details["capabilities"] == ["socket.__new__"]


@pytest.mark.parametrize("mode,capability", [
    ("native_extension", "import"),
    ("testcapi", "import"),
    ("testcapi_renamed", "import"),
    ("gc_hook", "gc.get_objects"),
])
def test_native_back_doors_and_the_collector_are_refused(registry, mode, capability):
    if mode == "native_extension" and importlib.util.find_spec("rpds") is None:
        pytest.skip("no third-party C extension to try")
    if mode.startswith("testcapi") and importlib.util.find_spec("_testcapi") is None:
        pytest.skip("this Python has no _testcapi")
    assert denied(registry, mode).details["capabilities"] == [capability]


@pytest.mark.parametrize("mode", ["read_file", "read_pathlike", "read_dotdot"])
def test_files_outside_the_code_cannot_be_read(registry, tmp_path, mode):
    keyfile = tmp_path / "receipt-signing.key"  # a key file, the ledger database, ...
    keyfile.write_text(SECRET)
    error = denied(registry, mode, path=str(keyfile))
    assert error.details["capabilities"] == ["open"]
    assert SECRET not in repr(error.details)


def test_the_gate_process_environment_cannot_be_read(registry):
    error = denied(registry, "read_parent_environment")
    assert error.details["capabilities"] == ["open"]


def test_the_adapter_still_reads_its_own_directory_and_imports_the_standard_library(registry):
    with open(os.path.join(os.path.dirname(escapes().filename), "probe.py")) as probe:
        expected = len(probe.read())
    assert run(registry, "read_own_directory").output == {"result": expected}


def test_a_loop_inside_c_code_is_killed_at_the_budget(timed_registry):
    with pytest.raises(GateError) as caught:
        run(timed_registry, "c_level_loop")
    assert caught.value.code == "TRUSTED_ADAPTER_EXECUTION_TIMEOUT"


def test_an_oversized_result_is_refused_before_it_is_parsed(registry):
    with pytest.raises(GateError) as caught:
        run(registry, "huge_output")
    assert caught.value.code == "TRUSTED_ADAPTER_OUTPUT_INVALID"


@pytest.mark.parametrize("mode", ["forge_after_denial", "rebind_worker_globals"])
def test_through_http_an_escape_attempt_is_500_and_stores_nothing(app, client, api_key, tmp_path, mode):
    generous_time_budget(app)
    adapter = app.extensions["gate"].service.adapters.register(escapes())
    target = tmp_path / "escaped"
    key = f"escape-{mode}"
    response = decide(client, api_key, adapter_request(adapter, {"mode": mode, "path": str(target)}),
                      **{"x-idempotency-key": key})
    assert response.status_code == 500 and response.json["error"] == "TRUSTED_ADAPTER_CAPABILITY_DENIED"
    assert "record_hash" not in response.json and response.json["c"] == "unclear"
    assert not target.exists()
    # the idempotency key of the refused request is still free: nothing was stored
    again = decide(client, api_key, sample("pricing-margin"), **{"x-idempotency-key": key})
    assert again.status_code == 200 and again.headers["x-idempotency-status"] == "created"
