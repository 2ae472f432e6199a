"""Serve the workbench: one Panel server, one app per browser session.

`serve(store, access, address, port)` is called by `gate workbench` (the composition root that
reads the settings and builds the ledger and signing setup). The access policy was decided
before this point (`workbench.app.access.access_for`); here it is applied: with sign-in (an
OpenID Connect provider, `workbench.app.oidc`, or the password file, `workbench.app.signin`)
each session acts as its signed-in person, sees only the scopes where it holds a role and may
do only what its roles there permit, for as long as its server-side session lives
(`workbench.app.sessions`); without (loopback only) it is the local operator.
"""

from __future__ import annotations

import secrets
from typing import Any

import panel as pn

from workbench.app.access import Access, Identity, is_loopback
from workbench.app.guards import harden
from workbench.app.headers import tornado_settings
from workbench.app.oidc import Discovery, oidc_provider
from workbench.app.origins import Origins, ProxyNetwork
from workbench.app.pages import build_app
from workbench.app.sessions import IDLE_SECONDS, SignedSessions
from workbench.app.signin import signin_provider
from workbench.app.store import WorkbenchStore

TITLE = "Decision Gate · policy workbench"
ENDED = "### Your session ended (signed out, roles changed, or idle): [sign in again](/login)"


def session_app(store: WorkbenchStore, access: Access, sessions: SignedSessions | None) -> pn.viewable.Viewable:
    """The whole app for one session: the view-models of every page over the shared store. A
    session naming nobody valid sees no scope and may do nothing."""
    if sessions is None:  # loopback, no sign-in: the local operator
        identity = Identity.local_operator()
        return build_app(store, access.scopes_for(identity, store.scopes()), identity=identity,
                         roles=lambda scope: access.roles_in(identity, scope))
    sid = sessions.sid_of(request_cookie("user"), pn.config.cookie_secret, pn.config.oauth_expiry)
    session = sessions.live(sid)
    if sid is None or session is None:
        return pn.pane.Markdown("### Sign-in expired or invalid: sign in again at /login")
    identity = session.identity
    # SECURITY: the roles are asked of the session book at each call: a session that ended
    # (logout, a grants change, a revocation, idle) holds none, even on a page still open; and
    # the open page closes itself (`ENDED`).
    app = build_app(store, sessions.scopes_for(identity, store.scopes()), identity=identity,
                    roles=lambda scope: sessions.roles_in(sid, identity, scope), signed_in=True)
    doc = pn.state.curdoc
    if doc is not None and isinstance(app, pn.Column):
        def ended() -> None:
            doc.add_next_tick_callback(lambda: setattr(app, "objects", [pn.pane.Markdown(ENDED)]))

        unwatch = sessions.book.watch(sid, ended)
        pn.state.on_session_destroyed(lambda _context: unwatch())
    return app


def request_cookie(name: str) -> str | None:
    """A cookie of the HTTP request that opened the current Bokeh session, read from the request
    itself: the session token (in the page, readable by its scripts) carries no cookies."""
    doc = pn.state.curdoc
    context = doc.session_context if doc is not None else None
    request = getattr(getattr(context, "request", None), "_request", None)  # Bokeh's proxy keeps it
    morsel = request.cookies.get(name) if request is not None else None
    return morsel.value if morsel is not None else None


def make_server(store: WorkbenchStore, access: Access, address: str, port: int, *,
                origins: list[str] | None = None, cookie_secret: str | None = None,
                start: bool = False, discovery: Discovery | None = None,
                idle_seconds: float = IDLE_SECONDS, trusted_proxies: tuple[ProxyNetwork, ...] = ()) -> Any:
    """A Panel (Bokeh/Tornado) server object, not yet started unless `start`. `origins` are
    the extra `host:port` names browsers may open it under (its websocket and sign-in form
    refuse others); `trusted_proxies` may say by `X-Forwarded-Proto` that a request came over
    https (`workbench.app.origins`). With OpenID Connect the provider's discovery document is
    read now (OIDCConfigError)."""
    # No toast notifications: Panel draws them with a component that evaluates script strings,
    # which the Content-Security-Policy (no 'unsafe-eval') refuses; pages report in status lines.
    pn.extension("codeeditor", "tabulator")
    names = [f"{address}:{port}", f"localhost:{port}", f"127.0.0.1:{port}", *(origins or [])]
    own = Origins.of(names, trusted_proxies)
    sessions = SignedSessions(access, idle_seconds, secure=not is_loopback(address),
                              origins=own) if access.authenticated else None

    def factory() -> pn.viewable.Viewable:
        return session_app(store, access, sessions)

    # SECURITY: CSP and friends on every response; no cookie (nor the Cookie header) copied
    # into the Bokeh session token, which the page's scripts and autoload.js can read.
    kwargs: dict[str, Any] = tornado_settings() | {"include_cookies": [], "exclude_headers": ["Cookie"]}
    if sessions is not None:
        kwargs["cookie_secret"] = cookie_secret or secrets.token_urlsafe(32)
    if access.oidc is not None and sessions is not None:
        watch = sessions.grants

        def groups() -> frozenset[str]:  # the groups the grants file names now (it is re-read)
            grants = watch.current().grants
            return frozenset(grants.groups) if grants is not None else frozenset()

        kwargs["auth_provider"] = oidc_provider(access.oidc, groups, sessions, discovery)
    elif access.basic_auth_file is not None and sessions is not None:
        # SECURITY: our provider, not Panel's basic_auth (plaintext compared with ==): scrypt
        # hashes, constant-time comparison, failed sign-ins throttled (workbench/app/signin.py).
        kwargs["auth_provider"] = signin_provider(access.basic_auth_file, sessions)
    server = pn.serve(
        {"workbench": factory}, port=port, address=address, show=False, start=start,
        title=TITLE, websocket_origin=names, **kwargs,
    )
    harden(server._tornado, own)  # SECURITY: logs, websocket origin, autoload.js, components
    return server
