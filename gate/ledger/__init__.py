"""The ledger: SQLAlchemy tables, repository and Alembic migrations (SQLite file or PostgreSQL).
The only package that talks SQL (the import contract "Only the ledger talks SQL"): a caller that
must tell a database failure apart catches `DatabaseError`, never a driver's class."""

from sqlalchemy.exc import SQLAlchemyError as DatabaseError

from gate.ledger.store import (
    ApiKeyRow,
    CapCharge,
    ChainAppend,
    ChainHead,
    ChainHeadRow,
    Ledger,
    SealedDecision,
    SnapshotRow,
    StoredDecision,
    StoredSnapshot,
    Written,
)

__all__ = ["ApiKeyRow", "CapCharge", "ChainAppend", "ChainHead", "ChainHeadRow", "DatabaseError", "Ledger", "SealedDecision", "SnapshotRow", "StoredDecision",
           "StoredSnapshot", "Written"]
