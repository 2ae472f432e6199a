"""The workbench server's Tornado handlers, each made a hardened subclass of the one Bokeh or
Panel routes (issue 63, defect 5):

- every handler names a request in the log by its method, path and peer, never its query (an
  OpenID Connect callback's `code` and `state`): the access log and an uncaught exception alike
  (Tornado's `log_exception` also printed `%r` of the request, its whole URI);
- the websocket accepts an `Origin` only when it is one of the workbench's names under the
  scheme the request came by (`workbench.app.origins`; Bokeh's check compared the host alone);
- `autoload.js` (a page of the workbench embedded on another site) answers 403, with no CORS
  header: Bokeh's answered `Access-Control-Allow-Origin: *` with `Allow-Credentials: true`,
  and its `OPTIONS` reflected any `Origin`;
- `/components/<module>/…` serves only the modules of `COMPONENT_MODULES`, and only when
  already imported; anything else is 404 before any import (Panel's handler imported whatever
  module the path named, unauthenticated, and `../` answered 500).

`harden(application, origins)` rewrites the routes of a built (not necessarily started) Bokeh
application in place; `workbench.app.server.make_server` calls it on every server it makes.
"""

from __future__ import annotations

import logging
import sys
from types import TracebackType
from typing import Any

from bokeh.server.views.autoload_js_handler import AutoloadJsHandler
from bokeh.server.views.ws import WSHandler
from panel.io.server import ComponentResourceHandler
from tornado.web import Application, ErrorHandler, HTTPError, RequestHandler

from workbench.app.origins import Origins

__all__ = ["COMPONENT_MODULES", "harden", "request_summary"]

log = logging.getLogger(__name__)
app_log = logging.getLogger("tornado.application")

# The modules whose component resources the workbench's pages load through `/components/`.
# None: Panel's own widgets (Tabulator, the code editor) resolve to `/static/extensions/panel/…`
# (measured in Chromium over every page); a page that uses a custom component adds its module.
COMPONENT_MODULES: frozenset[str] = frozenset()


def request_summary(handler: RequestHandler) -> str:
    """`METHOD /path (peer)`: a request as the log names it, without its query."""
    request = handler.request
    return f"{request.method} {request.path} ({request.remote_ip})"


class _PathOnlyLog:
    """Every handler: the log never holds a request's query."""

    def _request_summary(self) -> str:
        handler: Any = self
        return request_summary(handler)

    def log_exception(self, typ: type[BaseException] | None, value: BaseException | None,
                      tb: TracebackType | None) -> None:
        if isinstance(value, HTTPError):  # Tornado's warning names the request by the summary above
            super().log_exception(typ, value, tb)  # type: ignore[misc]
            return
        handler: Any = self
        app_log.error("Uncaught exception %s", request_summary(handler), exc_info=value)


class _OwnOriginSocket:
    """The websocket: only the workbench's own origins, scheme included."""

    origins: Origins

    def check_origin(self, origin: str) -> bool:
        handler: Any = self
        if self.origins.is_own(handler.request, origin):
            return True
        log.warning("websocket refused: Origin %r is not this workbench's (%s)", origin[:200],
                    ", ".join(sorted(self.origins.names)))
        return False

    def _origin_matches_host(self, origin: str) -> bool:
        # Tornado's first test compared the Origin's host with Host, ignoring the scheme: now
        # `check_origin`, called next, decides (it accepts Host under the right scheme).
        return False


class _NotEmbeddable:
    """`autoload.js`: 403 for every method, no CORS header."""

    def set_default_headers(self) -> None:
        return None  # SECURITY: none of Bokeh's `Access-Control-Allow-*` headers

    async def get(self, *args: Any, **kwargs: Any) -> None:
        raise HTTPError(403, reason="The workbench is not embeddable")

    async def options(self, *args: Any, **kwargs: Any) -> None:
        raise HTTPError(403, reason="The workbench is not embeddable")


class _KnownComponents:
    """`/components/`: only the allowed, already imported modules; everything else 404."""

    def parse_url_path(self, path: str) -> str:
        module = path.split("/", 1)[0]
        # SECURITY: decided before Panel's handler imports anything (it would import any module).
        if module not in COMPONENT_MODULES or module not in sys.modules:
            raise HTTPError(404)
        return str(super().parse_url_path(path))  # type: ignore[misc]


def _hardened(target: type[RequestHandler], origins: Origins) -> type[RequestHandler]:
    mixins: list[type] = [_PathOnlyLog]
    namespace: dict[str, Any] = {}
    if issubclass(target, WSHandler):
        mixins.insert(0, _OwnOriginSocket)
        namespace["origins"] = origins
    elif issubclass(target, AutoloadJsHandler):
        mixins.insert(0, _NotEmbeddable)
    elif issubclass(target, ComponentResourceHandler):
        mixins.insert(0, _KnownComponents)
    return type(f"Hardened{target.__name__}", (*mixins, target), namespace)


def harden(application: Application, origins: Origins) -> None:
    """Replace the handler class of every route of `application` by its hardened subclass."""
    for rule in application.wildcard_router.rules:
        target = rule.target
        if isinstance(target, type) and issubclass(target, RequestHandler):
            rule.target = _hardened(target, origins)
    if application.settings.get("default_handler_class") is None:  # a path no route serves: 404
        application.settings["default_handler_class"] = ErrorHandler
        application.settings["default_handler_args"] = {"status_code": 404}
    application.settings["default_handler_class"] = _hardened(application.settings["default_handler_class"], origins)
