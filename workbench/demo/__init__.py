"""The demo ledger and the synthetic datasets share one scenario (`workbench.demo.scenario`):
`seed` writes it through the real services, `workbench.dataset.synth` straight into the export schema.

This module stays import-light (no NumPy, no database): the CLI reads its defaults."""

DEFAULT_DECISIONS = 3_000
DEFAULT_SEED = 7
