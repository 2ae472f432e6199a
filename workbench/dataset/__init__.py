"""The Parquet dataset: its schemas (`schema`), where it lives (`location`), its integrity
(`integrity`), the export from the ledger (`export`, `convert`, `partwriter`), the readers
(`load`, `facts`, `recent`), the per-partition rollups (`rollups`) and synthetic datasets (`synth`)."""
