"""The Python client of a Decision Gate (`gate_client.client`) and the caller's routing helper
(`gate_client.routing`). Depends on the core for hashing and verification, never the reverse."""
