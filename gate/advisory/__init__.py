"""The advisory legacy modes `single` (also when `mode` is omitted), `multi` and `runtime`.

An advisory decision is a real, stored, chained and signed Decision Record whose contract says
it is not a production verdict: `decision_contract: {authority: "advisory_only",
production_verdict: false}` and `production_binding_required: true`. An advisory approval
never reads as one: its `verdict` is `review` and `c` is `unclear` (the advisors' opinion is in
`advisory_verdict` and `v`); see docs/advisory.md for the full contract.

Modules (imported directly; this package imports nothing so that `gate.verify` can use
`gate.advisory.record` without the ledger):

* `advisors`: the advisor interface, the offline policy-pattern advisor, the combining rules;
* `http`: the HTTP LLM provider (OpenAI-compatible chat completions), configured by environment;
* `request`: validation of an advisory Decision Request;
* `record`: the advisory record builder and its `output_hash`;
* `service`: orchestration (idempotency, advisors, record, ledger) called from
  `gate.services.decide.DecisionService.decide`.
"""
