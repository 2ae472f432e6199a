"""Alembic environment: runs migrations on the connection handed in by `Ledger.upgrade`."""

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from gate.ledger.tables import metadata

config = context.config


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:  # `alembic` command line with sqlalchemy.url set
    url = config.get_main_option("sqlalchemy.url")
    if url is None:
        raise SystemExit("alembic: set sqlalchemy.url (or run migrations through `gate db upgrade`)")
    engine = create_engine(url)
    with engine.begin() as conn:
        _run(conn)
