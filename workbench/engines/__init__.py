"""Pure Polars engines over the dataset contract (`workbench.dataset.schema`).

Each engine takes LazyFrames of decisions and outcomes (with `scope` and `month` columns, as a
dataset read or the live-ledger loader yields them) and the outcome-status → effectiveness
class mapping, and returns a plain JSON-ready report body. Each is built as partial → merge →
finalize (see `workbench.engines.common`), is deterministic and reads no database: callers load
the frames (`workbench.dataset.load`) and wrap the body in its envelope (`gate.protocol.report_envelopes`).

Modules: `effectiveness`, `anomalies` (with `fact_moments`), `benchmarks`, `counterfactuals`
(formulas: docs/intelligence.md); `rulebook_polars` and `fact_columns` compile a rulebook to
Polars expressions over the typed facts table (docs/dataset-facts.md). Only Polars and the
standard library are imported here.
"""
