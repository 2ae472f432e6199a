"""Replay of stored decisions without writing: historical or current replay (`historical`),
per-decision what-ifs (`whatif`), the golden replay corpus (`golden`) and the migration check
against it (`migration_check`)."""
