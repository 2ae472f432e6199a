"""Shared fixtures: apps on a fresh SQLite ledger (always) or PostgreSQL (where it answers).

`gate_app(backend=...)` builds a real app through `create_app` (`gate_cli.served_app`: the API
with the workbench's report engines, as `gate serve` builds it) with its own home folder,
generated Ed25519 keyring and ledger; `api_key(...)` issues keys through the same code as
`gate keys create`. PostgreSQL tests use a throw-away database created for the session.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

# One home for the property tests' settings: no per-example wall-clock deadline. The suite runs on
# two shared cores beside PostgreSQL, browsers and servers, where an example's time measures the
# host's load, not the code (a record-text property failed a combined run by its 200 ms default and
# passed alone); budgets that matter are benchmarks (benchmarks/), never a test's clock.
hypothesis_settings.register_profile("gate", deadline=None)
hypothesis_settings.load_profile("gate")

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN_URL = os.environ.get("GATE_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test")
SAMPLE_REQUEST = ROOT / "gate" / "data" / "requests" / "pricing-exception.json"
SAMPLE_RULEBOOK = ROOT / "gate" / "data" / "rulebooks" / "pricing-exception.json"


def _pg_available() -> bool:
    try:
        import psycopg

        with psycopg.connect(PG_ADMIN_URL, connect_timeout=2):
            return True
    except Exception:  # noqa: BLE001 - whatever fails, PostgreSQL does not answer here
        return False


PG_AVAILABLE = _pg_available()
# The tests' own receivers (Slack, SMTP, the OpenID Connect providers) listen on loopback: every
# outbound request refuses an internal host unless the operator names it (gate.events.outbound).
# Set here for the in-process workbench and the processes the tests start; each gate environment
# names it too (gate_environment), and the tests of the refusal take it away.
os.environ.setdefault("GATE_OUTBOUND_ALLOW_HOSTS", "127.0.0.1,localhost")

# Under mutation testing (scripts/mutation sets GATE_MUTATION_EXAMPLES) every property test runs
# at most that many examples, derandomized and without the example database: a mutant must get
# the same verdict on every run, and the per-mutant run stays short. The example tests carry the
# sharp assertions; the properties are a second net. A failing example is not shrunk (nor
# explained): mutmut reads only whether the test failed, and shrinking a generated rulebook ran
# past mutmut's timeout (a mutant then counted as a timeout after 20 s or more instead of a kill
# in one). Not set in the default test command.
MUTATION_EXAMPLES = int(os.environ.get("GATE_MUTATION_EXAMPLES", "0") or 0)


@pytest.fixture(autouse=True)
def _fresh_evaluators_under_mutation():
    """Under mutation, each test compiles its rulebooks anew: mutmut forks every mutant's run
    from a process whose evaluator cache the unmutated compiler filled."""
    if MUTATION_EXAMPLES:
        from gate.rulebook.cache import clear_cache

        clear_cache()
    yield


def pytest_configure(config):
    """The run's shared folder (`tests.demo_support.SHARED_ENV`): made by the controller, or by a
    run without workers, before any worker starts, so every worker inherits its name and what one
    builds there (the seeded demo home) the others copy instead of building again."""
    from tests.demo_support import SHARED_ENV

    if not hasattr(config, "workerinput"):
        import tempfile

        config.gate_shared = tempfile.mkdtemp(prefix="gate-tests-shared-")
        os.environ[SHARED_ENV] = config.gate_shared


def pytest_unconfigure(config):
    """Remove the run's shared folder once every worker has finished (the controller unconfigures last)."""
    if shared := getattr(config, "gate_shared", None):
        shutil.rmtree(shared, ignore_errors=True)


_FREEZE_BEFORE = frozenset({1, 2, 11, 101})  # the tests (1-based, per worker) before which the view is frozen
_started = [0]


def pytest_runtest_logstart(nodeid, location):
    """The collector's view of everything alive is frozen before a worker's 1st, 2nd, 11th and
    101st test, as a server worker freezes it once its app is built (`api.serving`): what the
    first tests import (the collation tables, the format grammars, the ORM's compiled statements,
    about 300,000 objects in all) lives as long as the process, and each full collection walked it
    all again. The earlier test's own objects are gone by then (a full collection runs first);
    what a module's or the session's fixtures hold at that moment stays in the frozen part, never
    collected (at most four such sets a worker, which those fixtures keep alive anyway for as long
    as they serve). What a later test makes is collected as before. A run of the API's decide tests in one process
    took 13.3 s of CPU against 15.3-15.4 s with nothing frozen (two rounds each, alternating)."""
    _started[0] += 1
    if _started[0] in _FREEZE_BEFORE:
        import gc

        gc.collect()
        gc.freeze()


def pytest_collection_modifyitems(config, items):
    if not MUTATION_EXAMPLES:
        return
    from hypothesis import Phase, settings

    for item in items:
        test = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        current = getattr(test, "_hypothesis_internal_use_settings", None)
        if current is not None:
            test._hypothesis_internal_use_settings = settings(
                current, max_examples=min(current.max_examples, MUTATION_EXAMPLES),
                derandomize=True, database=None, deadline=None,
                phases=[phase for phase in current.phases if phase not in (Phase.shrink, Phase.explain)])


