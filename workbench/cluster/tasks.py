"""What runs on a worker: pure functions of one partition's files (no client, no state).

Each opens the dataset location itself from its URI (a worker shares nothing with the client
but the function's arguments) and returns small frames the client merges.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from workbench.dataset import integrity, rollups
from workbench.dataset.location import open_location
from workbench.engines import confidence as confidence_engine

__all__ = ["check", "confidence_partial", "rebuild_chunk", "rollup_rows"]


def check(uri: str, entries: Sequence[integrity.ListedFile]) -> int:
    """Check the files against their listed size, digest, row count and schema (DatasetError
    naming the first that does not match); returns how many were checked."""
    return len(integrity.check_files(open_location(uri), entries))


def rollup_rows(uri: str, classes: Mapping[str, str], policy_id: str | None,
                chunk: rollups.Chunk) -> dict[str, list[pl.DataFrame]]:
    """The rollup rows of one chunk (`rollups.chunk_partials`), of one policy or of every policy."""
    return rollups.chunk_partials(open_location(uri), chunk, classes, policy_id)


def rebuild_chunk(uri: str, classes: Mapping[str, str], chunk: rollups.Chunk) -> dict[str, list[pl.DataFrame]]:
    """The rollup rows of one chunk, every policy (the rollup rebuild)."""
    return rollup_rows(uri, classes, None, chunk)


def confidence_partial(uri: str, classes: Mapping[str, str], policy_id: str, verdict: str | None,
                       action: str | None, chunk: rollups.Chunk) -> dict[str, pl.DataFrame] | None:
    """The confidence engine's partial of one chunk's decisions of the policy (None: it has none)."""
    rows = rollups.chunk_rows(open_location(uri), chunk, policy_id)
    if rows is None:
        return None
    decisions, outcomes, _mine = rows
    return confidence_engine.partial(decisions.lazy(), outcomes.lazy(), policy_id=policy_id, classes=classes,
                                     verdict=verdict, action=action)
