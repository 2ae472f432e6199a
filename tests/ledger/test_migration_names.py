"""`Ledger.upgrade` leaves a ledger at the newest revision without loading Alembic (issue 68): it
takes the newest migration to be the file whose name sorts last, named as its revision. These
tests hold the migrations to that, and show a ledger one revision behind is still upgraded."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from sqlalchemy import text

from gate.ledger import Ledger
from gate.ledger.store import MIGRATIONS_DIR

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = sorted((MIGRATIONS_DIR / "versions").glob("[0-9]*.py"))


def _assigned(path: Path, name: str) -> object:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
                return ast.literal_eval(node.value)
    raise AssertionError(f"{path.name} assigns no {name}")


def test_each_migration_is_named_as_its_revision_and_follows_the_one_before_it_by_name():
    assert VERSIONS
    previous = None
    for path in VERSIONS:
        assert _assigned(path, "revision") == path.stem
        assert _assigned(path, "down_revision") == previous, path.name
        previous = path.stem


def test_a_ledger_at_the_newest_revision_is_opened_without_alembic(tmp_path):
    url = f"sqlite:///{tmp_path / 'gate.db'}"
    Ledger(url).upgrade()
    probe = f"import sys; from gate.ledger import Ledger; Ledger({url!r}).upgrade(); print('alembic' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_a_ledger_one_revision_behind_is_upgraded(tmp_path):
    from alembic import command
    from alembic.config import Config

    ledger = Ledger(f"sqlite:///{tmp_path / 'gate.db'}")
    config = Config()  # as a ledger made before the newest migration: migrated up to the one before it
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with ledger.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, VERSIONS[-2].stem)
    assert not ledger._states_newest_revision()
    ledger.upgrade()
    with ledger.engine.connect() as connection:
        stated = connection.execute(text("SELECT version_num FROM alembic_version")).scalars().all()
    ledger.dispose()
    assert stated == [VERSIONS[-1].stem]
