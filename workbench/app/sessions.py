"""Workbench sessions an attacker cannot borrow (issue 57): where a sign-in may send the browser,
the session each signed-in browser holds on the server, and the flags of every cookie we set.

- `safe_next(value)`: the page a sign-in returns to. Only a path on this workbench: one `/` not
  followed by `/` or `\\`, after percent-decoding (repeatedly), with no control character
  (browsers drop tabs and newlines from URLs, so `/\\t/evil.example` is `//evil.example`).
  Anything else is the workbench's own page. Checked when the link arrives and again just before
  the redirect (a `next_url` cookie or a `state` value is whatever the browser sent back).
- `SessionBook`: a signed-in browser's `user` cookie holds only a random session id (signed with
  the server's cookie secret); the person, their groups and the provider's ID token (for the
  provider's logout) stay here, on the server. A session ends at logout, when the grants file
  changes what its person may do (`GrantsWatch`), when an administrator revokes the person's
  sessions (`revoked` in the grants file, below), after `idle_seconds` without a request, and when
  the server stops (sessions are in memory: people sign in again after a restart), and when the
  same browser signs in again. An ended session opens nothing: the page, its websocket and every
  message of an open page ask the book. One that ended without a sign-out keeps its ID token
  until the browser signs out (the provider's logout; `prompt=login` until then).
- Pages (issue 63): each Bokeh session is bound to the sign-in session that opened it
  (`SignedSessions.bind_page`); a request naming a Bokeh session is refused (`chooses_page`), and
  a page's websocket opens only for that sign-in session and reads nothing once it has ended
  (`PageSocket`, put on the server's websocket route by `guard_pages`).
- `SessionHandler`: every cookie the sign-in and logout handlers set carries `SameSite=Lax`, and
  `Secure` when the workbench serves a non-loopback address (behind TLS, docs/workbench.md) or a
  trusted proxy says the request came over https (`workbench.app.origins`).

An administrator's revocation: the grants file's optional `"revoked": {"<subject>": "<ISO time>"}`
ends every session of that subject opened before that time, at once (the file is re-read when it
changes); sign-ins after it are not affected. Removing a person's roles ends their sessions too.
"""

from __future__ import annotations

import binascii
import hmac
import logging
import secrets
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bokeh.server.auth_provider import User
from bokeh.server.views.autoload_js_handler import AutoloadJsHandler
from bokeh.util.token import check_token_signature, get_session_id
from panel.auth import LogoutHandler
from panel.config import config
from panel.io.resources import CDN_DIST
from panel.io.server import DocHandler, WSHandler
from tornado.httputil import HTTPServerRequest
from tornado.web import HTTPError, decode_signed_value

from workbench.app.access import Access, AccessConfigError, Grants, Identity, load_grants
from workbench.app.origins import Origins

log = logging.getLogger(__name__)

IDLE_SECONDS = 30 * 60.0  # a session without a request for this long ends
MAX_SESSIONS = 10_000  # the oldest sessions beyond this end first
_DECODE_ROUNDS = 4


def safe_next(value: str | None, default: str) -> str:
    """`value` when it is a path on this workbench (module docstring), else `default`."""
    if not value:
        return default
    decoded = value
    for _ in range(_DECODE_ROUNDS):  # `%2F`, `%252F` …: judge what any later decoding would see
        decoded = urllib.parse.unquote(decoded)
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in decoded) or "\\" in decoded:
        return default
    if not decoded.startswith("/") or decoded.startswith("//"):
        return default
    parts = urllib.parse.urlsplit(decoded)
    if parts.scheme or parts.netloc:
        return default
    return value


@dataclass
class Session:
    """One signed-in browser: who it is and when it was last seen (server-side only)."""

    sid: str
    identity: Identity
    opened: float  # wall clock, for an administrator's revocation by time
    seen: float  # monotonic
    id_token: str | None = None  # the provider's, for RP-initiated logout only; never sent to a page
    expires: float = float("inf")  # monotonic: the absolute end, however busy the session is


