"""Serve the workbench: one Panel server, one app per browser session.

`serve(store, access, address, port)` is called by `gate workbench` (the composition root that
reads the settings and builds the ledger and signing setup). The access policy was decided
before this point (`workbench.app.access.access_for`); here it is applied: with sign-in (an
OpenID Connect provider, `workbench.app.oidc`, or the password file, `workbench.app.signin`)
each session acts as its signed-in person, sees only the scopes where it holds a role and may
do only what its roles there permit; without (loopback only) it is the local operator.
"""

from __future__ import annotations

import secrets
from typing import Any

import panel as pn

from workbench.app.access import Access, Identity
from workbench.app.headers import tornado_settings
from workbench.app.oidc import Discovery, identity_from_cookie, oidc_provider
from workbench.app.pages import build_app
from workbench.app.signin import session_user, signin_provider
from workbench.app.store import WorkbenchStore

TITLE = "Decision Gate · policy workbench"


def session_app(store: WorkbenchStore, access: Access, identity: Identity | None) -> pn.viewable.Viewable:
    """The whole app for one session: the view-models of every page over the shared store. A
    session naming nobody valid sees no scope and may do nothing."""
    scopes = access.scopes_for(identity, store.scopes())
    if identity is None:
        return pn.pane.Markdown("### Sign-in expired or invalid: sign in again at /login")
    return build_app(store, scopes, identity=identity, roles=lambda scope: access.roles_in(identity, scope))


def session_identity(access: Access) -> Identity | None:
    """Who the current session is: the local operator without sign-in, else the person its signed
    cookie names (None when it names nobody valid: such a session sees nothing)."""
    if not access.authenticated:
        return Identity.local_operator()
    if access.oidc is not None:
        return identity_from_cookie(pn.state.cookies, pn.config.cookie_secret, pn.config.oauth_expiry,
                                    access.oidc.issuer)
    user = session_user(pn.state.cookies, pn.config.cookie_secret, pn.config.oauth_expiry)
    return Identity.password_user(user) if user else None


def make_server(store: WorkbenchStore, access: Access, address: str, port: int, *,
                origins: list[str] | None = None, cookie_secret: str | None = None,
                start: bool = False, discovery: Discovery | None = None) -> Any:
    """A Panel (Bokeh/Tornado) server object, not yet started unless `start`. `origins` are
    the extra `host:port` names browsers may open it under (its websocket refuses others).
    With OpenID Connect the provider's discovery document is read now (OIDCConfigError)."""
    # No toast notifications: Panel draws them with a component that evaluates script strings,
    # which the Content-Security-Policy (no 'unsafe-eval') refuses; pages report in status lines.
    pn.extension("codeeditor", "tabulator")

    def factory() -> pn.viewable.Viewable:
        return session_app(store, access, session_identity(access))

    kwargs: dict[str, Any] = tornado_settings()  # SECURITY: CSP and friends on every response
    if access.oidc is not None:
        groups = frozenset(access.grants.groups) if access.grants is not None else frozenset()
        kwargs.update(auth_provider=oidc_provider(access.oidc, groups, discovery),
                      cookie_secret=cookie_secret or secrets.token_urlsafe(32))
    elif access.basic_auth_file is not None:
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
