"""The one error a dry-run raises for bad input, before it writes anything."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from gate.errors import GateError


class DryRunErrorBody(TypedDict):
    """`DryRunError.to_dict`: what `gate dry-run` prints for a refused run."""

    error: str
    message: str
    errors: NotRequired[list[dict[str, str]]]  # the validator's {field, code, message}


class DryRunError(GateError):
    """Bad input to a dry-run: nothing was computed or written.

    `code` is a stable machine string: `DRAFT_UNREADABLE` (not a file of JSON),
    `DRAFT_INVALID` (`errors` holds the validator's `{field, code, message}` with exact paths),
    `DRAFT_RULEBOOK_MISMATCH` (the draft is of another rulebook id), `RULEBOOK_UNKNOWN` (no
    decision of that rulebook id anywhere in the history), `HISTORY_EMPTY` (none in the chosen
    scope), `DATASET_INVALID` (no manifest, unreadable, or another schema version),
    `SIGNING_KEY_MISSING` (the service's receipt key is required and absent), `DATASET_STALE` (a
    signed result over a dataset behind the live ledger, without --allow-stale), `USAGE` (a
    command-line argument is missing or out of range), `SWEEP_INVALID` (a threshold sweep's rule,
    field, comparison or range cannot be swept: workbench.migration.sweep), `BASELINE_INVALID` (the
    version a draft is compared with is not a valid rulebook of the same id, or there is none to
    compare with: workbench.migration.baseline).
    """

    def __init__(self, code: str, message: str, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(code, message, **({"errors": errors} if errors else {}))
        self.errors = errors or []

    def __reduce__(self) -> tuple[type[DryRunError], tuple[str, str, list[dict[str, str]]]]:
        """Pickled whole (raised on a cluster's worker, re-raised on the client)."""
        return DryRunError, (self.code, self.message, self.errors)

    def to_dict(self) -> DryRunErrorBody:
        body: DryRunErrorBody = {"error": self.code, "message": self.message}
        if self.errors:
            body["errors"] = self.errors
        return body
