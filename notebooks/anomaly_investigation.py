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
# One investigation end to end: which policy is anomalous, the version change its failures
# follow, the decisions the finding names as evidence, their facts, how they turned out, and a
# conclusion drawn from those figures. On the demo dataset this is `refund_approval`, whose
# version `2026-08-01` raised the automatic refund limit.
#
# Every number comes from the functions behind the API's
# `GET /api/decision/policies/{policy_id}/anomalies` and `…/effectiveness` and the workbench
# (`workbench.reports.policy`), over the Parquet dataset `gate export` writes. The dataset is
# `GATE_DATASET`, else `$GATE_HOME/dataset`, else `var/dataset` under the project root (which
# `scripts/demo` fills), whatever folder the kernel runs in. `GATE_SCOPE` picks the scope
# (default `demo`), `GATE_POLICY` the policy (default: the one with the strongest finding).

# %%
import json
import os

import polars as pl

from workbench.dataset.load import from_dataset
from workbench.engines.common import latest_outcomes
from workbench.notebooks import plots
from workbench.notebooks.support import (
    FACT_NAME,
    dataset_trust,
    REPORT_ROW_SCHEMA,
    decision_frames,
    fact_points,
    monthly_effectiveness,
    report_row,
    setup,
    version_changes,
)
from workbench.reports import numbers
from workbench.reports.policy import (
    CLASSES,
    ReportParams,
    anomaly_report,
    effectiveness_report,
)

PATHS = setup()  # stops here, saying how to create it, when there is no dataset
DATASET, SCOPE = PATHS.dataset, os.environ.get("GATE_SCOPE", "demo")
TRUST = dataset_trust(PATHS)  # the gate's keys sign it, or GATE_ALLOW_UNSIGNED=1
print("dataset:", DATASET, "· scope:", SCOPE)
pl.Config.set_tbl_rows(20)
pl.Config.set_fmt_str_lengths(60)

# %% [markdown]
# ## 1. Which policy of the scope is anomalous?
# One anomaly report per policy, with the API's default parameters.

# %%
params = ReportParams()
everything = from_dataset(DATASET, trust=TRUST, scopes=[SCOPE])
policies = sorted(everything.decisions.select("policy_id").unique().collect()["policy_id"].drop_nulls().to_list())
reports = {policy: anomaly_report(from_dataset(DATASET, trust=TRUST, scopes=[SCOPE], policy_id=policy, limit=params.limit),
                                  policy, params) for policy in policies}
summary = pl.DataFrame([{"policy_id": p, "anomaly_count": r["anomaly_count"], "recommendation": r["recommendation"],
                         "top_score": max([a["anomaly_score"] for a in r["anomalies"]], default=0.0)}
                        for p, r in reports.items()],
                       schema={"policy_id": pl.String, "anomaly_count": pl.Int64, "recommendation": pl.String,
                               "top_score": pl.Float64}).sort(["top_score", "policy_id"], descending=[True, False])
fig = plots.bars(summary["policy_id"].to_list(), summary["top_score"].to_list(),
                 f"Strongest anomaly finding per policy (scope {SCOPE})", "anomaly_score (0 to 1)")
summary

# %%
policy = os.environ.get("GATE_POLICY") or summary["policy_id"][0]
report = reports[policy]
assert report["anomaly_count"] >= 1, f"no anomaly above the threshold for {policy}"
print(f"policy {policy}: {report['anomaly_count']} anomalies, recommendation {report['recommendation']}")
print("report hash:", report["anomaly_hash"])
for item in report["anomalies"]:
    print(f"[{item['severity']}] score {numbers.score(item['anomaly_score'])} · {item['anomaly_id']}")
    for reason in item["reasons"]:
        print("   -", reason)

# %% [markdown]
# ## 2. The version change the failures follow
# The anomaly report compares the newest version with the one before it. The chart shows each
# month's effectiveness report (success rate, its 95% Wilson interval, failure rate) with a
# dashed line where a version starts; the bars give one effectiveness report per version.

# %%
frames = from_dataset(DATASET, trust=TRUST, scopes=[SCOPE], policy_id=policy)
change = report["checks"]["policy_versions"]
versions = version_changes(frames)
by_version = pl.DataFrame([{"policy_version": v, **report_row(effectiveness_report(
    from_dataset(DATASET, trust=TRUST, scopes=[SCOPE], policy_id=policy, policy_version=v, limit=params.limit), policy,
    ReportParams(policy_version=v)))} for v in versions["policy_version"].to_list()],
    schema={"policy_version": pl.String, **REPORT_ROW_SCHEMA})
