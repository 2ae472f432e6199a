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
# Set `GATE_DATASET` to the dataset folder (default `var/dataset`, which `scripts/demo` fills).

# %%
import copy
import json
import os
from pathlib import Path

import polars as pl

from gate.rulebook.analysis import semantic_diff
from workbench.load import from_dataset
from workbench.migration.run import dry_run
from workbench.policy_reports import ReportParams, effectiveness_report

DATASET = os.environ.get("GATE_DATASET", "var/dataset")
RULEBOOKS = Path(os.environ.get("GATE_RULEBOOKS", "data/rulebooks"))
SCOPE = os.environ.get("GATE_SCOPE", "demo")
POLICY = "refund_approval"

# %% [markdown]
# ## 1. The degradation: effectiveness by policy version

# %%
params = ReportParams(limit=10_000)
versions = (from_dataset(DATASET, scopes=[SCOPE], policy_id=POLICY).decisions.select("policy_version").unique()
            .collect()["policy_version"].sort().to_list())
by_version = pl.DataFrame([
    {"policy_version": v, **{k: effectiveness_report(from_dataset(DATASET, scopes=[SCOPE], policy_id=POLICY, policy_version=v),
                                                      POLICY, params)[k] for k in ("effectiveness_score", "recommendation")}}
    for v in versions])
by_version

# %% [markdown]
# ## 2. Draft a fix: start from the current version and tighten what it loosened
# The old and new versions ship in `data/rulebooks`; the draft restores the old version's rules
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

# %%
run = dry_run(draft, POLICY, scope=SCOPE, dataset=DATASET, created_at="2026-12-01T00:00:00.000Z")
result = run.result.to_dict()
print(f"{result['decisions_evaluated']} replayed, {result['decisions_changed']} flip, "
      f"{result['decisions_unreplayable']} could not be replayed")
pl.DataFrame(result["transitions"]).pivot(on="to", index="from", values="count")

# %%
outcomes = result["outcomes"]
print("caught failures (approved, failed, now blocked):", outcomes["caught_failures"])
print("blocked successes:", outcomes["blocked_successes"])
print("new approvals with no observable outcome:", outcomes["unobserved_new_approvals"])
print("review queue:", result["review_load"]["before"], "→", result["review_load"]["after"])

# %% [markdown]
# ## 4. History agrees with the proof
# Every decision that flipped lies in a region the exact diff names (history shows what did flip;
# the diff proves what can).

# %%
diff = semantic_diff(current, draft)
flipped = pl.DataFrame(result["flips"]["listed"])
decisions = from_dataset(DATASET, scopes=[SCOPE], policy_id=POLICY).decisions
facts = (decisions.filter(pl.col("decision_id").is_in(flipped["decision_id"].to_list()))
         .select("decision_id", "policy_version", "facts_json").collect())
current_version_rows = facts.filter(pl.col("policy_version") == current["version"])
outside = [row["decision_id"] for row in current_version_rows.iter_rows(named=True)
           if diff.region_of(json.loads(row["facts_json"])) is None]
print(f"{current_version_rows.height} flipped decisions made under the current version; outside every diff region: {len(outside)}")
assert not outside
flipped.head(10)
