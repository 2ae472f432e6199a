"""The rollup rebuild (`workbench.dataset.rebuild`) with each chunk's partials on a cluster."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial as bind
from typing import TYPE_CHECKING

import polars as pl

from gate.keys.anchors import TrustAnchors
from gate.keys.signing import ReceiptSigner
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from workbench.cluster import by_partition, run_all, tasks
from workbench.dataset.integrity import ListedFile
from workbench.dataset.manifest import DatasetManifest
from workbench.dataset.rebuild import rebuild_rollups
from workbench.dataset.rollups import Chunk

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["cluster_rebuild"]


def cluster_rebuild(client: Client, uri: str, *, signer: ReceiptSigner | None, now: datetime | None = None,
                    progress: Callable[[int, int], None] | None = None,
                    anchors: TrustAnchors | None = None) -> DatasetManifest:
    """`rebuild_rollups(uri, …)` with every listed file it reads checked on the cluster's workers
    (`tasks.check`, one task per partition) and `rollups.chunk_partials` of every chunk run there
    (`tasks.rebuild_chunk`), their results taken in the chunks' order."""

    def run_checks(entries: list[ListedFile]) -> list[int]:
        return run_all(client, bind(tasks.check, uri), by_partition(entries, lambda entry: entry.path))

    def run_chunks(chunks: list[Chunk]) -> list[dict[str, list[pl.DataFrame]]]:
        return run_all(client, bind(tasks.rebuild_chunk, uri, dict(OUTCOME_EFFECTIVENESS_CLASS)), chunks)

    return rebuild_rollups(uri, signer=signer, now=now, progress=progress, run_chunks=run_chunks,
                           run_checks=run_checks, anchors=anchors)
