"""Markdown and self-contained HTML for a rulebook migration dry-run.

Both render the signed manifest (`workbench.migration.manifest`), never a recomputation, so
what a reviewer reads is exactly what was signed. Every value that comes from the manifest is
text, never markup: Markdown cells and prose through `workbench.reports.textsafe.md_cell`/`md_text`,
HTML through `html_text` (a draft's `version` or `action` is whatever its author typed). The HTML holds its charts as inline SVG and
its style inline: it opens offline, with no script and no network request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.vocabulary import VERDICTS
from workbench.migration.baseline import compared_with
from workbench.migration.holdcost import hold_cost_text
from workbench.migration.impact import impact_rows
from workbench.reports import numbers, svg
from workbench.reports.textsafe import html_text, md_cell, md_text

__all__ = ["render_html", "render_markdown"]

_TOP = 15


def _rule(rule_id: Any) -> str:
    return "(default outcome)" if rule_id is None else str(rule_id)


def _pct(part: int, whole: int) -> str:
    return numbers.rate(part / whole if whole else None)


def _headline(m: Mapping[str, Any]) -> list[tuple[str, str]]:
    d = m["dry_run"]
    review = d["review_load"]
    change = review["relative_change"]
    return [
        ("Rulebook", f"{m['rulebook_id']} → draft version {m['to']['version']}"),
        ("Scope", d["scope"] or "all scopes"),
        ("Draft hash", m["to"]["rulebook_hash"]),
        ("History", f"{d['source']['kind']} {d['source']['location']} (sha256 {d['source']['hash']})"),
        ("Baseline", compared_with(d.get("baseline")).capitalize()),
        ("Decisions in history", f"{d['decisions_total']:,}"),
        ("Replayed", f"{d['decisions_evaluated']:,} ({d['decisions_scalar']:,} by the scalar evaluator)"),
        ("Could not replay (no facts)", f"{d['decisions_unreplayable']:,}"),
        ("Inputs removed (never counted as changed)", _removed_text(d.get("inputs_removed"))),
        ("Verdict changed", f"{d['decisions_changed']:,} ({_pct(d['decisions_changed'], d['decisions_evaluated'])})"),
        *impact_rows(d.get("impact")),
        ("Review queue", (f"{review['before']:,} → {review['after']:,} "
                          f"({numbers.signed_rate(change)}; "
                          f"{review['per_month_before']:,} → {review['per_month_after']:,} per month)")),
        ("Cost of a hold", hold_cost_text(review.get("hold_cost"))),
        ("Expected drift", (f"{m['expected_drift']['policy']} ({', '.join(m['expected_drift']['fields']) or 'none'}); "
                            f"approval {m['approval']['status']}")),
        ("Signed", f"{m['signature']['algorithm']} key {m['signature']['key_id']}" if m.get("signature") else "unsigned"),
    ]


def _old_side(d: Mapping[str, Any]) -> str:
    """The transitions' old side: the current version's verdicts, or the history's."""
    return "current" if (d.get("baseline") or {}).get("kind") == "version" else "history"


def _md_table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return out + [""]


def render_markdown(m: Mapping[str, Any]) -> str:
    d = m["dry_run"]
    lines = [f"# Dry-run of a draft of {md_text(m['rulebook_id'])}", ""]
    lines += _md_table(["", ""], [[k, v] for k, v in _headline(m)])
    matrix = {(t["from"], t["to"]): t["count"] for t in d["transitions"]}
    lines += [f"## Verdict transitions ({_old_side(d)} → draft)", ""]
    lines += _md_table(["from \\ to", *VERDICTS], [[v, *[f"{matrix.get((v, w), 0):,}" for w in VERDICTS]] for v in VERDICTS])
    lines += ["### By rule (old rule → new rule, largest first)", ""]
    lines += _md_table(["from", "to", "old rule", "new rule", "decisions"],
                       [[c["from"], c["to"], _rule(c["old_rule"]), _rule(c["new_rule"]), f"{c['count']:,}"]
                        for c in d["rule_transitions"][:40]])
    lines += ["## Drift by rule", ""]
    lines += _md_table(["rule", "history", "draft", "delta"],
                       [[_rule(r["rule_id"]), r["before"], r["after"], f"{r['delta']:+,}"] for r in d["drift_by_rule"]])
    lines += ["## Drift by reason code", ""]
    lines += _md_table(["reason code", "history", "draft", "delta"],
                       [[r["reason_code"], r["before"], r["after"], f"{r['delta']:+,}"] for r in d["drift_by_reason"]])
    lines += ["## Flips and their known outcomes", ""]
    lines += _md_table(["from", "to", "decisions", "success", "failure", "excluded", "open", "no outcome", "unobservable"],
                       [[c["from"], c["to"], c["count"], c["success"], c["failure"], c["excluded"], c["open"],
                         c["none"], c["unobservable"]] for c in d["outcomes"]["by_transition"]])
    lines += [f"- {md_text(note)}" for note in d["notes"]] + [""]
    lines += [f"Most recent flips ({len(d['flips']['listed'])} of {d['flips']['count']:,}):", ""]
    lines += _md_table(["decision", "created", "from", "to", "old rule", "new rule", "outcome"],
                       [[f["decision_id"], f["created_at"], f["old_verdict"], f["new_verdict"], _rule(f["old_rule"]),
                         _rule(f["new_rule"]), f"{f['outcome_class']} ({f['outcome_status'] or '-'})"]
                        for f in d["flips"]["listed"][:50]])
    lines += ["## Review-queue forecast", ""]
    lines += _md_table(["month", "replayed", "reviews (history)", "reviews (draft)"],
                       [[r["month"], r["replayed"], r["review_before"], r["review_after"]] for r in d["review_load"]["by_month"]])
    lines += ["## Rules", ""]
    lines += _md_table(["rule (evaluation order)", "priority", "fired in history", "fires under draft"],
                       [[r["rule_id"], r["priority"], r["fired_in_history"], r["fires_under_draft"]] for r in d["rules"]])
    lines += [f"Never fired in history: {md_text(', '.join(d['rules_never_fired_in_history']) or 'none')}.",
              ("Never fires under the draft over this history: "
               f"{md_text(', '.join(d['rules_never_firing_under_draft']) or 'none')}."), ""]
    by_verdict = d["unreplayable"]["by_verdict"]
    lines += ["## Could not replay", "",
              (f"{d['unreplayable']['count']:,} decisions carry no facts in their record "
               f"(yes {by_verdict['yes']:,}, no {by_verdict['no']:,}, review {by_verdict['review']:,})."), ""]
    lines += ["## Attribution", "", f"- migration hash: {md_text(m.get('migration_hash'))}",
              f"- result hash: {md_text(d['result_hash'])}", f"- draft hash: {md_text(m['to']['rulebook_hash'])}",
              f"- history hash: {md_text(d['source']['hash'])}",
              "- check with: `gate dry-run --verify <this folder>`", ""]
    return "\n".join(lines)


