"""Alembic environment: runs migrations on the connection handed in by `Ledger.upgrade`."""

from alembic import context
from sqlalchemy import create_engine

from gate.ledger.tables import metadata

config = context.config


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:  # `alembic` command line with sqlalchemy.url set
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as conn:
        _run(conn)
