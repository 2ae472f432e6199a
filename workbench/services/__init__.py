"""The analytics use cases, one service each: export (`exports`), the policy reports
(`reports`), the dry-run (`dry_runs`), the threshold sweep (`sweeps`) and the live impact
(`impact`). The CLI, the API, the workbench and the notebooks call these; `root` builds them
(with the core's decision service and signing setup) for every shell.

Each module loads no Polars, Arrow or Dask when imported (the API imports the root at start-up);
the readers and engines load inside the calls that use them.
"""