def _html_table(header: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html_text(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html_text(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_STYLE = """body{font-family:system-ui,sans-serif;margin:2rem;max-width:1100px;color:#111}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #d0d7de;padding:.25rem .5rem;
text-align:left;font-size:.9rem}th{background:#f4f6f8}code{font-size:.85rem}.charts{display:flex;flex-wrap:wrap;gap:2rem}
.note{color:#555}"""


def render_html(m: Mapping[str, Any]) -> str:
    d = m["dry_run"]
    matrix = {(t["from"], t["to"]): t["count"] for t in d["transitions"]}
    drift = [(_rule(r["rule_id"]), r["before"], r["after"]) for r in d["drift_by_rule"][:_TOP]]
    reasons = [(str(r["reason_code"]), r["before"], r["after"]) for r in d["drift_by_reason"][:_TOP]]
    months = [(r["month"], r["review_before"], r["review_after"]) for r in d["review_load"]["by_month"]]
    parts = [
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        f"<title>Dry-run of {html_text(m['rulebook_id'])}</title><style>{_STYLE}</style></head><body>",
        f"<h1>Dry-run of a draft of <code>{html_text(m['rulebook_id'])}</code></h1>",
        _html_table(["", ""], [[k, v] for k, v in _headline(m)]),
        "<div class=\"charts\">",
        svg.heatmap(list(VERDICTS), list(VERDICTS), matrix, f"Verdict transitions ({_old_side(d)} → draft)"),
        svg.grouped_bars(drift, "Decisions by matched rule"),
        svg.grouped_bars(reasons, "Decisions by reason code"),
        svg.paired_series(months, "Review queue by month"),
        "</div>",
        "<h2>Transitions by rule</h2>",
        _html_table(["from", "to", "old rule", "new rule", "decisions"],
                    [[c["from"], c["to"], _rule(c["old_rule"]), _rule(c["new_rule"]), f"{c['count']:,}"]
                     for c in d["rule_transitions"][:100]]),
        "<h2>Flips and their known outcomes</h2>",
        _html_table(["from", "to", "decisions", "success", "failure", "excluded", "open", "no outcome", "unobservable"],
                    [[c["from"], c["to"], c["count"], c["success"], c["failure"], c["excluded"], c["open"],
                      c["none"], c["unobservable"]] for c in d["outcomes"]["by_transition"]]),
        "".join(f"<p class=\"note\">{html_text(note)}</p>" for note in d["notes"]),
        f"<h3>Most recent flips ({len(d['flips']['listed'])} of {d['flips']['count']:,})</h3>",
        _html_table(["decision", "created", "from", "to", "old rule", "new rule", "outcome"],
                    [[f["decision_id"], f["created_at"], f["old_verdict"], f["new_verdict"], _rule(f["old_rule"]),
                      _rule(f["new_rule"]), f"{f['outcome_class']} ({f['outcome_status'] or '-'})"]
                     for f in d["flips"]["listed"]]),
        "<h2>Rules</h2>",
        _html_table(["rule (evaluation order)", "priority", "fired in history", "fires under draft"],
                    [[r["rule_id"], r["priority"], r["fired_in_history"], r["fires_under_draft"]] for r in d["rules"]]),
        (f"<p>Never fired in history: {html_text(', '.join(d['rules_never_fired_in_history']) or 'none')}. "
         f"Never fires under the draft: {html_text(', '.join(d['rules_never_firing_under_draft']) or 'none')}.</p>"),
        "<h2>Attribution</h2>",
        _html_table(["", ""], [["migration hash", m.get("migration_hash")], ["result hash", d["result_hash"]],
                               ["draft hash", m["to"]["rulebook_hash"]], ["history hash", d["source"]["hash"]],
                               ["verify", "gate dry-run --verify <this folder>"]]),
        "</body></html>",
    ]
    return "\n".join(parts)


def _removed_text(removed: Any) -> str:
    """How many of the unreplayable had their inputs removed, and by what."""
    if not isinstance(removed, Mapping) or not removed.get("count"):
        return "0"
    by = ", ".join(f"{count:,} by {cause}" for cause, count in sorted(removed.get("by", {}).items()))
    return f"{removed['count']:,} ({by})"
