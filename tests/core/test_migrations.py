"""Alembic migrations build exactly the tables of gate/ledger/tables.py, on both ledgers, and
upgrade is idempotent."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from gate.ledger import Ledger
from gate.ledger.tables import metadata


def _single_head() -> str:
    """The one head of the migration history (several heads would mean a forked history)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from gate.ledger.store import MIGRATIONS_DIR

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    heads = ScriptDirectory.from_config(config).get_heads()
    assert len(heads) == 1, f"migration history has several heads: {heads}"
    return heads[0]


def test_the_history_is_linear():
    assert _single_head()


def _not_a_partition(name, kind, _parent_names) -> bool:
    """The PostgreSQL outbox's partitions (migration 0021, gate.ledger.outbox_partitions) are
    made by the ledger, one a day, not declared in the models: the partitioned table is."""
    from gate.ledger.outbox_partitions import DEFAULT, PREFIX

    return not (kind == "table" and (name == DEFAULT or name.startswith(PREFIX)))


@pytest.mark.usefixtures("backend")
def test_migrated_schema_equals_the_models(database_url):
    ledger = Ledger(database_url)
    try:
        ledger.upgrade()  # already at head: a no-op
        with ledger.engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"include_name": _not_a_partition})
            assert compare_metadata(context, metadata) == []
            head = connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()
        assert head == _single_head()
    finally:
        ledger.dispose()


def test_a_fresh_sqlite_file_migrates_from_nothing(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'fresh.db'}")
    try:
        ledger.upgrade()
        with ledger.engine.connect() as connection:
            assert compare_metadata(MigrationContext.configure(connection), metadata) == []
    finally:
        ledger.dispose()
