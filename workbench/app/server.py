"""Serve the workbench: one Panel server, one app per browser session.

`serve(store, access, address, port)` is called by `gate workbench` (the composition root that
reads the settings and builds the ledger and signing setup). The access policy was decided
before this point (`workbench.app.access.access_for`); here it is applied: with basic auth,
Panel signs users in and each session sees only its user's granted scopes.
"""

from __future__ import annotations

import secrets
from typing import Any

import panel as pn

from workbench.app.access import Access
from workbench.app.headers import tornado_settings
from workbench.app.pages import build_app
from workbench.app.signin import session_user, signin_provider
from workbench.app.store import WorkbenchStore

TITLE = "Decision Gate · policy workbench"


def session_app(store: WorkbenchStore, access: Access, user: str | None = None) -> pn.viewable.Viewable:
    """The whole app for one session: the view-models of every page over the shared store."""
    scopes = access.scopes_for(user, store.scopes())
    return build_app(store, scopes, user=user)


def make_server(store: WorkbenchStore, access: Access, address: str, port: int, *,
                origins: list[str] | None = None, cookie_secret: str | None = None,
                start: bool = False) -> Any:
    """A Panel (Bokeh/Tornado) server object, not yet started unless `start`. `origins` are
    the extra `host:port` names browsers may open it under (its websocket refuses others)."""
    # No toast notifications: Panel draws them with a component that evaluates script strings,
    # which the Content-Security-Policy (no 'unsafe-eval') refuses; pages report in status lines.
    pn.extension("codeeditor", "tabulator")

    def factory() -> pn.viewable.Viewable:
        if not access.authenticated:
            return session_app(store, access, None)
        user = session_user(pn.state.cookies, pn.config.cookie_secret, pn.config.oauth_expiry)
        return session_app(store, access, user)

    kwargs: dict[str, Any] = tornado_settings()  # SECURITY: CSP and friends on every response
    if access.authenticated and access.basic_auth_file is not None:
        # SECURITY: our provider, not Panel's basic_auth (plaintext compared with ==): scrypt
        # hashes, constant-time comparison, failed sign-ins throttled (workbench/app/signin.py).
        kwargs.update(auth_provider=signin_provider(access.basic_auth_file),
                      cookie_secret=cookie_secret or secrets.token_urlsafe(32))
    return pn.serve(
        {"workbench": factory}, port=port, address=address, show=False, start=start,
        title=TITLE,
        websocket_origin=[f"{address}:{port}", f"localhost:{port}", f"127.0.0.1:{port}", *(origins or [])],
        **kwargs,
    )