class SessionBook:
    """The live sessions of one server (module docstring)."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time, capacity: int = MAX_SESSIONS,
                 lifetime_seconds: float = float("inf")) -> None:
        self.idle_seconds, self.clock, self.wall, self.capacity = idle_seconds, clock, wall, capacity
        self.lifetime_seconds = lifetime_seconds
        self._sessions: dict[str, Session] = {}
        # Sessions that ended without a sign-out (idle, past their lifetime, grants, revocation,
        # another sign-in): kept until the browser signs out, for the provider's logout (its ID
        # token) and so a sign-in from that browser asks the provider for a password again.
        self._unsigned_out: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._watchers: dict[str, list[Callable[[], None]]] = {}

    def watch(self, sid: str, ended: Callable[[], None]) -> Callable[[], None]:
        """Call `ended()` when session `sid` ends (an open page closes itself); the unwatch."""
        with self._lock:
            self._watchers.setdefault(sid, []).append(ended)

        def unwatch() -> None:
            with self._lock:
                watchers = self._watchers.get(sid, [])
                if ended in watchers:
                    watchers.remove(ended)
                if not watchers:
                    self._watchers.pop(sid, None)
        return unwatch

    def _notify(self, sids: list[str]) -> None:
        with self._lock:
            called = [callback for sid in sids for callback in self._watchers.pop(sid, [])]
        for callback in called:
            callback()

    def open(self, identity: Identity, id_token: str | None = None) -> str:
        """A new session for `identity`: its id, for the signed cookie."""
        sid = secrets.token_urlsafe(32)
        now = self.clock()
        with self._lock:
            self._sessions[sid] = Session(sid, identity, self.wall(), now, id_token, now + self.lifetime_seconds)
            while len(self._sessions) > self.capacity:
                del self._sessions[next(iter(self._sessions))]
        return sid

    def live(self, sid: str | None, touch: bool = True) -> Session | None:
        """The session `sid` names if it has not ended (idle too long, or past its lifetime: it
        ends now)."""
        if not sid:
            return None
        with self._lock:
            session = self._sessions.get(sid)
            if session is None:
                return None
            now = self.clock()
            over = now - session.seen > self.idle_seconds or now >= session.expires
            if over:
                self._retire(self._sessions.pop(sid))
            elif touch:
                session.seen = now
        if over:
            self._notify([sid])
            return None
        return session

    def _retire(self, session: Session) -> None:
        """Keep a session that ended without a sign-out until its browser signs out (lock held)."""
        self._unsigned_out[session.sid] = session
        while len(self._unsigned_out) > self.capacity:
            del self._unsigned_out[next(iter(self._unsigned_out))]

    def ended_unsigned(self, sid: str | None) -> bool:
        """Whether `sid` names a session that ended without its browser signing out."""
        with self._lock:
            return bool(sid) and sid in self._unsigned_out

    def end(self, sid: str | None, signed_out: bool = True) -> Session | None:
        """End one session; the ended session, or None if it was neither live nor ended without a
        sign-out. `signed_out` (logout): forgotten; otherwise (another sign-in in its browser)
        kept until the browser signs out."""
        with self._lock:
            session = self._sessions.pop(sid, None) if sid else None
            if session is not None and not signed_out:
                self._retire(session)
            elif signed_out and session is None and sid:
                return self._unsigned_out.pop(sid, None)  # ended before: its ID token, for the provider
            elif signed_out and sid:
                self._unsigned_out.pop(sid, None)
        if session is not None:
            self._notify([session.sid])
        return session

    def end_where(self, ended: Callable[[Session], bool]) -> int:
        """End every session `ended` picks; how many ended."""
        with self._lock:
            gone = [sid for sid, session in self._sessions.items() if ended(session)]
            for sid in gone:
                self._retire(self._sessions.pop(sid))
        self._notify(gone)
        return len(gone)


def _entries(grants: Grants, identity: Identity) -> tuple[Any, ...]:
    """What of the grants file decides `identity`'s roles: its user entry and its groups' entries."""
    subject = identity.principal.subject or ""
    return (grants.users.get(subject), *(grants.groups.get(group) for group in identity.groups))


def revoked(grants: Grants, session: Session) -> bool:
    """True when an administrator revoked this session's person after it was opened."""
    before = grants.revoked.get(session.identity.principal.subject or "")
    return before is not None and session.opened < before


