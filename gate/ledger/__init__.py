"""The ledger: SQLAlchemy tables, repository and Alembic migrations (SQLite file or PostgreSQL).
The only package that talks SQL (the import contract "Only the ledger talks SQL"): a caller that
must tell a database failure apart catches `DatabaseError`, never a driver's class."""

from sqlalchemy.exc import SQLAlchemyError as DatabaseError

from gate.ledger.store import (
    CapCharge,
    ChainAppend,
    ChainHead,
    Ledger,
    SealedDecision,
    SnapshotRow,
    StoredDecision,
    StoredSnapshot,
    Written,
)

__all__ = ["CapCharge", "ChainAppend", "ChainHead", "DatabaseError", "Ledger", "SealedDecision", "SnapshotRow", "StoredDecision",
           "StoredSnapshot", "Written"]
