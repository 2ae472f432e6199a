"""Run the engines' partials on an existing distributed engine (Dask distributed).

`--cluster ADDRESS` on `gate report`, `gate dry-run` and `gate export --rebuild-rollups`, and the
workbench's GATE_CLUSTER, name a Dask scheduler (`tcp://host:8786`), or `local`: a local cluster
of `LOCAL_WORKERS` worker processes of one thread each, started for the call and closed after it.

What is ours here is only *what* runs on a partition: a pure function of a partition's files
(`workbench.cluster.tasks`), which calls the same engine `partial`s the single-process path calls;
the client merges and finalizes. Nothing of ours schedules, retries or moves data: `client.map`
hands the partitions to the scheduler, which places, reruns (a lost worker) and transfers them.
The results are those of the single-process run, byte for byte (tests/workbench/test_cluster.py).

Dask rather than Ray or Spark: docs/scale.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from gate.errors import CodedError

if TYPE_CHECKING:  # Dask loads only when a cluster is used; the callers name the client's type from here
    from distributed import Client as Client

__all__ = ["CLUSTER_ENV", "CONNECT_ENV", "CONNECT_SECONDS", "LOCAL", "LOCAL_WORKERS", "ClusterError", "by_partition",
           "cluster_setting", "connect", "connect_seconds", "run_all"]

LOCAL = "local"
LOCAL_WORKERS = 2
CONNECT_SECONDS = 10.0
MAX_CONNECT_SECONDS = 600.0
CLUSTER_ENV = "GATE_CLUSTER"
CONNECT_ENV = "GATE_CLUSTER_CONNECT_SECONDS"

T = TypeVar("T")
F = TypeVar("F")


class ClusterError(CodedError):
    """The cluster cannot be used (Dask not installed, the address unreachable): one line."""

    CODE = "CLUSTER_UNAVAILABLE"


def cluster_setting(environ: dict[str, str] | None = None) -> str | None:
    """The workbench's cluster address (GATE_CLUSTER), None when unset or empty."""
    value = (os.environ if environ is None else environ).get(CLUSTER_ENV, "").strip()
    return value or None


def connect_seconds(environ: dict[str, str] | None = None) -> float:
    """How long a scheduler is waited for (GATE_CLUSTER_CONNECT_SECONDS, default 10 s): more than
    0 and at most 600 seconds, else ClusterError naming the variable."""
    value = (os.environ if environ is None else environ).get(CONNECT_ENV, "").strip()
    if not value:
        return CONNECT_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= MAX_CONNECT_SECONDS:  # NaN fails this too
        raise ClusterError(f"{CONNECT_ENV} must be a number of seconds above 0 and at most "
                           f"{MAX_CONNECT_SECONDS:g}, not {value[:40]!r}")
    return seconds


@contextmanager
def connect(address: str, *, timeout: float | None = None, workers: int = LOCAL_WORKERS) -> Iterator[Client]:
    """A Dask client of the cluster at `address`, or of a local cluster of `workers` worker
    processes (one thread each) when `address` is `local`; closed (the local cluster shut down)
    on exit. ClusterError within `timeout` seconds (default `connect_seconds()`) when the
    scheduler cannot be reached."""
    timeout = connect_seconds() if timeout is None else timeout
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ClusterError("--cluster needs Dask distributed: pip install 'decision-gate[distributed]'") from None
    if address == LOCAL:
        # Dask's constructors are untyped (no-untyped-call). The local cluster is this command's
        # own and is torn down with it: its workers' logs stay off stderr below CRITICAL (a
        # refusal is one line; a worker losing its scheduler at teardown logged a traceback at
        # ERROR there), while a task's exception still reaches the command through the client.
        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,  # type: ignore[no-untyped-call]
                          dashboard_address=None, silence_logs=logging.CRITICAL) as cluster, \
                Client(cluster, timeout=timeout) as client:  # type: ignore[no-untyped-call]
            yield client
        return
    try:
        client = Client(address, timeout=timeout)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError, TypeError) as error:
        raise ClusterError(f"cannot reach the Dask scheduler at {address!r} within {timeout:g} s "
                           f"({type(error).__name__}: {error})") from None
    with client:
        yield client


def run_all(client: Client, function: Callable[..., T], items: Sequence[Any] | Iterable[Any], **shared: Any) -> list[T]:
    """`function(item, **shared)` for every item on the cluster's workers, the results in the
    items' order (the scheduler places, retries and moves them; a task's exception is raised
    here). Each `shared` value is handed to the cluster once (`scatter`) and moved by it to the
    workers that need it, not sent with every task."""
    scattered = {name: client.scatter(value, hash=False)  # type: ignore[no-untyped-call]
                 for name, value in shared.items()}
    futures = client.map(function, list(items), pure=False, **scattered)
    return list(client.gather(futures))  # type: ignore[no-untyped-call]


def by_partition(entries: Iterable[F], path: Callable[[F], str]) -> list[list[F]]:
    """Listed files grouped by their (scope, month) partition directories (one checking task
    each), in the order of the partitions' paths; files outside any partition form one group."""
    groups: dict[tuple[str, ...], list[F]] = {}
    for entry in entries:
        key = tuple(part for part in path(entry).split("/") if part.startswith(("scope=", "month=")))
        groups.setdefault(key, []).append(entry)
    return [groups[key] for key in sorted(groups)]
