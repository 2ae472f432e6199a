"""Workbench sign-in: Panel's login page, checked against scrypt hashes, with failed sign-ins
throttled per user and per client address.

`signin_provider(password_file)` is the auth provider `workbench.app.server` hands to Panel in
place of Panel's basic auth (which compares plaintext passwords with `==`). A sign-in runs:

1. the throttle (`SignInThrottle`): an address with too many recent failures for this user, or
   for all users, or with a check already running, gets 429 and the login page saying when to
   try again, with `Retry-After`; the KDF does not run, so the throttle bounds CPU as well as
   guesses. A user with many recent failures from anywhere slows down further guesses from
   addresses that have failed (one every few seconds, over all of them), but never an address
   that has not: nobody can lock a user out by failing in their name (issue 41). The global cap
   on checks running at once holds back only addresses that have failed: a flood from many
   addresses never refuses a clean address's sign-in, which waits its turn on the pool (issue 52);
2. the password check (`workbench.app.passwords.PasswordCheck`) on a two-thread pool, so the
   server's event loop keeps serving while scrypt runs: at most two checks use CPU at once;
3. a failure: 401 and the login page ("Invalid username or password."), counted against the
   user at the address, the address and the user; a success: a server-side session
   (`workbench.app.sessions`) named by Panel's signed cookie,
   the failures of the user at this address forgotten (the address's are not: a valid account
   does not buy an address more guesses; nor the user's: the owner's sign-in does not reset an
   attacker's slowdown).

SECURITY: the address is the TCP peer (`remote_ip`); forwarded headers are not trusted, so
behind a proxy every client shares the proxy's address budget. A session is the server-side one
the signed `user` cookie names (`workbench.app.sessions`), never an `is_guest` cookie (Panel's
`pn.state.user` answers "guest" for any request that carries one, which a client sets at will).
The login page shows only the messages this module writes, never a `?error=` text from the link
that opened it; a sign-in returns only to a path on this workbench (`safe_next`), kept in its
cookie percent-encoded (a character above U+00FF cannot be written in a header).

Login CSRF (issue 63, defect 2): a page on another site must not sign the browser in as someone
(the attacker), so that what the victim types next lands in the attacker's account. The login page
sets a random token in a `SameSite=Strict`, `HttpOnly` cookie (`SIGNIN_TOKEN_COOKIE`) and writes
it into its form; a sign-in is checked before the throttle and the KDF: its `Origin` must be one
of the workbench's own (scheme included, `workbench.app.origins`), or, without an `Origin`, its
`Referer` must not name another site; and the form's token must equal the cookie's
(`secrets.compare_digest`, constant time). Otherwise 403 and the login page (with a token);
nobody is signed in.
A browser sends no `SameSite=Strict` cookie with a request another site starts, so a cross-site
post carries no token to match even where it carries no `Origin`. The login page is served with
`Referrer-Policy: same-origin`, so the browser sends its real `Origin` with the form (under the
workbench's `no-referrer` it would send `Origin: null`).
"""

from __future__ import annotations

import ipaddress
import logging
import math
import re
import secrets
import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from panel.auth import BasicAuthProvider, BasicLoginHandler
from panel.io.resources import CDN_DIST
from panel.io.state import state
from tornado.ioloop import IOLoop

from workbench.app.access import Identity
from workbench.app.passwords import MAX_USER_CHARS, PasswordCheck
from workbench.app.sessions import SessionAuth, SessionHandler, SignedSessions, safe_next

log = logging.getLogger(__name__)

INVALID = "Invalid username or password."
FORGED = "The sign-in form expired or came from another site. Sign in again."
SIGNIN_TOKEN_COOKIE = "signin_token"  # noqa: S105  # a cookie's name, not a secret
SIGNIN_TOKEN_FIELD = "signin_token"  # noqa: S105  # the form field's name
_TOKEN = re.compile(r"[A-Za-z0-9_-]{43}")  # secrets.token_urlsafe(32)
_FORM_TAG = re.compile(r"(<form\b[^>]*>)", re.IGNORECASE)
# Every printable ASCII character but space: what a `next` keeps as it is in its cookie.
_KEPT_IN_COOKIE = "".join(chr(code) for code in range(0x21, 0x7F))
KDF_THREADS = 2
MAX_CHECKS_RUNNING = 8


