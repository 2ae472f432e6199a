"""The policy report catalogue (issue 66, item 4): the kinds every shell serves, their names,
envelopes and parameters (`registry`, `params`). Plain Python: no Polars, no engine, no ledger.
Each kind's body engine is named by reference (`module:function`) and loaded by the engines'
shell (`workbench.reports.policy`), so the API documents, checks and refuses report queries with
the catalogue alone and computes them through the analytics it is composed with
(`gate.services.analytics`)."""
