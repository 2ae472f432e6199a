"""The ledger: SQLAlchemy tables, repository and Alembic migrations (SQLite file or PostgreSQL)."""

from gate.ledger.store import (
    CapCharge,
    ChainAppend,
    ChainHead,
    ConfidenceRead,
    Ledger,
    StoredDecision,
)

__all__ = ["CapCharge", "ChainAppend", "ChainHead", "ConfidenceRead", "Ledger", "StoredDecision"]