class GrantsWatch:
    """The grants file as it is now: re-read when it changes; a change that alters a person's
    entries, or revokes them, ends their sessions at once. An unreadable file fails closed: no
    roles for anyone, every session ended, until it is fixed."""

    def __init__(self, access: Access, book: SessionBook) -> None:
        self.access, self.book, self.path = access, book, access.grants_file
        self._stamp = self._stat()
        self._lock = threading.Lock()

    def _stat(self) -> tuple[int, int, int] | None:
        if self.path is None:
            return None
        try:
            stat = self.path.stat()
        except OSError:
            return (-1, -1, -1)
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino)

    def current(self) -> Access:
        """The access policy with the grants file as it is now (re-read if it changed)."""
        if self.path is None:
            return self.access
        with self._lock:
            stamp = self._stat()
            if stamp != self._stamp:
                self._stamp = stamp
                self._reload(self.path)
            return self.access

    def _reload(self, path: Path) -> None:
        old = self.access.grants or Grants()
        try:
            new = load_grants(path)
        except AccessConfigError as exc:
            log.warning("the grants file cannot be used, nobody holds a role until it is fixed: %s", exc)
            self.access = replace(self.access, grants=Grants())
            self.book.end_where(lambda _session: True)
            return
        self.access = replace(self.access, grants=new)
        ended = self.book.end_where(lambda s: _entries(old, s.identity) != _entries(new, s.identity)
                                    or revoked(new, s))
        log.info("the grants file changed: %d session(s) ended", ended)