@dataclass(frozen=True)
class ThrottlePolicy:
    """`free` failures pass; each further one blocks for `base` seconds doubled per failure,
    at most `longest`; failures are forgotten after `forget` seconds without one."""

    free: int
    base: float
    longest: float
    forget: float
    running: int  # checks that may run at once for one key


# One address guessing one user's password gets 5 free failures, then 30 s, 1 min, 2 min, … up
# to 15 min between guesses, until an hour passes without a failure: about 100 guesses a day.
# An address gets 20 free failures over all users (several people may share one), then the same.
# These block only the address that failed: they are what an attacker's own guesses cost him.
PAIR_POLICY = ThrottlePolicy(free=5, base=30.0, longest=900.0, forget=3600.0, running=2)
ADDRESS_POLICY = ThrottlePolicy(free=20, base=30.0, longest=900.0, forget=3600.0, running=4)
# A user: after 20 failures from anywhere within the hour, guesses from addresses that have failed
# are spaced 2 s, 4 s, … at most 60 s apart, over all of them together (one at a time per slot):
# many addresses cannot outguess one. It never blocks: an address that has not failed is not
# subject to it, so the user's right password from a clean address always gets in (issue 41).
USER_POLICY = ThrottlePolicy(free=20, base=2.0, longest=60.0, forget=3600.0, running=1)


@dataclass
class _Record:
    failures: int = 0
    blocked_until: float = 0.0
    last_failure: float = 0.0
    running: int = 0


class _Book:
    """Records of one kind of key (users, addresses, or a user at an address), the least recently
    used dropped first beyond `capacity` (a record that is running a check is never dropped)."""

    def __init__(self, policy: ThrottlePolicy, capacity: int) -> None:
        self.policy, self.capacity = policy, capacity
        self.records: OrderedDict[object, _Record] = OrderedDict()

    def get(self, key: object, now: float) -> _Record:
        record = self.records.get(key)
        if record is None:
            record = self.records[key] = _Record()
            self._trim()
        elif record.failures and now - record.last_failure > self.policy.forget and not record.running:
            record.failures, record.blocked_until = 0, 0.0
        self.records.move_to_end(key)
        return record

    def _trim(self) -> None:
        while len(self.records) > self.capacity:
            key = next((k for k, r in self.records.items() if not r.running), None)
            if key is None:
                return
            del self.records[key]

    def wait(self, record: _Record, now: float) -> float:
        if record.running >= self.policy.running:
            return 1.0
        return max(0.0, record.blocked_until - now)

    def fail(self, record: _Record, now: float) -> None:
        record.failures += 1
        record.last_failure = now
        excess = record.failures - self.policy.free
        if excess > 0:
            record.blocked_until = now + self.delay(record)

    def delay(self, record: _Record) -> float:
        """The block after `record`'s latest failure: base doubled per failure past the free ones."""
        excess = record.failures - self.policy.free
        return min(self.policy.base * 2 ** min(excess - 1, 30), self.policy.longest) if excess > 0 else 0.0

    def forget(self, key: object) -> None:
        """A success: the key's failures are forgotten (the record too, unless in use)."""
        record = self.records.get(key)
        if record is not None:
            record.failures, record.blocked_until = 0, 0.0
            if not record.running:
                del self.records[key]


