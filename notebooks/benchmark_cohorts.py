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
# # Benchmark cohorts
#
# How a scope's policy compares with the opt-in, anonymized cohort of other scopes running the
# same policy. Percentiles appear only past the anonymity floors (`min_cohort_scopes`,
# `min_cohort_decisions`); no scope name and no record of another scope is ever shown. The
# numbers are those of `GET /api/decision/policies/{policy_id}/benchmarks`
# (`workbench.reports.policy.benchmark_report`).
#
# The dataset is `GATE_DATASET`, else `$GATE_HOME/dataset`, else `var/dataset` under the project
# root (which `scripts/demo` fills), whatever folder the kernel runs in.

# %%
import os

import polars as pl

from workbench.dataset.load import from_dataset
from workbench.notebooks import plots
from workbench.notebooks.support import dataset_trust, setup
from workbench.reports.policy import ReportParams, benchmark_report

PATHS = setup()  # stops here, saying how to create it, when there is no dataset
DATASET = PATHS.dataset
TRUST = dataset_trust(PATHS)  # the gate's keys sign it, or GATE_ALLOW_UNSIGNED=1
SCOPE = os.environ.get("GATE_SCOPE", "demo")
# The operator's opt-ins live in the ledger (`gate scopes benchmarks …`); for a dataset read
# offline, name the opted-in scopes here (the demo opts every demo scope in).
OPTED_IN = set(filter(None, os.environ.get("GATE_OPTED_IN", "").split(","))) or None
print("dataset:", DATASET, "· scope:", SCOPE)

# %%
everything = from_dataset(DATASET, trust=TRUST)
scopes = sorted(everything.decisions.select("scope").unique().collect()["scope"].to_list())
opted_in = OPTED_IN if OPTED_IN is not None else set(scopes)
policies = sorted(everything.decisions.select("policy_id").unique().collect()["policy_id"].drop_nulls().to_list())
print(len(scopes), "scopes,", len(opted_in), "opted in; policies:", policies)

# %%
params = ReportParams()
rows = []
for policy in policies:
    report = benchmark_report(from_dataset(DATASET, trust=TRUST, policy_id=policy), policy, params, own_scope=SCOPE, opted_in=opted_in)
    cross = report["cross_customer"]
    p = (cross.get("percentiles") or {}).get("success_rate") or {}
    rows.append({"policy_id": policy, "your_success_rate": report["your_metrics"].get("success_rate"),
                 "cohort_status": cross["status"], "p25": p.get("p25"), "p50": p.get("p50"), "p75": p.get("p75"),
                 "delta_vs_p50": (report.get("comparison") or {}).get("success_rate_delta_vs_p50"),
                 "recommendation": report["recommendation"]})
table = pl.DataFrame(rows, schema={"policy_id": pl.String, "your_success_rate": pl.Float64, "cohort_status": pl.String,
                                  "p25": pl.Float64, "p50": pl.Float64, "p75": pl.Float64,
                                  "delta_vs_p50": pl.Float64, "recommendation": pl.String})
fig = plots.cohorts(table, f"Scope {SCOPE} against the opted-in cohort: success rate per policy")
table

# %% [markdown]
# ## The policy furthest below its cohort, metric by metric
# Each of its metrics against the cohort's quartiles (all from the same benchmark report).

# %%
behind = table.filter(pl.col("delta_vs_p50").is_not_null()).sort("delta_vs_p50")
if behind.height:
    lagging = behind["policy_id"][0]
    report = benchmark_report(from_dataset(DATASET, trust=TRUST, policy_id=lagging), lagging, params, own_scope=SCOPE,
                              opted_in=opted_in)
    cross = report["cross_customer"]
    metrics = pl.DataFrame([{"metric": name, "yours": report["your_metrics"].get(name), "cohort_status": cross["status"],
                             **quartiles} for name, quartiles in cross["percentiles"].items()],
                           schema={"metric": pl.String, "yours": pl.Float64, "cohort_status": pl.String,
                                   "p25": pl.Float64, "p50": pl.Float64, "p75": pl.Float64})
    fig = plots.cohorts(metrics, f"{lagging} in scope {SCOPE} against its cohort ({cross['cohort']['scopes']} scopes)",
                        label="metric", value="yours", xlabel="rate")
    print(lagging, report["recommendation"], report["comparison"])

# %% [markdown]
# ## The anonymity floor holds
# With fewer opted-in scopes than `min_cohort_scopes`, no percentile is shown.

# %%
alone = benchmark_report(from_dataset(DATASET, trust=TRUST, policy_id=policies[0]), policies[0], params, own_scope=SCOPE,
                         opted_in={SCOPE})
print(alone["cross_customer"]["status"], alone["cross_customer"].get("percentiles"))
assert not alone["cross_customer"].get("percentiles")