fig = plots.course(monthly_effectiveness(frames, policy), versions, f"{policy}: effectiveness per month")
fig = plots.by_version(by_version, f"{policy}: effectiveness per policy version")
print("current version:", change["current"], "· previous:", change["previous"])
versions

# %%
# The finding to follow: the strongest that names a policy version (else the strongest of all).
on_version = [a for a in report["anomalies"] if a["dimension"] == "policy_version"]
finding = (on_version or report["anomalies"])[0]
print(finding["anomaly_id"], "·", finding["severity"], "·", finding["reasons"][0])
by_version

# %% [markdown]
# ## 3. The evidence: the decisions the finding names, and their facts
# Their facts as the rulebook saw them, verdicts, matched rules and latest outcomes.

# %%
ids = finding["decision_ids"]
evidence = decision_frames(frames, ids)
latest = latest_outcomes(evidence.outcomes).select("decision_id", pl.col("status").alias("latest_outcome"))
drivers = (evidence.decisions.join(latest, on="decision_id", how="left")
           .select("decision_id", "created_at", "policy_version", "verdict", "matched_rule_id", "latest_outcome",
                   "facts_json")
           .sort("created_at").collect())
assert drivers.height == len(ids), "every decision id a finding names is in the dataset"
drivers

# %%
# Facts have no fixed schema: each column's type is inferred from every row, not the first ones.
facts = pl.DataFrame([json.loads(text) for text in drivers["facts_json"].to_list()], infer_schema_length=None)
numeric = [name for name, dtype in facts.schema.items() if dtype.is_numeric() and FACT_NAME.fullmatch(name)]
facts

# %% [markdown]
# Each decision's value of the policy's first numeric fact over time: the evidence is ringed,
# decisions whose latest outcome is a failure are red.

# %%
fact = "amount" if "amount" in numeric else (numeric[0] if numeric else None)
if fact is not None:
    points = fact_points(frames, fact, ids)
    fig = plots.fact_over_time(points, fact, versions, f"{policy}: {fact} per decision")

# %% [markdown]
# ## 4. How the evidence turned out
# The effectiveness report of exactly the evidence decisions: their latest outcomes.

# %%
outcome_report = effectiveness_report(evidence, policy, ReportParams(min_sample=1))
counts = outcome_report["sample"]["latest_outcome_counts"]
fig = plots.outcome_counts(counts, CLASSES, f"{policy}: latest outcome of the {len(ids)} evidence decisions")
print(outcome_report["sample"]["outcome_classes"])

# %% [markdown]
# ## 5. Conclusion
# Written from the figures above (the finding, the per-version reports and the evidence's
# outcomes), so it changes when they do.

# %%
rows = {row["policy_version"]: row for row in by_version.iter_rows(named=True)}
before, after = rows.get(change["previous"]), rows.get(change["current"])
failed = outcome_report["sample"]["outcome_classes"]["failure"]
lines = [f"Policy {policy} ({SCOPE}): {report['anomaly_count']} anomalies, recommendation {report['recommendation']}."]
# The finding followed, in its own words: its headline, its score and its statistic, and its evidence.
lines.append(f"The finding followed ({finding['anomaly_id']}): {finding['reasons'][0]}; it scores "
             f"{numbers.score(finding['anomaly_score'])} ({finding['severity']}): {finding['reasons'][-1]}; {failed} of its "
             f"{len(ids)} evidence decisions ended in failure.")
rates = [row["failure_rate"] for row in (before, after) if row] if before and after else []
if finding["dimension"] == "policy_version" and finding["value"] == change["current"] and len(rates) == 2 \
        and None not in rates:
    first = versions.filter(pl.col("policy_version") == change["current"])["first_decision"][0]
    lines.append(f"Per version (the effectiveness reports above): failure rate {numbers.rate(before['failure_rate'])} "
                 f"({before['resolved']} resolved) under {change['previous']}, {numbers.rate(after['failure_rate'])} "
                 f"({after['resolved']} resolved) under {change['current']}, first used {first:%Y-%m-%d}; "
                 f"effectiveness {numbers.score(before['effectiveness_score'])} -> {numbers.score(after['effectiveness_score'])}.")
    if after["failure_rate"] > before["failure_rate"]:
        lines.append("The change of version is the lead: draft a fix and measure it over history "
                     "(notebook migration_impact).")
conclusion = "\n".join(lines)
# One anomaly's words, score and evidence: never one finding's headline beside another's figures.
assert finding["reasons"][0] in conclusion and numbers.score(finding["anomaly_score"]) in conclusion
assert all(other["reasons"][0] not in conclusion for other in report["anomalies"] if other is not finding)
print(conclusion)