class SignInThrottle:
    """Failed sign-ins per user at an address, per address and per user (see the module docstring)."""

    def __init__(self, pairs: ThrottlePolicy = PAIR_POLICY, addresses: ThrottlePolicy = ADDRESS_POLICY,
                 users: ThrottlePolicy = USER_POLICY, clock: Callable[[], float] = time.monotonic,
                 capacity: int = 10_000) -> None:
        self.pairs, self.addresses = _Book(pairs, capacity), _Book(addresses, capacity)
        self.users = _Book(users, capacity)
        self.clock = clock
        self.running = 0
        self._lock = threading.Lock()

    def admit(self, user: str, address: str) -> float:
        """0 to go ahead (then `finish` must follow), else the seconds to wait before trying again."""
        with self._lock:
            now = self.clock()
            name = user[:MAX_USER_CHARS + 1]
            pair, at = self.pairs.get((name, address), now), self.addresses.get(address, now)
            wait = max(self.pairs.wait(pair, now), self.addresses.wait(at, now))
            slowed = self._slowed(name, at, now)
            if slowed is not None:  # an address that has failed, guessing a user past the free failures
                wait = max(wait, self.users.wait(slowed, now))
            if wait == 0 and at.failures and self.running >= MAX_CHECKS_RUNNING:
                # The global cap holds back addresses that have failed, never a clean one: a flood
                # from many addresses must not refuse the owner's sign-in (issue 52, item 11).
                wait = 1.0
            if wait:
                return wait
            if slowed is not None:  # this check takes the user's next slot
                slowed.blocked_until = now + self.users.delay(slowed)
            for record in (pair, at):
                record.running += 1
            self.running += 1
            return 0.0

    def _slowed(self, name: str, address: _Record, now: float) -> _Record | None:
        """The user's record when the user-wide slowdown applies to this attempt, else None: it
        applies to addresses with a recent failure once the user is past its free failures."""
        if not address.failures:
            return None
        record = self.users.get(name, now)
        return record if record.failures > self.users.policy.free else None

    def finish(self, user: str, address: str, succeeded: bool) -> None:
        """Count the outcome of an admitted check."""
        with self._lock:
            now = self.clock()
            name = user[:MAX_USER_CHARS + 1]
            pair, at = self.pairs.get((name, address), now), self.addresses.get(address, now)
            pair.running -= 1
            at.running -= 1
            self.running -= 1
            if succeeded:  # this address's failures for the user are forgotten; the address's are
                self.pairs.forget((name, address))  # not (a valid account buys no more guesses),
                return  # nor the user's (the owner signing in does not reset an attacker's slowdown)
            self.pairs.fail(pair, now)
            self.addresses.fail(at, now)
            user_record = self.users.get(name, now)
            user_record.failures += 1
            user_record.last_failure = now


