"""The one start-up of a gate for in-process benchmarks (issue 54): a home with a fresh Ed25519
keyring, settings over a ledger (a SQLite file in the home unless a URL is given, such as the
throw-away PostgreSQL database `bench_http._database` makes), the Flask app over them (which
migrates its ledger to the newest schema), and a key whose limits no run reaches. `embedded_app`
is the same over a temporary home, removed on exit.

Benchmarks that start a gate in a child process from a script of their own (`bench_decide_cpu`,
`bench_startup`, which may run an older tree) or make a keyring for something other than an app
(`bench_export`, `bench_workbench`, `bench_holds`) do not use it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

KEYRING = "signing-keys.json"
VALID_FROM = "2026-11-01T00:00:00.000Z"  # the keyring's first key is valid from then
NO_LIMIT = 100_000_000  # decides per minute and records per month: more than any run makes
HOLDER = "service:bench"  # a key with admin, publish, release or approve names its holder


def bench_settings(home: Path, database_url: str | None = None, env: Mapping[str, str] | None = None,
                   valid_from: str = VALID_FROM) -> Any:
    """Settings of a gate over `home`: a new keyring in it, the ledger at `database_url`
    (default: `gate.db` in `home`), and `env` beside (it may override any of them)."""
    from gate.keys.signing import generate_keyring
    from gate.settings import Settings

    keyring = home / KEYRING
    generate_keyring(keyring, valid_from)
    return Settings.from_env({"GATE_HOME": str(home), "GATE_DATABASE_URL": database_url or f"sqlite:///{home / 'gate.db'}",
                              "GATE_SIGNING_KEY_FILE": str(keyring), **(env or {})})


def bench_app(home: Path, database_url: str | None = None, env: Mapping[str, str] | None = None,
              valid_from: str = VALID_FROM, **app_options: Any) -> tuple[Any, Any]:
    """(settings, app) over `home` as `bench_settings` makes them; `app_options` go to `create_app`
    (e.g. adapters)."""
    from gate_cli.served_app import create_app

    settings = bench_settings(home, database_url, env, valid_from)
    return settings, create_app(settings, **app_options)


def bench_key(settings: Any, permissions: str | None = "decide,admin", *, plan: str = "growth",
              rate_limit: int = NO_LIMIT, monthly_cap: int | None = NO_LIMIT) -> str:
    """A new API key of scope `bench` with `permissions` (None: decide only); a key that needs a
    holder names `HOLDER`."""
    from gate.keys.apikeys import HOLDER_REQUIRED, parse_permissions
    from gate_cli.keys_cmd import create_key

    holder = HOLDER if parse_permissions(permissions) & HOLDER_REQUIRED else None
    return str(create_key(settings, "bench", plan, rate_limit, monthly_cap, None, permissions, holder)["api_key"])


@contextmanager
def embedded_app(**app_options: Any) -> Iterator[tuple[Any, Any]]:
    """(settings, app) over a temporary home with a SQLite ledger; `app_options` go to
    `create_app`. The ledger's connections are closed and the home removed on exit."""
    with tempfile.TemporaryDirectory() as home:
        settings, app = bench_app(Path(home), **app_options)
        try:
            yield settings, app
        finally:
            app.extensions["gate"].ledger.dispose()
