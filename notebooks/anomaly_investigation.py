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
# # Anomaly investigation
#
# From a policy's anomaly report down to the decisions, facts and outcomes that drive each
# finding. Every number here comes from the same functions the API's
# `GET /api/decision/policies/{policy_id}/anomalies` and the workbench call
# (`workbench.policy_reports`), run over the Parquet dataset written by `gate export`.
#
# Set `GATE_DATASET` to the dataset folder (default `var/dataset`, which `scripts/demo` fills).

# %%
import json
import os

import polars as pl

from workbench.load import from_dataset
from workbench.policy_reports import ReportParams, anomaly_report, effectiveness_report
from workbench.timeseries import monthly

DATASET = os.environ.get("GATE_DATASET", "var/dataset")
SCOPE = os.environ.get("GATE_SCOPE", "demo")
pl.Config.set_tbl_rows(20)
pl.Config.set_fmt_str_lengths(60)

# %% [markdown]
# ## 1. Which policy of the scope is anomalous?
# One anomaly report per policy, with the API's default parameters.

# %%
params = ReportParams()
everything = from_dataset(DATASET, scopes=[SCOPE])
policies = sorted(everything.decisions.select("policy_id").unique().collect()["policy_id"].drop_nulls().to_list())
reports = {policy: anomaly_report(from_dataset(DATASET, scopes=[SCOPE], policy_id=policy, limit=params.limit), policy, params)
           for policy in policies}
summary = pl.DataFrame([{"policy_id": p, "anomaly_count": r["anomaly_count"], "recommendation": r["recommendation"],
                         "top_score": max([a["anomaly_score"] for a in r["anomalies"]], default=0.0)}
                        for p, r in reports.items()]).sort("top_score", descending=True)
summary

# %%
policy = summary["policy_id"][0]
report = reports[policy]
assert report["anomaly_count"] >= 1, "the demo ledger injects anomalies; none were found"
print(f"policy {policy}: {report['anomaly_count']} anomalies, recommendation {report['recommendation']}")
print("report hash:", report["anomaly_hash"])

# %% [markdown]
# ## 2. The findings, with their reasons

# %%
for finding in report["anomalies"]:
    print(f"[{finding['severity']}] score {finding['anomaly_score']:.3f}")
    for reason in finding["reasons"]:
        print("   -", reason)

# %% [markdown]
# ## 3. Down to the decisions that drive the top finding
# Their facts (as the rulebook saw them), verdicts, matched rules and latest outcomes.

# %%
top = report["anomalies"][0]
ids = top["decision_ids"]
frames = from_dataset(DATASET, scopes=[SCOPE], policy_id=policy)
latest = (frames.outcomes.sort(["reported_at", "receipt_id"]).group_by("decision_id")
          .agg(pl.col("status").last().alias("latest_outcome")))
drivers = (frames.decisions.filter(pl.col("decision_id").is_in(ids))
           .join(latest, on="decision_id", how="left")
           .select("decision_id", "created_at", "policy_version", "verdict", "matched_rule_id", "latest_outcome",
                   "facts_json")
           .sort("created_at").collect())
assert drivers.height == len(ids), "every decision id a finding names is in the dataset"
drivers

# %%
facts = pl.DataFrame([json.loads(text) for text in drivers["facts_json"].to_list()])
facts.describe()

# %% [markdown]
# ## 4. The policy's course, month by month
# Each month's effectiveness is the effectiveness engine over that month's decisions.

# %%
course = monthly(frames, policy)
course

# %%
whole = effectiveness_report(from_dataset(DATASET, scopes=[SCOPE], policy_id=policy, limit=params.limit), policy, params)
print("effectiveness over the most recent", params.limit, "decisions:", whole["effectiveness_score"],
      whole["recommendation"])
