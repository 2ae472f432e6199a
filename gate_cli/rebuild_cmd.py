"""`gate export --out DIR --rebuild-rollups [--cluster ADDRESS] [--json]`: recompute every
partition's report rollups of an exported dataset and commit them as a new run
(`workbench.dataset.rebuild`), here or on a Dask cluster (`workbench.cluster.rebuild`). The
manifest is signed as `gate export` signs it. Exit status 2, one line on stderr, when the
dataset cannot be rebuilt (no export yet, a listed file changed) or the cluster is unreachable."""

from __future__ import annotations

import json
from typing import Any

from gate.settings import Settings
from gate_cli.cluster_opt import cluster_client
from gate_cli.context import CliError
from gate_cli.progress import ProgressBar

__all__ = ["cmd_rebuild_rollups"]


def cmd_rebuild_rollups(args: Any) -> int:
    # Lazy: the dataset brings Polars and the cluster Dask.
    from workbench.services.root import compose, signing_setup

    if not args.rebuild_rollups:
        raise CliError("--cluster runs the rollup rebuild: give --rebuild-rollups")
    settings = Settings.from_env()
    export = compose(signing_setup(settings)).exports.begin()  # signed as `gate export` signs (SigningRefused)
    progress = ProgressBar(label="rollups", unit="partitions")
    with cluster_client(args.cluster) as client:  # DatasetError, ClusterError: refusals, printed by gate_cli.main
        manifest = export.rebuild_rollups(args.out, cluster=client, progress=progress)
    rolled = manifest["rollups"]
    if args.json:
        print(json.dumps({"out": args.out, "run": manifest["runs"], "rollups": {
            k: rolled[k] for k in ("run", "rows", "decision_partitions", "recomputed_partitions")},
            "dataset_hash": manifest["dataset_hash"]}, sort_keys=True))
    else:
        print(f"rollups rebuilt in {args.out} (run {manifest['runs']}): {rolled['recomputed_partitions']:,} "
              f"partitions, {rolled['rows']:,} rows" + (f" on {args.cluster}" if args.cluster else ""))
    return 0
