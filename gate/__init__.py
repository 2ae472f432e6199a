"""Decision Gate core: pure domain code.

Canonical JSON and hashing, Rulebook v1 (validate, compile, evaluate), Decision Records and
their signatures, verification, and the ledger. Nothing here imports Flask, Polars or Panel;
clock, id source, signer and ledger are passed in so that tests and replays are deterministic.
"""

__version__ = "0.1.0"
