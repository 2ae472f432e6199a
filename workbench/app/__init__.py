"""The policy workbench: a Panel dashboard over the Parquet dataset and the ledger.

Structure (Panel's guidance for larger apps):

- `store.WorkbenchStore`: the data store, no UI. Every figure comes from `workbench.engines`,
  `workbench.migration` or a `gate` service; the store only chooses inputs and caches.
- `state/`: one `param.Parameterized` view-model per page. They hold the selections and the
  results, call the store, and are tested without a browser.
- `pages/`: thin layouts, one module per page, that bind widgets to view-model parameters.
- `server`: builds a session's app, applies the access policy (`access`) and serves it.

The workbench is read-only over the ledger. Its one write is promoting a draft rulebook, which
goes through `gate.services.decide.DecisionService.register_rulebook`.
"""
