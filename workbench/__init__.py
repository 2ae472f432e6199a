"""Decision intelligence over the ledger: Parquet export, Polars engines, dry-runs, reports, dashboard.

Data flows one way: ledger → `workbench.dataset.export` (Parquet dataset, the data contract in
`workbench.dataset.schema`) → `workbench.engines` (pure Polars) → reports, the dashboard and notebooks.
The API's report endpoints call the same engines over LazyFrames loaded from the live ledger
(`workbench.dataset.load`), so a number means the same thing everywhere.
"""
