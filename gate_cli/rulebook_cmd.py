"""`gate rulebook lint|diff|flips`: the exact rulebook analysis on files, for authors and CI.

Works offline with only the core installed (imports `gate` only). Files are Rulebook v1 JSON
documents, read with the service's strict parser.

Exit codes (the same for every subcommand, documented in docs/rulebook-analysis.md):
  0  clean (lint: no warning) / equivalent (diff) / flips listed
  1  lint found warnings (with --strict: any finding) / diff found differences
  2  a file is unreadable, not strict JSON, or not a valid Rulebook v1 (the exact schema
     paths are printed: `rulebook.rules[0].condition.operator`); nothing is analysed
  3  inconclusive: the analysis was not exact (sampling) and found nothing
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import CodedError, RulebookInvalid
from gate.protocol.canonical import CanonicalJSONError, parse_strict
from gate.rulebook import RulebookDocument, checked_rulebook
from gate.vocabulary import NEEDS_INPUT_STATUS
from gate_cli.help import Subparsers
from gate_cli.numbers import near_text, witness_text

if TYPE_CHECKING:  # the analysis modules load only for the command that runs them (below)
    from gate.rulebook.analysis import LabelJSON

EXIT_CLEAN, EXIT_FINDINGS, EXIT_INVALID, EXIT_INCONCLUSIVE = 0, 1, 2, 3


class _BadInput(CodedError):
    """A file `gate rulebook` cannot read: `body` is what --json prints, exit status 2."""

    CODE = "RULEBOOK_INPUT_INVALID"

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(body["message"])
        self.body = body


def _load(path: str, what: str = "rulebook") -> Any:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise _BadInput({"file": path, "problem": "unreadable", "message": f"cannot read {path}: {exc.strerror}"}) from exc
    try:
        return parse_strict(data)
    except CanonicalJSONError as exc:
        raise _BadInput({"file": path, "problem": "invalid_json", "code": exc.code,
                         "message": f"{path} is not valid JSON: {exc.message}"}) from exc


def _rulebook(path: str) -> RulebookDocument:
    try:
        return checked_rulebook(_load(path))
    except RulebookInvalid as exc:
        errors = exc.errors
        raise _BadInput({"file": path, "problem": "invalid_rulebook", "code": "RULEBOOK_INVALID",
                         "message": f"{path} is not a valid Rulebook v1 ({len(errors)} errors)", "errors": errors}) from None


def _fail(exc: _BadInput, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"error": exc.body}, indent=2))
    else:
        print(f"gate rulebook: {exc.body.get('code', exc.code)}: {exc.message}", file=sys.stderr)
        for error in exc.body.get("errors", []):
            print(f"  {error['field']}: {error['code']}: {error['message']}", file=sys.stderr)
    return EXIT_INVALID


def _label(label: LabelJSON) -> str:
    rule = f"rule {label['rule_id']}" if label["rule_id"] else (
        NEEDS_INPUT_STATUS if label["status"] != "ok" else "default outcome")
    return f"{rule} ({label['decision']}/{label['verdict']}/{label['reason_code']})"


def cmd_lint(args: argparse.Namespace) -> int:
    # Lazy (here and below): the analysis modules load only for the command that runs them.
    from gate.rulebook.analysis import group_findings, lint

    try:
        book = _rulebook(args.file)
    except _BadInput as exc:
        return _fail(exc, args.json)
    report = lint(book)
    body = report.to_json()
    failing = body["findings"] if args.strict else report.warnings
    if args.json:
        print(json.dumps(body, indent=2))
    else:
        counts = body["counts"]
        print(f"{book['rulebook_id']} {book['version']}: {counts['warning']} warnings, {counts['info']} notes "
              f"({body['method']})")
        for reason in body["inexact"]:
            print(f"  not exact: {reason['reason']}")
        for group in group_findings(body["findings"]):  # one line per distinct finding, then its regions
            many = f" ({group['count']} regions)" if group["count"] > 1 else ""
            print(f"{group['severity']:7} {group['code']}{many}: {group['message']}")
            for region in group["regions"]:
                if region.get("text"):
                    print(f"          where {region['text']}")
                if region.get("witness") is not None:
                    print(f"          e.g. {witness_text(region['witness'], region.get('where'))}")
    if failing:
        return EXIT_FINDINGS
    return EXIT_CLEAN if report.exact else EXIT_INCONCLUSIVE


def cmd_diff(args: argparse.Namespace) -> int:
    from gate.rulebook.analysis import semantic_diff

    try:
        old, new = _rulebook(args.old), _rulebook(args.new)
    except _BadInput as exc:
        return _fail(exc, args.json)
    report = semantic_diff(old, new, compare=args.compare)
    body = report.to_json()
    if args.json:
        print(json.dumps(body, indent=2))
    else:
        print(f"{old['rulebook_id']} {old['version']} -> {new['rulebook_id']} {new['version']}: {body['verdict']} "
              f"({body['method']}, compared by {args.compare}, {body['difference_count']} regions)")
        for reason in body["inexact"]:
            print(f"  not exact: {reason['reason']}")
        for item in body["differences"]:
            print(f"- {_label(item['old'])} -> {_label(item['new'])}")
            if item["text"]:
                print(f"    where {item['text']}")
            print(f"    e.g. {witness_text(item['witness'], item.get('where'))}")
    if report.differences:
        return EXIT_FINDINGS
    return EXIT_CLEAN if report.exact else EXIT_INCONCLUSIVE


def cmd_flips(args: argparse.Namespace) -> int:
    from gate.rulebook.analysis import minimal_flips

    try:
        book = _rulebook(args.file)
        facts = _load(args.facts, "facts")
        if not isinstance(facts, dict):
            raise _BadInput({"file": args.facts, "problem": "invalid_facts",
                             "message": f"{args.facts} must hold a JSON object of facts"})
    except _BadInput as exc:
        return _fail(exc, args.json)
    flips = [flip.to_json() for flip in minimal_flips(book, facts, compare=args.compare)]
    if args.json:
        print(json.dumps({"kind": "rulebook_minimal_flips", "flips": flips}, indent=2))
    else:
        for flip in flips:
            before = "missing" if flip["from_missing"] else json.dumps(flip["from"])
            anchors = [flip["threshold"]["value"]] if flip["threshold"] else []
            after = "missing" if flip["to_missing"] else near_text(flip["to"], anchors + [flip["from"]])
            print(f"{flip['field']}: {before} -> {after} ({flip['change']}): "
                  f"{_label(flip['old'])} -> {_label(flip['new'])}")
    return EXIT_CLEAN


def add_rulebook_parser(sub: Subparsers) -> None:
    rb = sub.add_parser("rulebook")
    rsub = rb.add_subparsers(dest="rulebook_command", required=True)
    compare: dict[str, Any] = {"choices": ["outcome", "decision", "rule"], "default": "outcome",
               "help": "what counts as a different result (default: outcome)"}
    p = rsub.add_parser("lint", help="dead and shadowed rules, overlaps, fall-through, undeclared fields")
    p.add_argument("file")
    p.add_argument("--json", action="store_true")
    p.add_argument("--strict", action="store_true", help="exit 1 on any finding, not only warnings")
    p.set_defaults(func=cmd_lint)
    p = rsub.add_parser("diff", help="every input region whose result changes between two versions")
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--json", action="store_true")
    p.add_argument("--compare", **compare)
    p.set_defaults(func=cmd_diff)
    p = rsub.add_parser("flips", help="the smallest single-fact changes that change one decision")
    p.add_argument("file")
    p.add_argument("facts", help="a JSON file holding the decision's facts object")
    p.add_argument("--json", action="store_true")
    p.add_argument("--compare", **compare)
    p.set_defaults(func=cmd_flips)
