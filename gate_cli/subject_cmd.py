"""`gate subject export KEY --scope S [--dataset DIR] [--format json|text]`: a data subject's data on
request (GDPR Art. 15; issue 67, item 5; docs/privacy.md, "A subject's export"), through the same
`SubjectService` as `POST /api/subjects/exports`, page after page to the scope's end, and, with
`--dataset`, the dataset rows that hold the subject's values (`workbench.dataset.subjects`, found
by the keyed hash the export wrote: run it with the `GATE_HOME` or `GATE_PRIVACY_KEY` of `gate serve`).

The local operator holds the ledger: the export is theirs to run. The subject's values are printed
(the subject asked for them) and logged nowhere. In text, every caller-supplied or stored value is
printed as JSON (a key with a line break or markup stays one line, as data).

Exit status (docs/errors.md): 0 the subject's data was listed; 3 done, and nothing of the subject was
found (the scope holds no decision, hold, event or dataset row naming the key: a distinct answer to
an access request, and the status a misspelt key gives); 2 refused (`gate subject: CODE: message`:
SUBJECT_KEY_UNDECLARED, SUBJECT_EXPORT_INVALID, DATASET_INVALID, …).

`gate subject erase --scope S (--subject KEY | --subject-file PATH)` (also `gate erase`) asks to
erase a subject (GDPR Art. 17; issue 67, item 4; docs/privacy.md, "Erasure") through the same
`ErasureService` as `POST /api/subjects/erasures`, as the principal `operator:<login>` (the
process's login; no option names anyone else): a signed request naming the decisions found, which
a second, distinct holder approves (`gate subject erase-approve --request-seq N`, run by another
login, or `POST /api/subjects/erasures/approvals`); `gate subject erase-resume` finishes an
approved erasure whose removal did not run. `--subject-file -` reads the key from stdin, so it
lands in no shell history (one trailing line break is not part of it). Exit status: 0 requested
(or approved, or resumed); 2 refused (SUBJECT_NOT_FOUND, SUBJECT_ERASURE_INVALID,
GOVERNANCE_SELF_APPROVAL, …). Nothing printed holds the subject's value.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from gate_cli.context import (
    DONE,
    OPERATOR_PERMISSIONS,
    REPORTED,
    CliError,
    load_settings,
    open_ledger,
    operator,
)
from gate_cli.help import Subparsers

if TYPE_CHECKING:
    from gate.services.erasure import ErasureService
    from gate.services.subjects import SubjectExport, SubjectService


def add_subject_parser(sub: Subparsers) -> None:
    subject = sub.add_parser("subject")
    ssub = subject.add_subparsers(dest="subject_command", required=True)
    export = ssub.add_parser("export", help="list what the scope holds of one subject, with the members holding "
                                            "their values (exit 3 when nothing is found)")
    export.add_argument("key", help="the subject's key: the value the scope's data map's subject_key holds")
    export.add_argument("--scope", required=True, help="the scope (required)")
    export.add_argument("--dataset", default=None,
                        help="also search this exported dataset (a folder or URL; default: the ledger only)")
    export.add_argument("--format", choices=("json", "text"), default="text",
                        help="json: the whole export as one JSON document; text: one line per item (default: text)")
    _erase_arguments(ssub.add_parser("erase", help="ask to erase a subject (GDPR Art. 17): a signed request a "
                                                   "second, distinct holder approves"))
    approve = ssub.add_parser("erase-approve", help="approve another holder's pending erasure: the named decisions' "
                                                    "inputs are removed (never your own request)")
    approve.add_argument("--scope", required=True, help="the scope (required)")
    approve.add_argument("--request-seq", type=int, required=True, help="the request's seq (required)")
    approve.add_argument("--reason", default=None, help="why, for the record (default: none)")
    resume = ssub.add_parser("erase-resume", help="remove what the scope's approved erasures named and is still "
                                                  "there (an approval whose removal did not run)")
    resume.add_argument("--scope", required=True, help="the scope (required)")
    subject.set_defaults(func=cmd_subject)


def add_erase_parser(sub: Subparsers) -> None:
    erase = sub.add_parser("erase")
    _erase_arguments(erase)
    erase.set_defaults(func=cmd_subject, subject_command="erase")


def _erase_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scope", required=True, help="the scope (required)")
    key = parser.add_mutually_exclusive_group(required=True)
    key.add_argument("--subject", default=None, help="the subject's key (it lands in your shell history: prefer "
                                                    "--subject-file; this or --subject-file is required)")
    key.add_argument("--subject-file", default=None, help="a file holding the subject's key; - reads it from stdin "
                                                          "(this or --subject is required)")
    parser.add_argument("--reason", default=None, help="why, for the signed record (a ticket number; never the "
                                                       "subject's value) (default: none)")


def read_subject(args: argparse.Namespace) -> str:
    """The key from --subject, or from --subject-file (stdin for `-`), one trailing line break off."""
    if args.subject is not None:
        return str(args.subject)
    try:
        if args.subject_file == "-":
            text = sys.stdin.read()
        else:
            with open(args.subject_file, encoding="utf-8") as handle:
                text = handle.read()
    except (OSError, UnicodeError) as exc:
        raise CliError(f"cannot read the subject's key from {args.subject_file}: {exc}") from exc
    return text.removesuffix("\n").removesuffix("\r")


def cmd_subject(args: argparse.Namespace) -> int:
    from gate.services.root import erasure_service, subject_service

    if args.subject_command != "export":
        settings = load_settings()
        ledger = open_ledger(settings)
        try:
            return _erasure(args, erasure_service(ledger, settings))
        finally:
            ledger.dispose()
    settings = load_settings()
    ledger = open_ledger(settings)
    try:
        service = subject_service(ledger, settings)
        document = whole_export(service, args.scope, args.key)
        if args.dataset is not None:
            document["dataset"] = _dataset(service, args, document)
    finally:
        ledger.dispose()
    print(json.dumps(document, indent=2, ensure_ascii=False) if args.format == "json" else export_text(document))
    found = any(document[name] for name in ("decisions", "holds", "events", "dataset") if name in document)
    return DONE if found else REPORTED


def _erasure(args: argparse.Namespace, service: ErasureService) -> int:
    """Ask, approve or resume an erasure as the local operator; prints the answer as JSON."""
    command = args.subject_command
    if command == "erase-resume":
        print(json.dumps({"scope": args.scope, "removed": service.resume(args.scope)}, indent=2))
        return DONE
    if command == "erase-approve":
        print(json.dumps(service.approve(args.scope, operator(), OPERATOR_PERMISSIONS, args.request_seq, args.reason),
                         indent=2))
        return DONE
    body = {"subject": read_subject(args), "reason": args.reason}
    answer = service.request(args.scope, operator(), OPERATOR_PERMISSIONS, body)
    print(json.dumps(answer, indent=2))
    print(f"gate subject: erasure request {answer['request_seq']} of {len(answer['decisions'])} decision(s) waits "
          "for a second, distinct holder (gate subject erase-approve, or POST /api/subjects/erasures/approvals)",
          file=sys.stderr)
    return DONE


def whole_export(service: SubjectService, scope: str, key: str) -> dict[str, Any]:
    """Every page of the subject's export, joined (each call reads a bounded page; `next` goes on)."""
    page: SubjectExport = service.export(scope, key)
    whole: dict[str, Any] = {**page, "scanned": dict(page["scanned"])}
    while page["next"] is not None:
        page = service.export(scope, key, page["next"])
        for name in ("decisions", "holds", "events"):
            whole[name].extend(page[name])
        for name, count in page["scanned"].items():
            whole["scanned"][name] += count
    del whole["next"]
    return whole


