"""The ledger: SQLAlchemy tables, repository and Alembic migrations (SQLite file or PostgreSQL)."""

from gate.ledger.store import (
    CapCharge,
    ChainAppend,
    ChainHead,
    Ledger,
    SealedDecision,
    StoredDecision,
    Written,
)

__all__ = ["CapCharge", "ChainAppend", "ChainHead", "Ledger", "SealedDecision", "StoredDecision", "Written"]
