"""Use cases: the one place each is orchestrated in a ledger transaction. The HTTP and CLI
shells translate to and from these calls; see docs/architecture.md."""
