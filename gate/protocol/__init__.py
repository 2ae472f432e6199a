"""The record protocol: canonical JSON and hashes (`canonical`, `collation`), Decision Requests
(`requests`), Decision Records (`records`), rulebook attestations (`attestation`), decision
confidence (`confidence`) and report envelopes (`report_envelopes`). Pure functions over values."""