@pytest.fixture(scope="session")
def pg_database():
    """A fresh PostgreSQL database for this test session (dropped at the end)."""
    if not PG_AVAILABLE:
        pytest.skip("PostgreSQL does not answer at " + PG_ADMIN_URL)
    import psycopg

    name = f"gate_test_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + "/" + name
    from gate.ledger import Ledger

    ledger = Ledger(url)
    ledger.upgrade()
    ledger.dispose()
    yield url
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _truncate_pg(url: str) -> None:
    """Empty every table of the session's PostgreSQL ledger and restart its sequences, as a fresh
    ledger has them. `DELETE`, not `TRUNCATE`: a test leaves a few rows, which `DELETE` removes in
    8-10 ms where `TRUNCATE` (a new file per table) took 55-65 ms, before each of about 500 tests.
    Children first; the outbox's day partitions are emptied through their parent."""
    import psycopg

    from gate.ledger.tables import metadata

    with psycopg.connect(url, autocommit=True) as connection:
        sequences = [row[0] for row in connection.execute(
            "SELECT sequence_name FROM information_schema.sequences WHERE sequence_schema = 'public'")]
        connection.execute("; ".join([f'DELETE FROM "{table.name}"' for table in reversed(metadata.sorted_tables)]
                                     + [f'ALTER SEQUENCE "{name}" RESTART' for name in sequences]).encode())


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory):
    """An upgraded SQLite ledger file, copied for each test (faster than migrating each time)."""
    from gate.ledger import Ledger

    path = tmp_path_factory.mktemp("template") / "gate.db"
    ledger = Ledger(f"sqlite:///{path}")
    ledger.upgrade()
    ledger.dispose()
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request):
    """Parametrize a test over both ledgers (PostgreSQL skipped where it does not answer)."""
    return request.param


@pytest.fixture
def database_url(request, tmp_path, sqlite_template):
    """SQLite by default; PostgreSQL when the test also uses the `backend` fixture with that value."""
    kind = request.getfixturevalue("backend") if "backend" in request.fixturenames else "sqlite"
    if kind == "postgresql":
        url = request.getfixturevalue("pg_database")
        _truncate_pg(url)
        return url
    path = tmp_path / "gate.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite:///{path}"


def gate_environment(home: Path, database_url: str) -> dict[str, str]:
    """A gate process's environment over `home` (created, with a generated signing keyring) and
    the ledger at `database_url`."""
    from gate.keys.signing import generate_keyring

    home.mkdir()
    keyring = home / "signing-keys.json"
    generate_keyring(keyring, "2026-11-01T00:00:00.000Z")
    return {
        "GATE_HOME": str(home),
        "GATE_DATABASE_URL": database_url,
        "GATE_SIGNING_KEY_FILE": str(keyring),
        "GATE_POLICY_DIR": str(ROOT / "gate" / "data" / "rulebooks"),
        # the tests' own receivers (Slack, SMTP, OpenID Connect provider) listen on loopback
        "GATE_OUTBOUND_ALLOW_HOSTS": "127.0.0.1,localhost",
    }


@pytest.fixture
def gate_env(tmp_path, database_url):
    """Environment for a gate process or app: its own home, ledger and signing keyring."""
    return gate_environment(tmp_path / "home", database_url)


@pytest.fixture
def make_app(gate_env):
    """Build apps on this test's ledger; keyword overrides change Settings fields."""
    from gate.settings import Settings
    from gate_cli.served_app import create_app

    apps = []

    def factory(env: dict | None = None, *, clock=None, policychecks=None, **overrides):
        """`clock`: the one clock every service of the app reads (as `gate serve` passes its own);
        `policychecks`: the policy checks' service, in place of the shipped tables."""
        settings = Settings.from_env({**gate_env, **(env or {})})
        if overrides:
            settings = settings.with_(**overrides)
        app = create_app(settings, clock=clock, policychecks=policychecks)
        app.testing = True
        apps.append(app)
        return app

    yield factory
    for app in apps:
        app.extensions["gate"].ledger.dispose()


@pytest.fixture
def app(make_app):
    return make_app()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def issue_key(gate_env):
    """Create an API key the way `gate keys create` does; returns its one-time JSON."""
    from gate.keys.apikeys import HOLDER_REQUIRED, parse_permissions
    from gate.settings import Settings
    from gate_cli.keys_cmd import create_key

    made = iter(range(1, 1_000_000))

    def factory(scope: str = "tenant_a", plan: str = "starter", rate_limit: int | None = 10_000,
                monthly_cap: int | None = None, permissions: str | None = None, holder: str | None = None) -> dict:
        # A key that must name its holder gets one of its own unless the test states one, so
        # two such keys stay two holders (the tests of one holder's two keys state it).
        if holder is None and parse_permissions(permissions) & HOLDER_REQUIRED:
            holder = f"service:test-key-{next(made)}"
        return create_key(Settings.from_env(gate_env), scope, plan, rate_limit, monthly_cap, None, permissions,
                          holder)

    return factory


@pytest.fixture
def api_key(issue_key):
    return issue_key()["api_key"]


@pytest.fixture
def sample_request() -> dict:
    return json.loads(SAMPLE_REQUEST.read_text())


@pytest.fixture
def sample_rulebook() -> dict:
    return json.loads(SAMPLE_RULEBOOK.read_text())
