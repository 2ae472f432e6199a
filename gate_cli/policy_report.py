"""The Markdown `gate plan` and `gate apply` print: a pull-request comment.

It renders the plan's signed manifests and analysis reports, never a recomputation. Every value a
caller chose (scope, rulebook id, version, rule ids, fact names, lint messages that quote them) is
text, never markup: through `workbench.reports.textsafe.md_text`/`md_cell`, so a rulebook cannot
put a link, an image or HTML into the comment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gate.vocabulary import VERDICTS
from workbench.reports.textsafe import md_cell, md_text

if TYPE_CHECKING:
    from gate.rulebook.analysis import DiffReportJSON, LabelJSON, LintReportJSON
    from gate_cli.policy_repo import Change, Plan
    from workbench.migration.manifest import MigrationManifest

__all__ = ["plan_markdown"]

_DIFF_LISTED = 10
_LINT_LISTED = 10


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows] + [""]


def _label(label: LabelJSON) -> str:
    rule = f"rule {label['rule_id']}" if label.get("rule_id") else "default outcome"
    return f"{rule} ({label['decision']}/{label['verdict']}/{label['reason_code']})"


def plan_markdown(plan: Plan, applied: bool, failed: bool) -> str:
    title = "gate apply" if applied else "gate plan"
    lines = [f"## {title}: {len(plan.changes)} changed, {len(plan.unchanged)} unchanged", ""]
    if failed:
        lines += ["**--fail-on met**: " + md_text("; ".join(
            f"{c.file.scope}/{c.file.rulebook_id}: {', '.join(c.met)}" for c in plan.changes if c.met))
                  + (" (nothing applied)" if applied else ""), ""]
    for change in plan.changes:
        lines += _change(change)
    if plan.unchanged:
        lines += ["Unchanged: " + ", ".join(md_text(f"{f.scope}/{f.rulebook_id} {f.version}"
                                                    + (f" ({plan.done[f.path]})" if f.path in plan.done else ""))
                                            for f in plan.unchanged), ""]
    return "\n".join(lines)


def _change(change: Change) -> list[str]:
    body = change.to_json()
    head = (f"### {md_text(body['scope'])} / {md_text(body['rulebook_id'])}: "
            f"{md_text(body['from_version'] or 'nothing runs')} → {md_text(body['to_version'])}")
    lines = [head, "", f"Compared with: {md_text(body['baseline'])}; file {md_text(body['file'])}", ""]
    if change.applied is not None:
        a = change.applied
        lines += [md_text(f"Applied: {a['action']} event {a['event_seq']} ({a['result']}) by {a['actor']}, "
                          f"version {'published' if a['published'] else 'already published'}"), ""]
    manifest = change.manifest
    if manifest is None:
        lines += [md_text(change.note or "no dry-run"), ""]
    else:
        lines += _dry_run(manifest, change.figures())
    lines += _diff(change.diff) + _lint(change.lint)
    return lines


def _dry_run(manifest: MigrationManifest, figures: dict[str, int]) -> list[str]:
    # Lazy: the migration package loads its manifest schema (jsonschema), a plan of no change needs neither.
    from workbench.migration.impact import impact_rows

    d = manifest["dry_run"]
    matrix = {(t["from"], t["to"]): t["count"] for t in d["transitions"]}
    lines = [md_text(f"{d['decisions_evaluated']:,} decisions replayed over the full history, "
                     f"{d['decisions_changed']:,} change verdict, {d['decisions_unreplayable']:,} could not be "
                     "replayed (no facts)."), "", "Flips (current → draft):", ""]
    lines += _table(["from \\ to", *VERDICTS], [[v, *[f"{matrix.get((v, w), 0):,}" for w in VERDICTS]] for v in VERDICTS])
    lines += _table(["impact", ""], [[k, v] for k, v in impact_rows(d.get("impact"))])
    lines += [md_text(f"Known failures: {figures['failures_caught']:,} caught (approved, failed, no longer "
                      f"approved); {figures['lost_failures']:,} lost (failed, approved now and not before)."), ""]
    review = d["review_load"]
    lines += ["Review-load forecast:", ""]
    lines += _table(["month", "replayed", "reviews (current)", "reviews (draft)"],
                    [[r["month"], r["replayed"], r["review_before"], r["review_after"]] for r in review["by_month"][-6:]])
    lines += [md_text(f"Review queue {review['before']:,} → {review['after']:,} "
                      f"({review['per_month_before']:,} → {review['per_month_after']:,} per month)."), ""]
    signature = manifest.get("signature")
    lines += [md_text(f"Signed manifest: migration hash {manifest.get('migration_hash')}, "
                      + (f"{signature['algorithm']} key {signature['key_id']}" if signature else "unsigned")),
              ""]
    return lines


def _diff(diff: DiffReportJSON | None) -> list[str]:
    if diff is None:
        return ["Semantic diff: no version runs in the scope (a new rulebook).", ""]
    lines = [md_text(f"Semantic diff: {diff['verdict']} ({diff['method']}, {diff['difference_count']} regions)"), ""]
    for item in diff["differences"][:_DIFF_LISTED]:
        where = f" where {item['text']}" if item.get("text") else ""
        lines.append("- " + md_text(f"{_label(item['old'])} → {_label(item['new'])}{where}"))
    if diff["difference_count"] > _DIFF_LISTED:
        lines.append("- " + md_text(f"… {diff['difference_count'] - _DIFF_LISTED} more (gate rulebook diff)"))
    return lines + [""]


def _lint(report: LintReportJSON) -> list[str]:
    from gate.rulebook.analysis import group_findings

    counts = report["counts"]
    lines = [md_text(f"Lint: {counts['warning']} warnings, {counts['info']} notes ({report['method']})"), ""]
    for group in group_findings(report["findings"])[:_LINT_LISTED]:
        lines.append("- " + md_text(f"{group['severity']} {group['code']}: {group['message']}"))
    return lines + [""]
