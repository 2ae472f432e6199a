"""An embedded gate for in-process benchmarks: a temporary GATE_HOME with an SQLite ledger at
the newest schema and a fresh Ed25519 keyring, and the Flask app over it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def embedded_app(**app_options: Any) -> Iterator[tuple[Any, Any]]:
    """(settings, app) over a temporary home; `app_options` go to `create_app` (e.g. adapters).
    The ledger's connections are closed and the home removed on exit."""
    from api.app import create_app
    from gate.keys.signing import generate_keyring
    from gate.ledger import Ledger
    from gate.settings import Settings

    with tempfile.TemporaryDirectory() as home:
        keyring = Path(home) / "signing-keys.json"
        generate_keyring(keyring, "2026-11-01T00:00:00.000Z")
        env = {"GATE_HOME": home, "GATE_DATABASE_URL": f"sqlite:///{home}/gate.db",
               "GATE_SIGNING_KEY_FILE": str(keyring)}
        Ledger(env["GATE_DATABASE_URL"]).upgrade()
        settings = Settings.from_env(env)
        app = create_app(settings, **app_options)
        try:
            yield settings, app
        finally:
            app.extensions["gate"].ledger.dispose()
