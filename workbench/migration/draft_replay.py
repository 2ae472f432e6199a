"""Batch counterfactuals: one draft rulebook (or a patched one) over many stored decisions.

The draft is validated by the gate (`gate.rulebook`), compiled to Polars expressions
(`workbench.engines.rulebook_polars`) and evaluated column-wise over the decisions' typed facts
(`workbench.dataset.facts`); the rows the typed columns cannot hold exactly are evaluated by the gate's
scalar evaluator, and rows without facts are counted as not replayable. The engine
`workbench.engines.counterfactuals` then gives transitions and outcome impact.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import polars as pl

from gate.protocol.canonical import sha256_hex
from gate.rulebook import get_evaluator
from gate.rulebook.compile import rule_order
from gate.strict_json import JsonValue
from workbench.dataset.convert import frame_of
from workbench.dataset.facts import facts_table
from workbench.dataset.load import Frames
from workbench.engines import counterfactuals as engine
from workbench.engines.rulebook_polars import (
    REPLAY_SCALAR,
    REPLAY_VECTOR,
    compile_rulebook,
    evaluate,
)
from workbench.reports.policy import CLASSES


def draft_replay(draft: Mapping[str, JsonValue]) -> Callable[[pl.LazyFrame], pl.LazyFrame]:
    """A replay function for the engine: adds `new_verdict` and `new_rule_id` to decisions.
    Raises `gate.errors.RulebookInvalid` (with every error path) for an invalid draft."""
    draft = dict(draft)
    evaluator = get_evaluator(draft, sha256_hex(draft))
    document = evaluator.document  # the draft, validated
    compiled = compile_rulebook(document, [rule["rule_id"] for rule in rule_order(document["rules"])])

    def replay(decisions: pl.LazyFrame) -> pl.LazyFrame:
        rows = decisions.collect()
        if not rows.height:
            return rows.lazy().with_columns(pl.lit(None, pl.String).alias("new_verdict"),
                                            pl.lit(None, pl.String).alias("new_rule_id"))
        facts = frame_of(facts_table(rows.to_arrow()))
        result = evaluate(facts.lazy(), compiled).select("decision_id", "replay", "verdict", "matched_rule_id").collect()
        scalar_ids = set(result.filter(pl.col("replay") == REPLAY_SCALAR)["decision_id"].to_list())
        fixes = []
        for decision_id, text in rows.select("decision_id", "facts_json").iter_rows():
            if decision_id in scalar_ids:
                outcome = evaluator.evaluate(json.loads(text))
                fixes.append((decision_id, outcome.decision, outcome.matched_rule_id))
        new = result.select(
            "decision_id",
            pl.when(pl.col("replay") == REPLAY_VECTOR).then(pl.col("verdict")).alias("new_verdict"),
            pl.when(pl.col("replay") == REPLAY_VECTOR).then(pl.col("matched_rule_id")).alias("new_rule_id"),
        )
        if fixes:
            fixed = pl.DataFrame(fixes, schema={"decision_id": pl.String, "v": pl.String, "r": pl.String}, orient="row")
            new = new.join(fixed, on="decision_id", how="left").select(
                "decision_id", pl.coalesce("new_verdict", "v").alias("new_verdict"),
                pl.coalesce("new_rule_id", "r").alias("new_rule_id"))
        return rows.lazy().join(new.lazy(), on="decision_id", how="left")

    return replay


def batch_counterfactual(frames: Frames, draft: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The counterfactual report body of `draft` over the decisions of `frames`."""
    identity = {"rulebook_id": draft.get("rulebook_id"), "version": draft.get("version"),
                "rulebook_hash": sha256_hex(dict(draft))}
    return engine.counterfactuals(frames.decisions, frames.outcomes, CLASSES, draft_replay(draft), draft=identity)
