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
import time
from collections.abc import Callable
from typing import Any

import panel as pn
from bokeh.settings import settings as bokeh_settings

from workbench.app.access import Access, Identity, is_loopback
from workbench.app.guards import harden
from workbench.app.headers import tornado_settings
from workbench.app.oidc import Discovery, oidc_provider
from workbench.app.origins import Origins, ProxyNetwork
from workbench.app.pages import build_app
from workbench.app.pages.inbox import ASSETS
from workbench.app.sessions import IDLE_SECONDS, SignedSessions, guard_pages
from workbench.app.signin import signin_provider
from workbench.app.store import WorkbenchStore

TITLE = "Decision Gate · policy workbench"
DAY_SECONDS = 86_400.0
ASSETS_ROUTE = "workbench-assets"  # the workbench's own scripts (workbench/app/assets), from its origin
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
    # SECURITY: the roles are asked of the session book at each call, for the person it names: a
    # session that ended (logout, a grants change, a revocation, idle, its lifetime) holds none,
    # even on a page still open; and the open page closes itself (`ENDED`). The page belongs to
    # this sign-in session: its websocket opens only for a browser signed in with it, and each
    # message asks the book first (`workbench.app.sessions.PageSocket`).
    app = build_app(store, sessions.scopes_for(identity, store.scopes()), identity=identity,
                    roles=lambda scope: sessions.roles_in(sid, scope), signed_in=True)
    doc = pn.state.curdoc
    context = doc.session_context if doc is not None else None
    if doc is not None and context is not None and isinstance(app, pn.Column):
        def ended() -> None:
            doc.add_next_tick_callback(lambda: setattr(app, "objects", [pn.pane.Markdown(ENDED)]))

        unwatch, unbind = sessions.book.watch(sid, ended), sessions.bind_page(context.id, sid)

        def destroyed(_context: Any) -> None:
            unwatch()
            unbind()

        pn.state.on_session_destroyed(destroyed)
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
                idle_seconds: float = IDLE_SECONDS, lifetime_seconds: float | None = None,
                trusted_proxies: tuple[ProxyNetwork, ...] = (), clock: Callable[[], float] = time.monotonic) -> Any:
    """A Panel (Bokeh/Tornado) server object, not yet started unless `start`. `origins` are
    the extra `host:port` names browsers may open it under (its websocket and sign-in form
    refuse others); `trusted_proxies` may say by `X-Forwarded-Proto` that a request came over
    https (`workbench.app.origins`). With OpenID Connect the provider's discovery document is
    read now (OIDCConfigError). A session ends after `idle_seconds` without a request or an
    action, and `lifetime_seconds` after its sign-in in any case (default: Panel's
    `oauth_expiry`, the cookie's lifetime), both counted on `clock` (monotonic seconds; a test
    passes one it moves)."""
    # No toast notifications: Panel draws them with a component that evaluates script strings,
    # which the Content-Security-Policy (no 'unsafe-eval') refuses; pages report in status lines.
    pn.extension("codeeditor", "tabulator")
    # The Inbox's keys (workbench/app/assets/inbox-keys.js), a script from the workbench's own origin.
    pn.config.js_files = {**pn.config.js_files, "inbox_keys": f"/{ASSETS_ROUTE}/inbox-keys.js"}
    names = [f"{address}:{port}", f"localhost:{port}", f"127.0.0.1:{port}", *(origins or [])]
    own = Origins.of(names, trusted_proxies)
    lifetime = lifetime_seconds if lifetime_seconds is not None else pn.config.oauth_expiry * DAY_SECONDS
    sessions = (SignedSessions(access, idle_seconds, secure=not is_loopback(address), origins=own,
                               lifetime_seconds=lifetime, clock=clock) if access.authenticated else None)

    def factory() -> pn.viewable.Viewable:
        return session_app(store, access, sessions)

    # SECURITY: CSP and friends on every response; no cookie (nor the Cookie header) copied
    # into the Bokeh session token, which the page's scripts and autoload.js can read.
    kwargs: dict[str, Any] = tornado_settings() | {"include_cookies": [], "exclude_headers": ["Cookie"]}
    # SECURITY: Bokeh session ids and tokens signed with a secret (BOKEH_SECRET_KEY, else a new one
    # per server start): a page's session is one the server made, never one a request names.
    kwargs |= {"sign_sessions": True, "generate_session_ids": True, "secret_key": session_secret()}
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
        {"workbench": factory}, port=port, address=address, show=False, start=False,
        title=TITLE, websocket_origin=names, static_dirs={ASSETS_ROUTE: str(ASSETS)}, **kwargs,
    )
    harden(server._tornado, own)  # SECURITY: logs, websocket origin, autoload.js, components
    if sessions is not None:
        guard_pages(server, sessions)  # SECURITY: each page's websocket bound to its sign-in (over harden's)
    if start:
        server.start()
        server.io_loop.start()
    return server


def session_secret() -> bytes:
    """The key Bokeh signs session ids and tokens with: `BOKEH_SECRET_KEY` when set (at least 32
    characters, Bokeh's own check), else a new random one for this server's lifetime."""
    configured = bokeh_settings.secret_key()
    return configured.encode("utf-8") if configured else secrets.token_urlsafe(32).encode("ascii")
