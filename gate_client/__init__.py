"""The Python client of a Decision Gate (`gate_client.client`), the caller's routing helper
(`gate_client.routing`) and a held action's wait and routing on its resolution
(`gate_client.resolutions`). Depends on the core for hashing and verification, never the reverse."""
