"""Domain errors: one root of refusals (`GateError`), and `Signal` for internal turns.

A `GateError` is a fail-closed refusal: a stable machine `code`, a `message` and extra body
members (`details`). The core, the API, the CLI and the workbench raise these; `api/errors.py`
(`ERROR_TABLE`) is the only table from code to HTTP status and body, and the CLI prints the
message with its refusal exit status. A class of one code names it in `CODE` (a `CodedError`)
and is raised with its message alone.

A `Signal` is not an error: an internal turn the raiser's caller catches at once (a lost race
to retry, a fast path declined, a refusal one frame from being translated). No shell maps one
to a status or an exit code.

Expected verification failures are neither: they are values (see `gate.verify`).
"""

from __future__ import annotations

from typing import Any, ClassVar

_UNSET: Any = object()


class GateError(Exception):
    """A fail-closed refusal with a stable machine `code` and extra body `details`."""

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"


class CodedError(GateError):
    """A refusal of one code, which the class names (`CODE`): raised with its message alone."""

    CODE: ClassVar[str]

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(self.CODE, message, **details)


class Signal(Exception):
    """Not an error: an internal turn the raiser's caller catches at once (a lost race to
    retry, a fast path declined, a refusal one frame from being translated). No shell maps
    one to an HTTP status or an exit code."""


class RulebookInvalid(CodedError):
    """Rulebook failed validation; `details["errors"]` lists `{field, code, message}`."""

    CODE = "RULEBOOK_INVALID"

    def __init__(self, errors: list[dict[str, str]]) -> None:
        first = errors[0]["message"] if errors else "rulebook is invalid"
        super().__init__(f"Rulebook v1 validation failed: {first}", errors=errors)
        self.errors = errors  # the same list as `details["errors"]`, typed


class SigningUnavailable(CodedError):
    """Signing is required but no usable key is configured: no record may be produced."""

    CODE = "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"

    def __init__(self, message: str = "receipt signing is required but no signing key is configured") -> None:
        super().__init__(message)


class LedgerUnavailable(CodedError):
    """The ledger could not be read or written; nothing was stored."""

    CODE = "LEDGER_UNAVAILABLE"

    def __init__(self, message: str = "the decision ledger is unavailable; nothing was stored") -> None:
        super().__init__(message)


class MonthlyCapExceeded(CodedError):
    """The key's monthly record cap is used up; no record was created."""

    CODE = "SVC_API_MONTHLY_CAP_EXCEEDED"

    def __init__(self, cap: int, period: str, retry_after: int) -> None:
        super().__init__(f"monthly record cap of {cap} for {period} is exhausted", monthly_cap=cap, period=period,
                         retry_after=retry_after)


class RulebookVersionConflict(CodedError):
    """A (rulebook_id, version) pair is already bound to another hash, or to another trusted
    adapter dependency, in this scope.

    SECURITY: spec compatibility rules 2 and 3 — a pair can never silently rebind to a new hash,
    and a change of its adapter dependency needs a new rulebook version.
    """

    CODE = "RULEBOOK_VERSION_CONFLICT"

    def __init__(self, rulebook_id: str, version: str, registered_hash: str, supplied_hash: str,
                 *, registered_dependency: Any = _UNSET, supplied_dependency: Any = _UNSET) -> None:
        details: dict[str, object] = {}
        message = (f"rulebook {rulebook_id!r} version {version!r} is already registered with another hash; "
                   "publish the change under a new version")
        if registered_dependency is not _UNSET:
            message = (f"rulebook {rulebook_id!r} version {version!r} is bound to another trusted adapter "
                       "dependency; an adapter change needs a new rulebook version")
            details = {"registered_adapter_dependency": registered_dependency,
                       "supplied_adapter_dependency": supplied_dependency}
        super().__init__(
            message,
            rulebook_id=rulebook_id,
            version=version,
            registered_hash=registered_hash,
            supplied_hash=supplied_hash,
            **details,
        )


class IdempotencyConflict(CodedError):
    """Same idempotency key, different canonical payload: nothing was created."""

    CODE = "SVC_API_IDEMPOTENCY_CONFLICT"

    def __init__(self, idempotency_key: str, decision_id: str, input_hash: str, existing_input_hash: str) -> None:
        super().__init__(
            "this idempotency key was already used with a different payload",
            idempotency_key=idempotency_key,
            decision_id=decision_id,
            input_hash=input_hash,
            existing_input_hash=existing_input_hash,
        )


class DuplicateIdempotencyKey(Signal):
    """Internal: a concurrent writer stored this (scope, idempotency_key) first."""


class SnapshotRace(Signal):
    """Internal: a concurrent writer registered the rulebook snapshot first; rebuild with it."""
