"""The one format of a hold's link into the workbench Inbox (docs/holds.md): a query that opens
the hold after sign-in and never resolves it. The workbench's pages build their links with it, and
hold events carry it under the operator's workbench address (`GATE_WORKBENCH_URL`)."""

from __future__ import annotations

from urllib.parse import urlencode


def inbox_query(scope: str, decision_id: str) -> str:
    return "?" + urlencode({"scope": scope, "page": "inbox", "hold": decision_id})


def inbox_url(base: str | None, scope: str, decision_id: str) -> str | None:
    """The absolute link, or None when no workbench address is configured."""
    return None if not base else base.rstrip("?") + inbox_query(scope, decision_id)
