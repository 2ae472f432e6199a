"""Server fixtures live in support.py (shared with the other server test modules)."""

from tests.server.support import server, server_factory  # noqa: F401
