"""Shareable deep links: the page's state (scope, policy, page, decision, draft, and the Inbox's
open hold and filters) in the URL.

`Links` holds what the address bar says, as the browser sent it; `Session` (pages/__init__)
applies it to the view-models and writes their changes back, so a copied link reopens the same
view. Everything read from the URL is untrusted text: a value of the wrong type is ignored, a
scope not granted to the session opens nothing, a policy the scope does not have is ignored.
"""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlencode

import param

from gate.holds.links import inbox_query

QUERY = {"scope": "scope", "policy": "policy", "page": "page", "decision": "decision", "draft": "draft",
         "hold": "hold", "state": "state", "queue": "queue"}
DRAFT_URL_LIMIT = 8000  # characters of draft text kept in the URL; a longer draft is left out
ID_LIMIT = 200


class Links(param.Parameterized):
    """The URL's query values. Untyped on purpose: Panel parses `?draft={...}` into a dict and
    `?decision=12` into a number, and a typed parameter would refuse the whole update."""

    scope = param.Parameter(default="")
    policy = param.Parameter(default="")
    page = param.Parameter(default="overview")
    decision = param.Parameter(default="")
    draft = param.Parameter(default="")
    hold = param.Parameter(default="", doc="the Inbox's open hold (a decision id)")
    state = param.Parameter(default="open", doc="the Inbox's state filter")
    queue = param.Parameter(default="", doc="the Inbox's queue filter")


class _QueryValueFilter(logging.Filter):
    """Drops Panel's warning about a query value it cannot parse as JSON (`panel.util.parse_query`,
    run on every write of the URL): it quotes the whole value, and while an author types, the
    URL's draft is JSON with a brace still open, so each keystroke logged the whole draft, about
    3 KB (issue 56). A draft may hold sensitive values; the workbench logs neither drafts nor facts.
    The value is still kept as text, which is what `Links` expects."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Could not parse value ")


_PANEL_QUERY_LOG = logging.getLogger("panel.util")
_QUERY_VALUE_FILTER = _QueryValueFilter()


def share_in_url(location: Any, links: Links) -> None:
    """Keep `links` and the browser's address bar (Panel's `pn.state.location`) in step, without
    a query value (a draft) ever reaching the log."""
    if _QUERY_VALUE_FILTER not in _PANEL_QUERY_LOG.filters:
        _PANEL_QUERY_LOG.addFilter(_QUERY_VALUE_FILTER)
    location.sync(links, QUERY)


def text_value(value: Any, limit: int = ID_LIMIT) -> str:
    """A query value as plain text, or "" when it is not short printable text."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ""
    text = str(value)
    return text if len(text) <= limit and text.isprintable() else ""


def draft_value(value: Any) -> str:
    """The draft named by the URL as editor text ("" when there is none or it is unusable)."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return text_value(value, DRAFT_URL_LIMIT)


def draft_for_url(text: str) -> str:
    """The draft text compacted for the URL, or "" when it is too long to share in one."""
    try:
        compact = json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    except ValueError:
        compact = text
    return compact if len(compact) <= DRAFT_URL_LIMIT else ""


def decision_href(scope: str, policy: str, decision_id: str) -> str:
    """A relative link that opens one decision on the Decisions page (query values encoded)."""
    return "?" + urlencode({"scope": scope, "policy": policy, "page": "decisions", "decision": decision_id})


def hold_href(scope: str, decision_id: str) -> str:
    """A relative link that opens one hold in the Inbox (after sign-in, where the workbench asks
    for one): it opens the hold, it never resolves it."""
    return inbox_query(scope, decision_id)  # one format, also in the hold events (gate.holds.links)


__all__ = [
    "DRAFT_URL_LIMIT",
    "QUERY",
    "Links",
    "decision_href",
    "draft_for_url",
    "draft_value",
    "hold_href",
    "share_in_url",
    "text_value",
]
