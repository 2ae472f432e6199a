"""A data subject's rows in the dataset (GDPR Art. 15; issue 67, item 5; docs/privacy.md, "A
subject's export"): beside the ledger's answer (`gate.services.subjects`), the `decisions` and
typed `facts` rows of the scope that hold the subject's values, as `gate export` wrote them.

A row is the subject's when its decision is one the ledger found for the subject, or when its
`facts_json` holds the subject's keyed hash (`gate.services.subjects.subject_tokens`, the token
the export's `dataset` rule wrote: a subject key under `context.inputs` is found so even after the
ledger no longer holds the request). Its members are JSON Pointers into `facts_json` (and, in the
facts table, the column names) whose value is a keyed hash or one of the decision's declared
values. Cost: one columnar scan of the scope's `decisions` files (three columns) and of the
subject's rows of each rulebook's facts files: the listed files, each checked against the
manifest's digests (`workbench.dataset.load.listed`), either layout.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

import polars as pl

from gate.privacy.masking import TOKEN_PREFIX, pointer
from workbench.dataset.load import read_manifest, scan_facts, scan_table


class DatasetRow(TypedDict):
    table: str
    decision_id: str
    created_at: str
    members: list[str]


def _pointers(node: Any, values: frozenset[str], at: str = "") -> Iterable[str]:
    if isinstance(node, str):
        if node.startswith(TOKEN_PREFIX) or node in values:
            yield at
    elif isinstance(node, Mapping):
        for name, value in node.items():
            yield from _pointers(value, values, at + pointer((str(name),)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _pointers(value, values, f"{at}/{index}")


def dataset_rows(root: str, scope: str, decision_ids: Sequence[str], tokens: Sequence[str],
                 values: Iterable[str] = ()) -> list[DatasetRow]:
    """The scope's dataset rows that hold the subject's values: those of `decision_ids` (the
    ledger's answer) and those whose `facts_json` holds one of `tokens`; `values`: the declared
    string values the ledger found, matched where a `keep` rule left them in clear."""
    manifest = read_manifest(root)
    wanted = pl.col("decision_id").is_in(list(decision_ids))
    for one in tokens:
        wanted = wanted | pl.col("facts_json").str.contains(one, literal=True)
    found = (scan_table(root, "decisions", [scope], manifest).filter(wanted)
             .select("decision_id", "created_at", "facts_json", "policy_id").collect())
    clear = frozenset(values)
    out: list[DatasetRow] = []
    for row in found.sort("created_at", "decision_id").iter_rows(named=True):
        facts = json.loads(row["facts_json"]) if row["facts_json"] else None
        out.append({"table": "decisions", "decision_id": row["decision_id"], "created_at": _text(row["created_at"]),
                    "members": ["/facts_json" + p for p in _pointers(facts, clear)]})
    ids = found["decision_id"].to_list()
    for rulebook_id in sorted({p for p in found["policy_id"].to_list() if p is not None}):
        out.extend(_facts_rows(root, manifest, scope, rulebook_id, ids, clear))
    return out


def _facts_rows(root: str, manifest: Any, scope: str, rulebook_id: str, ids: Sequence[str],
                clear: frozenset[str]) -> list[DatasetRow]:
    scanned = scan_facts(root, rulebook_id, [scope], manifest)
    if scanned is None:
        return []
    rows = scanned.filter(pl.col("decision_id").is_in(list(ids))).collect()
    out: list[DatasetRow] = []
    for row in rows.sort("decision_id").iter_rows(named=True):
        columns = sorted(name for name, value in row.items()
                         if isinstance(value, str) and name != "decision_id"
                         and (value.startswith(TOKEN_PREFIX) or value in clear))
        out.append({"table": f"facts/{rulebook_id}", "decision_id": row["decision_id"],
                    "created_at": _text(row.get("created_at")), "members": columns})
    return out


def _text(value: Any) -> str:
    """A timestamp column as the ISO 8601 UTC text the records hash."""
    if hasattr(value, "isoformat"):
        return str(value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z")
    return "" if value is None else str(value)