class SignedSessions:
    """The sessions of one server that signs people in: the book, the grants file as it is now,
    the signed `user` cookie that names a session, and the sign-in session each page (Bokeh
    session) belongs to."""

    def __init__(self, access: Access, idle_seconds: float = IDLE_SECONDS, secure: bool = False,
                 origins: Origins | None = None, lifetime_seconds: float = float("inf"),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.book = SessionBook(idle_seconds, clock=clock, lifetime_seconds=lifetime_seconds)
        self.grants = GrantsWatch(access, self.book)
        self.secure = secure
        self.origins = origins or Origins()
        self._pages: dict[str, str] = {}  # Bokeh session id -> the sign-in session that opened it
        self._lock = threading.Lock()

    def sid_of(self, cookie: str | None, secret: str | bytes | None, max_age_days: float) -> str | None:
        """The session id a signed `user` cookie value names (None if unsigned, expired or absent)."""
        if not cookie or not secret:
            return None
        decoded = decode_signed_value(secret, "user", cookie, max_age_days=max_age_days)
        return decoded.decode("utf-8", "replace") if decoded else None

    def live(self, sid: str | None, touch: bool = True) -> Session | None:
        """The live session `sid` names, after the grants file's latest change took effect."""
        grants = self.grants.current().grants or Grants()
        session = self.book.live(sid, touch)
        if session is not None and revoked(grants, session):
            self.book.end(session.sid, signed_out=False)
            return None
        return session

    def roles_in(self, sid: str, scope: str) -> frozenset[str]:
        """The roles a session holds in `scope` now, for the person the session names (read from
        the book at each call): none once it has ended (fail closed)."""
        session = self.live(sid)
        if session is None:
            return frozenset()
        return self.grants.current().roles_in(session.identity, scope)

    def scopes_for(self, identity: Identity, known: list[str]) -> list[str]:
        return self.grants.current().scopes_for(identity, known)

    def bind_page(self, page: str, sid: str) -> Callable[[], None]:
        """Record that the Bokeh session `page` was opened by sign-in session `sid`; the unbind."""
        with self._lock:
            self._pages[page] = sid

        def unbind() -> None:
            with self._lock:
                if self._pages.get(page) == sid:
                    del self._pages[page]
        return unbind

    def page_owner(self, page: str) -> str | None:
        """The sign-in session that opened the Bokeh session `page` (None: no such page)."""
        with self._lock:
            return self._pages.get(page)


class SessionHandler:
    """A mixin for the sign-in and logout handlers (Tornado `RequestHandler`s): every cookie they
    set carries `SameSite=Lax` (and `Secure` off loopback), a sign-in opens a server-side session,
    and the log names a request by its path alone (never its query: `code`, `state`)."""

    sessions: SignedSessions  # set on the subclass a provider makes for one server

    def set_cookie(self, name: str, value: str | bytes, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("samesite", "Lax")
        # `Secure` off loopback, and on a request a trusted proxy says came over https.
        if self.sessions.secure or self.sessions.origins.scheme(self.request) == "https":  # type: ignore[attr-defined]
            kwargs["secure"] = True
        super().set_cookie(name, value, *args, **kwargs)  # type: ignore[misc]

    def _request_summary(self) -> str:
        request = self.request  # type: ignore[attr-defined]
        return f"{request.method} {request.path} ({request.remote_ip})"

    def open_session(self, identity: Identity, id_token: str | None = None) -> None:
        """Sign `identity` in: a new server-side session named by the signed `user` cookie. The
        session this browser held before (signed in again without signing out) ends: its open
        pages close."""
        handler: Any = self
        self.sessions.book.end(_sid(handler))
        sid = self.sessions.book.open(identity, id_token)
        handler.clear_cookie("is_guest")
        handler.set_secure_cookie("user", sid, expires_days=config.oauth_expiry, httponly=True,
                                  path=config.cookie_path)

    def signed_in_as(self) -> str | None:
        """The session id this browser's signed `user` cookie names (live or not)."""
        return _sid(self)

    def current_session(self) -> Session | None:
        handler: Any = self
        return self.sessions.live(_sid(handler), touch=False)


def _sid(handler: Any) -> str | None:
    value = handler.get_secure_cookie("user", max_age_days=config.oauth_expiry)
    return value.decode("utf-8", "replace") if value else None


SIGNED_OUT_COOKIES = ("user", "id_token", "access_token", "refresh_token", "oauth_expiry", "is_guest", "next_url")


class SignOutHandler(SessionHandler, LogoutHandler):
    """`/logout`: the session ends on the server, its cookies in the browser; with an OpenID
    Connect provider that offers it, the browser then signs out there too (RP-initiated logout,
    `provider_logout`). `?switch=1` (the page's "Switch person") ends at the sign-in page."""

    def provider_logout(self, session: Session, switch: bool) -> str | None:
        """Where to send the browser to end the provider's session (None: no provider logout)."""
        return None

    def get(self) -> None:
        # A session that ended without a sign-out (idle, past its lifetime) still answers here,
        # once: its ID token, so the provider's session ends too.
        session = self.sessions.book.end(_sid(self))
        for name in SIGNED_OUT_COOKIES:
            self.clear_cookie(name, path=config.cookie_path)
        self.set_header("Cache-Control", "no-store")
        switch = self.get_argument("switch", "") == "1" or self.get_argument("state", "") == "switch"
        target = self.provider_logout(session, switch) if session is not None else None
        if target is None and switch:
            target = self._login_endpoint
        if target is not None:
            self.redirect(target)
            return
        self.write(self._logout_template.render(PANEL_CDN=CDN_DIST, LOGIN_ENDPOINT=self._login_endpoint))


PAGE_CHOICES = ("bokeh-session-id", "bokeh-token")  # query arguments Bokeh would attach a page with


def chooses_page(request: HTTPServerRequest) -> bool:
    """Whether a request names the Bokeh session it wants (the server always makes a new one)."""
    return any(name in request.arguments for name in PAGE_CHOICES) or "Bokeh-Session-Id" in request.headers


def _socket_page(request: HTTPServerRequest, secret: bytes | None) -> str | None:
    """The Bokeh session a websocket handshake's token names, if the server signed the token."""
    offered = [part.strip() for part in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
    if len(offered) != 2 or offered[0] != "bokeh" or not secret:
        return None
    try:
        if not check_token_signature(offered[1], secret_key=secret, signed=True):
            return None
        return str(get_session_id(offered[1]))
    except (ValueError, TypeError, KeyError, binascii.Error):  # not a token at all
        return None


class PageSocket:
    """A mixin for a page's websocket (Panel's `WSHandler`) on a server that signs people in:
    the handshake is refused (403) unless the token is the server's own and names a page opened
    by this browser's sign-in session (or no page yet: the page is then built for this session);
    each message acts only while that session lives (idle and lifetime checked at each one: an
    ended session's page closes itself, `SessionBook.watch`, and the message does nothing)."""

    sessions: SignedSessions
    signed_in: str | None = None
    ended = False

    async def prepare(self) -> None:
        handler: Any = self
        await super().prepare()  # type: ignore[misc]  # the user: the live session the cookie names
        if handler._finished:
            return
        sid = _sid(handler)
        page = _socket_page(handler.request, handler.application.secret_key)
        owner = self.sessions.page_owner(page) if page is not None else None
        if sid is None or page is None or (owner is not None and not hmac.compare_digest(owner, sid)):
            log.warning("a websocket refused: its token is not the server's, or its page belongs to another "
                        "sign-in session")
            handler.set_status(403)
            handler.finish()
            return
        self.signed_in = sid

    async def on_message(self, fragment: str | bytes) -> None:
        # SECURITY: asked at every fragment (a message is several): once the session has ended
        # (now or before), nothing more is read from this socket, so nothing acts; the page
        # closes itself. A message cut short is never assembled.
        if self.ended or self.sessions.live(self.signed_in) is None:
            self.ended = True
            return
        await super().on_message(fragment)  # type: ignore[misc]


def guard_pages(server: Any, sessions: SignedSessions) -> None:
    """Put `PageSocket` on the websocket routes of a Panel server that signs people in."""
    for rule in server._tornado.wildcard_router.rules:
        target = rule.target
        if isinstance(target, type) and issubclass(target, WSHandler):
            rule.target = type("ServerPageSocket", (PageSocket, target), {"sessions": sessions})


class SessionAuth:
    """A mixin for Panel auth providers: the user of a request is the live session its signed
    cookie names (never an `is_guest` cookie); `/logout` is `SignOutHandler`; `autoload.js` (the
    page embedded elsewhere) is not served."""

    sessions: SignedSessions
    signout: type[SignOutHandler] = SignOutHandler

    @property
    def get_user(self) -> Callable[[HTTPServerRequest], User] | None:
        def get_user(handler: Any) -> User:
            if isinstance(handler, AutoloadJsHandler):  # SECURITY: a session token for other sites
                raise HTTPError(403, reason="The workbench is not embeddable")
            if isinstance(handler, DocHandler) and chooses_page(handler.request):
                # SECURITY: a link must not attach its opener to a page built for someone else.
                raise HTTPError(403, reason="A link may not choose the page's session")
            session = self.sessions.live(_sid(handler))
            return User(None if session is None else session.identity.principal.id)
        return get_user

    @property
    def logout_handler(self) -> type[SignOutHandler]:
        provider: Any = self
        return type("ServerSignOutHandler", (self.signout,), {
            "sessions": self.sessions, "_login_endpoint": provider._login_endpoint,
            "_logout_template": provider._logout_template})
