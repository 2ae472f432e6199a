"""`--cluster ADDRESS`, shared by `gate report`, `gate dry-run` and `gate export --rebuild-rollups`:
the engines' partials on a Dask cluster (`workbench.cluster`; docs/scale.md)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["add_cluster_argument", "cluster_client"]


def add_cluster_argument(parser: Any, what: str) -> None:
    parser.add_argument("--cluster", metavar="ADDRESS", default=None,
                        help=f"run {what} on a Dask cluster: a scheduler address (tcp://host:8786), or 'local' "
                             "for 2 local worker processes (default: this process; needs the distributed extra)")


@contextmanager
def cluster_client(address: str | None) -> Iterator[Any]:
    """The Dask client of `address` for the command's duration, or None without one. Raises
    `workbench.cluster.ClusterError` (one line) when the scheduler cannot be reached."""
    if address is None:
        yield None
        return
    # Lazy: Dask loads only when a cluster is asked for.
    from workbench.cluster import connect

    with connect(address) as client:
        yield client
