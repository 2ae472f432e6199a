# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Migration impact
#
# A policy degraded after a version change. This notebook drafts a fix, proves what the fix
# *can* change (the exact semantic diff of `gate rulebook diff`) and measures what it *would
# have* changed over full history (the dry-run of `gate dry-run` and the workbench), with the
# known outcomes of the decisions that flip.
#
# The dataset is `GATE_DATASET`, else `$GATE_HOME/dataset`, else `var/dataset` under the project
# root (which `scripts/demo` fills); the rulebooks `GATE_RULEBOOKS`, else `gate/data/rulebooks` under
# the project root; whatever folder the kernel runs in.

# %%
import copy
import json
import os

import polars as pl

from gate.rulebook.analysis import semantic_diff
from workbench.dataset.load import from_dataset
from workbench.migration.baseline import compared_with
from workbench.migration.impact import impact_rows
from workbench.migration.run import dry_run
from workbench.migration.summary import LISTED_FLIP_SCHEMA, TRANSITION_SCHEMA
from workbench.notebooks import plots
from workbench.notebooks.support import REPORT_ROW_SCHEMA, dataset_trust, report_row, setup
from workbench.reports.policy import ReportParams, effectiveness_report

PATHS = setup()  # stops here, saying how to create it, when there is no dataset
DATASET, RULEBOOKS = PATHS.dataset, PATHS.rulebooks
TRUST = dataset_trust(PATHS)  # the gate's keys sign it, or GATE_ALLOW_UNSIGNED=1
SCOPE = os.environ.get("GATE_SCOPE", "demo")
POLICY = "refund_approval"
print("dataset:", DATASET, "· rulebooks:", RULEBOOKS, "· scope:", SCOPE)

# %% [markdown]
# ## 1. The degradation: effectiveness by policy version

# %%
params = ReportParams(limit=10_000)
versions = (from_dataset(DATASET, trust=TRUST, scopes=[SCOPE], policy_id=POLICY).decisions.select("policy_version").unique()
            .collect()["policy_version"].sort().to_list())
by_version = pl.DataFrame([
    {"policy_version": v, **report_row(effectiveness_report(
        from_dataset(DATASET, trust=TRUST, scopes=[SCOPE], policy_id=POLICY, policy_version=v), POLICY, params))}
    for v in versions], schema={"policy_version": pl.String, **REPORT_ROW_SCHEMA})
fig = plots.by_version(by_version, f"{POLICY}: effectiveness per policy version (95% interval)")
by_version

# %% [markdown]
# ## 2. Draft a fix: start from the current version and tighten what it loosened
# The old and new versions ship in `gate/data/rulebooks`; the draft restores the old version's rules
# under a new version label.

# %%
old = json.loads((RULEBOOKS / "refund-approval.json").read_text())
current = json.loads((RULEBOOKS / "refund-approval-2026-08-01.json").read_text())
draft = copy.deepcopy(old)
draft["version"] = "2026-12-01"
exact = semantic_diff(current, draft).to_json()
print("exact diff current → draft:", exact["verdict"], f"({exact['difference_count']} regions)")
for difference in exact["differences"][:5]:
    print(" -", difference["text"], ":", difference["old"]["decision"], "→", difference["new"]["decision"],
          "e.g.", difference["witness"])

# %% [markdown]
# ## 3. What the draft would have changed over history
# Compared with what runs today: the current version replayed over the same history (the
# baseline of the workbench's live impact and of `gate dry-run --scope`; docs/dry-run.md).

# %%
run = dry_run(draft, POLICY, scope=SCOPE, dataset=DATASET, created_at="2026-12-01T00:00:00.000Z",
              baseline=current, baseline_source="the current version, gate/data/rulebooks")
result = run.result
print(compared_with(result["baseline"]))
print(f"{result['decisions_evaluated']} replayed, {result['decisions_changed']} flip, "
      f"{result['decisions_unreplayable']} could not be replayed")
fig = plots.transitions(result["transitions"], "Verdicts over history: the current version's (rows) and the draft's (columns)")
pl.DataFrame(result["transitions"], schema=TRANSITION_SCHEMA).pivot(on="to", index="from", values="count")

# %%
outcomes = result["outcomes"]
for label, text in impact_rows(result["impact"]):  # the same rows the page, the CLI and the report show
    print(f"{label}: {text}")
print("review queue:", result["review_load"]["before"], "→", result["review_load"]["after"])
by_month = result["review_load"]["by_month"]
fig = plots.paired([m["month"] for m in by_month], [m["review_before"] for m in by_month],
                   [m["review_after"] for m in by_month], "Review queue per month: the current version against the draft",
                   names=("current version", "under the draft"))
moved = [t for t in outcomes["by_transition"] if t["count"]]
fig = plots.paired([f"{t['from']} → {t['to']}" for t in moved], [t["success"] for t in moved],
                   [t["failure"] for t in moved], "Known outcomes of the decisions that flip, by transition",
                   names=("success class", "failure class"), colors=(plots.SCORE, plots.FAILURE))

# %% [markdown]
# ## 4. History agrees with the proof
# Every decision that flipped lies in a region the exact diff names (history shows what did flip;
# the diff proves what can): against the current version, every flip, whichever version decided it.

# %%
diff = semantic_diff(current, draft)
flipped = pl.DataFrame(result["flips"]["listed"], schema=LISTED_FLIP_SCHEMA)
decisions = from_dataset(DATASET, trust=TRUST, scopes=[SCOPE], policy_id=POLICY).decisions
facts = (decisions.filter(pl.col("decision_id").is_in(flipped["decision_id"].to_list()))
         .select("decision_id", "policy_version", "facts_json").collect())
outside = [row["decision_id"] for row in facts.iter_rows(named=True)
           if diff.region_of(json.loads(row["facts_json"])) is None]
print(f"{facts.height} flipped decisions listed; outside every diff region: {len(outside)}")
assert not outside
flipped.head(10)