def client_key(address: str) -> str:
    """The throttle's key for a client address: the address itself for IPv4, its /64 network for
    IPv6 (one host usually holds a whole /64, and could otherwise take a fresh address per guess)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


@dataclass
class SignIn:
    """What the login handler of one server checks with."""

    passwords: PasswordCheck
    throttle: SignInThrottle
    pool: ThreadPoolExecutor


class SignInHandler(SessionHandler, BasicLoginHandler):
    """Panel's login page; the check, the throttle, the session and the redirect are ours."""

    signin: SignIn  # set on the subclass `signin_provider` makes for one server

    def _validate(self, username: str, password: str) -> bool:
        return False  # Panel's plaintext check: never used (`post` below checks the password)

    def _page(self, status: int, message: str) -> None:
        self.set_status(status)
        self.set_header("Cache-Control", "no-store")
        self.set_header("Referrer-Policy", "same-origin")  # the form's `Origin` is then ours, not "null"
        token = self._token()
        page = self._login_template.render(login_endpoint=self._login_endpoint, errormessage=message,
                                           PANEL_CDN=CDN_DIST)
        field = f'<input type="hidden" name="{SIGNIN_TOKEN_FIELD}" value="{token}">'
        self.write(_FORM_TAG.sub(lambda tag: tag.group(1) + field, page, count=1))

    def _token(self) -> str:
        """The browser's sign-in token, or a new one set in its `SameSite=Strict` cookie."""
        current = self.get_cookie(SIGNIN_TOKEN_COOKIE) or ""
        if _TOKEN.fullmatch(current):
            return current
        token = secrets.token_urlsafe(32)
        self.set_cookie(SIGNIN_TOKEN_COOKIE, token, httponly=True, samesite="Strict")
        return token

    def _forged(self) -> str | None:
        """Why this sign-in is refused as another site's (None: it is the workbench's own form)."""
        origins, headers = self.sessions.origins, self.request.headers
        origin = headers.get("Origin")
        if origin is not None:
            if not origins.is_own(self.request, origin):
                return "its Origin is another site's"
        elif headers.get("Referer") and not origins.is_own(self.request, headers["Referer"]):
            return "its Referer is another site's"
        cookie = self.get_cookie(SIGNIN_TOKEN_COOKIE) or ""
        sent = self.get_body_argument(SIGNIN_TOKEN_FIELD, "")
        # SECURITY: constant-time; an empty or malformed token never matches.
        if not _TOKEN.fullmatch(cookie) or not secrets.compare_digest(cookie.encode(), sent.encode("utf-8", "replace")):
            return "its token does not match the sign-in cookie"
        return None

    def get(self) -> None:
        # Panel's handler shows `?error=` as the page's message, so any link could put its own
        # text (a phishing line) on our sign-in page. Ours shows none until a sign-in fails.
        # SECURITY: `next` only as a path on this workbench (`safe_next`; Panel's check let
        # `///evil.example` through), checked again before the redirect.
        next_url = safe_next(self.get_argument("next", None), "")
        if next_url:  # percent-encoded: a header holds no character above U+00FF (issue 63)
            self.set_cookie("next_url", urllib.parse.quote(next_url, safe=_KEPT_IN_COOKIE), httponly=True)
        else:
            self.clear_cookie("next_url")
        self._page(200, "")

    async def post(self) -> None:
        forged = self._forged()
        if forged is not None:  # SECURITY: login CSRF; before the throttle: no KDF, no count
            log.warning("workbench sign-in refused: %s", forged)
            self._page(403, FORGED)
            return
        user = self.get_argument("username", "")
        password = self.get_argument("password", "", strip=False)
        address = client_key(self.request.remote_ip or "")
        wait = self.signin.throttle.admit(user, address)
        if wait:
            seconds = math.ceil(wait)
            self.set_header("Retry-After", str(seconds))
            self._page(429, f"Too many failed sign-ins from this address. Try again in {seconds} s.")
            return
        verdict = False
        try:
            verdict = await IOLoop.current().run_in_executor(
                self.signin.pool, self.signin.passwords.verify, user, password)
        finally:
            self.signin.throttle.finish(user, address, verdict)
        if not verdict:
            self._page(401, INVALID)
            return
        self.open_session(Identity.password_user(user))
        self.clear_cookie(SIGNIN_TOKEN_COOKIE, samesite="Strict")  # the next sign-in form gets a fresh token
        target = safe_next(self.get_cookie("next_url"), state.base_url or "/")  # a cookie is what the browser says
        self.clear_cookie("next_url")
        self.redirect(target)


class SignInProvider(SessionAuth, BasicAuthProvider):
    """Panel's basic auth provider with `SignInHandler` as its login handler and server-side
    sessions (`workbench.app.sessions`)."""

    def __init__(self, signin: SignIn, sessions: SignedSessions) -> None:
        self.sessions = sessions
        self._handler: type[SignInHandler] = type("ServerSignInHandler", (SignInHandler,),
                                                  {"signin": signin, "sessions": sessions})
        # Validates the provider, reading `login_handler`; Panel leaves it unannotated.
        super().__init__()  # type: ignore[no-untyped-call]

    @property
    def login_handler(self) -> type[SignInHandler]:
        self._handler._login_endpoint = self._login_endpoint
        self._handler._login_template = self._login_template
        return self._handler


def signin_provider(password_file: Path, sessions: SignedSessions,
                    throttle: SignInThrottle | None = None) -> SignInProvider:
    """The auth provider of a server whose users sign in against `password_file` (refused with
    `PasswordFileError` if it holds anything but scrypt hashes)."""
    pool = ThreadPoolExecutor(max_workers=KDF_THREADS, thread_name_prefix="workbench-signin")
    return SignInProvider(SignIn(PasswordCheck(password_file), throttle or SignInThrottle(), pool), sessions)