def _dataset(service: SubjectService, args: argparse.Namespace, document: dict[str, Any]) -> list[Any]:
    from gate.services.subjects import subject_tokens
    from workbench.dataset.subjects import dataset_rows

    ids = [decision["decision_id"] for decision in document["decisions"]]
    values = {member["value"] for decision in document["decisions"] for member in decision["members"]
              if isinstance(member["value"], str)}
    tokens = subject_tokens(service.privacy, args.scope, args.key)
    return list(dataset_rows(args.dataset, args.scope, ids, tokens, values))


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def export_text(document: dict[str, Any]) -> str:
    """One line per decision, hold, event and dataset row; values as JSON, so a line break in a
    value never starts a line of its own."""
    scanned = document["scanned"]
    head = (f"subject {_j(document['subject'])} of scope {_j(document['scope'])} (subject key "
            f"{document['subject_key']}; read {scanned['decisions']} decisions, {scanned['events']} events)")
    lines = [head]
    for d in document["decisions"]:
        rulebook = d["rulebook"]
        lines.append(f"decision {d['decision_id']} {d['created_at']} {rulebook['id']}@{rulebook['version']} "
                     f"{d['verdict']}")
        lines.extend(f"  {m['path']} ({m['kind']}) = {_j(m['value'])}" for m in d["members"])
        lines.extend(f"  record {pointer}" for pointer in d["record_members"])
    lines.extend(f"hold {h['hold_id']} {h['state']} queue {h['queue']}: {', '.join(h['members']) or '-'}"
                 for h in document["holds"])
    lines.extend(f"event {e['event_id']} #{e['seq']} {e['type']} of {e['decision_id']}: "
                 f"{', '.join(e['members']) or '-'}" for e in document["events"])
    lines.extend(f"dataset {r['table']} {r['decision_id']}: {', '.join(r['members']) or '-'}"
                 for r in document.get("dataset", []))
    if len(lines) == 1:
        lines.append("nothing of this subject was found")
    return "\n".join(lines)
