"""The ledger: SQLAlchemy tables, repository and Alembic migrations (SQLite file or PostgreSQL)."""

from gate.ledger.store import CapCharge, Ledger, StoredDecision

__all__ = ["CapCharge", "Ledger", "StoredDecision"]
