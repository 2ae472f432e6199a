"""The served application's composition root (issue 66, item 4): the API (`api.app`) over the
core's services, with the workbench's report engines (`workbench.services.analytics`) wired in.

It stands above both: the API imports no analytics package and takes the reports it serves
through the `gate.services.analytics.Analytics` protocol; the workbench imports no HTTP shell.
`gate serve` builds each worker's app here (`gate_cli.serve_cmd.serve` hands `create_app` to
`api.serving.GateServer`), and so do the tests and benchmarks that build an app. Without the
workbench on the path (a server install that leaves it out) the app is the API alone: it
decides, and answers each report 503 `REPORTS_UNAVAILABLE` (docs/errors.md).

Imports are deferred to the call: a serving worker builds its app after the fork, and
prometheus_client (imported with `api.app`) reads its multiprocess directory when first imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask

    from api.limits import RateLimiter
    from gate.adapters import AdapterRegistry
    from gate.clock import Clock, IdSource
    from gate.keys.config import LiveSigning, SigningSetup
    from gate.ledger import Ledger
    from gate.services.analytics import Analytics
    from gate.services.policychecks import PolicyCheckService
    from gate.settings import Settings

__all__ = ["analytics", "create_app"]


def analytics() -> Analytics | None:
    """The workbench's report engines, or None when the workbench is not on the path (then the
    API answers each report 503 `REPORTS_UNAVAILABLE`). Any other import failure is raised."""
    try:
        from workbench.services.analytics import LedgerAnalytics
    except ModuleNotFoundError as missing:
        if (missing.name or "").partition(".")[0] != "workbench":
            raise  # the workbench is there, something it needs is not: a fault, not an absence
        return None
    return LedgerAnalytics()


def create_app(settings: Settings | None = None, *, ledger: Ledger | None = None, clock: Clock | None = None,
               ids: IdSource | None = None, limiter: RateLimiter | None = None,
               signing: SigningSetup | LiveSigning | None = None, adapters: AdapterRegistry | None = None,
               policychecks: PolicyCheckService | None = None) -> Flask:
    """The served app: `api.app.create_app` with the workbench's analytics when installed; the
    keyword arguments replace a part as they do there (tests, benchmarks)."""
    from api.app import create_app as api_app

    return api_app(settings, ledger=ledger, clock=clock, ids=ids, limiter=limiter, signing=signing,
                   adapters=adapters, analytics=analytics(), policychecks=policychecks)
