"""Workbench sign-in through an OpenID Connect provider: the authorization-code flow with PKCE.

`oidc_provider(settings, access)` is the auth provider `workbench.app.server` hands to Panel.
Panel runs the flow's plumbing (its OAuth login handler: the `state` value bound to a signed
cookie, the PKCE verifier and S256 challenge in a signed cookie, the error page, the logout
page); `gate.oidc` checks the ID token (the one home of token checks, which the API's CI
principals use too). A sign-in runs:

1. discovery, once, when the server is built (`discover`): the provider's
   `/.well-known/openid-configuration`, whose `issuer` must be exactly the configured one
   (OpenID Connect Discovery 4.3), over https unless the issuer is on loopback;
2. the redirect to the authorization endpoint with `state`, `nonce` (a signed cookie too) and
   the S256 code challenge;
3. back at `/login`: the `state` compared with its cookie, the RFC 9207 `iss` parameter (when
   sent) with the issuer, then the code exchanged at the token endpoint with the PKCE verifier,
   the client authenticated with its secret (HTTP Basic, or in the body where the provider
   only takes that; a public client sends its id alone);
4. the ID token's signature checked against the provider's JWKS (fetched again when a token
   names a key it does not hold: key rotation), with an algorithm the provider announced and
   never `none` or a shared-secret one, and its claims: `iss` the issuer, `aud` holding the
   client id (and `azp` the client id when there are several audiences), `exp` in the future,
   `iat` not in the future, `nonce` the one sent, `sub` present;
5. the person (`gate.principals.Principal.person(iss, sub, name)`) and the groups of the groups
   claim that the grants file names, in a server-side session (`workbench.app.sessions`) that
   the signed `user` cookie names; the ID token is kept there for the provider's logout;
6. `/logout` ends the session and, where the provider offers `end_session_endpoint`, the
   provider's session too (`OIDCSignOutHandler`).

SECURITY: every failure answers 401 with a fixed message (the provider's text is logged, never
shown; the log never holds the code or the state); the token response and the ID token are
never stored in a cookie or shown.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import secrets
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any, NoReturn

from joserfc.jwk import KeySet
from panel.auth import BasicAuthProvider, OAuthLoginHandler, _deserialize_state, _serialize_state
from panel.config import config
from panel.io.state import state
from tornado.ioloop import IOLoop
from tornado.web import HTTPError

from gate import oidc as tokens
from gate.errors import CodedError, Signal
from gate.events.outbound import Answer, from_environment
from gate.events.targets import TargetRefused
from gate.principals import Principal
from gate.strict_json import JsonValue
from workbench.app.access import Identity, identity_from_claims
from workbench.app.oidc_settings import OIDCSettings
from workbench.app.sessions import (
    Session,
    SessionAuth,
    SessionHandler,
    SignedSessions,
    SignOutHandler,
    safe_next,
)

log = logging.getLogger(__name__)

NONCE_COOKIE = "gate-oidc-nonce"
MAX_GROUP_CHARS = 256


class OIDCConfigError(CodedError, ValueError):
    """The provider or its configuration is unusable; the message says what to fix."""

    CODE = "WORKBENCH_OIDC_INVALID"


@dataclass(frozen=True)
class Discovery:
    """The parts of the provider's discovery document the flow uses."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    algorithms: tuple[str, ...]
    client_auth: str  # client_secret_basic | client_secret_post
    end_session_endpoint: str | None = None  # RP-initiated logout, when the provider offers it


def _check_url(url: object, what: str, issuer: str) -> str:
    try:
        return tokens.check_url(url, what, issuer)
    except ValueError as exc:
        raise OIDCConfigError(str(exc)) from None


def discovery_from(document: Mapping[str, Any], issuer: str) -> Discovery:
    """Check a discovery document against the configured issuer (OIDCConfigError if unusable)."""
    try:
        tokens.check_issuer(document, issuer)
        algorithms = tokens.signing_algorithms(document.get("id_token_signing_alg_values_supported"))
    except ValueError as exc:
        raise OIDCConfigError(str(exc)) from None
    if "code" not in document.get("response_types_supported", ["code"]):
        raise OIDCConfigError(f"{issuer} does not offer the authorization-code flow")
    if "S256" not in document.get("code_challenge_methods_supported", ["S256"]):
        raise OIDCConfigError(f"{issuer} does not offer PKCE with S256")
    methods = document.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    client_auth = "client_secret_basic" if "client_secret_basic" in methods else "client_secret_post"
    end_session = document.get("end_session_endpoint")
    return Discovery(issuer, _check_url(document.get("authorization_endpoint"), "authorization_endpoint", issuer),
                     _check_url(document.get("token_endpoint"), "token_endpoint", issuer),
                     _check_url(document.get("jwks_uri"), "jwks_uri", issuer), algorithms, client_auth,
                     _check_url(end_session, "end_session_endpoint", issuer) if end_session is not None else None)


def discover(settings: OIDCSettings) -> Discovery:
    """Read and check the provider's discovery document (once, when the server is built)."""
    _check_url(settings.issuer, "the issuer", settings.issuer)
    url = settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        document = tokens.fetch_json(url)
    except ValueError as exc:
        raise OIDCConfigError(f"cannot read the discovery document {url}: {exc}") from None
    return discovery_from(document, settings.issuer)


class SignInFailed(Signal):
    """One sign-in failed; the message is logged, the browser gets a fixed 401 page (`_refuse`)."""


class OIDCClient:
    """The relying party of one server: the token exchange and the ID token's checks."""

    def __init__(self, settings: OIDCSettings, discovery: Discovery,
                 kept_groups: frozenset[str] | Callable[[], frozenset[str]],
                 clock: Callable[[], float] = time.time) -> None:
        self.settings, self.discovery, self.kept_groups, self.clock = settings, discovery, kept_groups, clock
        self._keys = tokens.KeyCache()

    async def _post_form(self, url: str, form: Mapping[str, str], headers: Mapping[str, str]) -> dict[str, JsonValue]:
        """POST `form` to the provider through the one outbound client (gate.events.outbound:
        resolved once, connected to the address checked, no redirect), off the event loop; the JSON
        object it answers with 200, SignInFailed otherwise."""
        body = urllib.parse.urlencode(form).encode("ascii")

        def post() -> Answer:
            return from_environment().request("POST", url, body, headers, timeout=30,
                                              max_bytes=tokens.MAX_DOCUMENT_BYTES)

        try:
            answer = await IOLoop.current().run_in_executor(None, post)
        except TargetRefused as refused:
            raise SignInFailed(f"the provider's token endpoint is refused: {refused.message}") from None
        except (OSError, HTTPException) as exc:
            raise SignInFailed(f"the provider is unreachable: {exc}") from None
        if answer.status != 200:
            raise SignInFailed(f"the provider answered {answer.status}: {answer.body[:500]!r}")
        try:
            document = json.loads(answer.body)
        except ValueError:
            raise SignInFailed("the provider's answer is not JSON") from None
        if not isinstance(document, dict):
            raise SignInFailed("the provider's answer is not a JSON object")
        return document

    async def exchange(self, code: str, redirect_uri: str, verifier: str) -> str:
        """The ID token for an authorization code (with the PKCE verifier)."""
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri,
                "code_verifier": verifier}
        headers = {"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"}
        secret, client_id = self.settings.client_secret, self.settings.client_id
        if secret and self.discovery.client_auth == "client_secret_basic":  # RFC 6749 2.3.1: form-encoded
            pair = f"{urllib.parse.quote(client_id, safe='')}:{urllib.parse.quote(secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        else:
            form |= {"client_id": client_id} | ({"client_secret": secret} if secret else {})
        tokens = await self._post_form(self.discovery.token_endpoint, form, headers)
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str):
            raise SignInFailed("the token response holds no id_token (is `openid` among the scopes?)")
        return id_token

    async def _key_set(self, refresh: bool) -> KeySet:
        """The provider's JWKS, fetched again for a refresh within `gate.oidc.KeyCache`'s bound."""
        keys = self._keys.keys
        if keys is None or self._keys.needs_fetch(refresh):
            try:  # through the one outbound client (gate.events.outbound), off the event loop
                document = await IOLoop.current().run_in_executor(None, tokens.fetch_json, self.discovery.jwks_uri)
                keys = self._keys.store(document)
            except ValueError as exc:
                raise SignInFailed(f"the provider's JWKS cannot be read: {exc}") from None
            except tokens.TokenRefused as exc:
                raise SignInFailed(str(exc)) from None
        return keys

    async def verify(self, id_token: str, nonce: str) -> dict[str, JsonValue]:
        """The ID token's claims once its signature and its claims hold (`gate.oidc`, with the
        `nonce` sent; SignInFailed otherwise)."""
        try:
            for refresh in (False, True):
                try:
                    claims = tokens.decode_signed(id_token, await self._key_set(refresh), self.discovery.algorithms)
                    break
                except tokens.UnknownKey:
                    if refresh:
                        raise
            tokens.check_claims(claims, issuer=self.discovery.issuer, audience=self.settings.client_id,
                                now=self.clock(), nonce={"essential": True, "value": nonce})
        except tokens.TokenRefused as exc:
            raise SignInFailed(f"the ID token: {exc}") from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.settings.client_id:
            raise SignInFailed("the ID token has several audiences and its azp is not this client")
        return claims

    def identity(self, claims: Mapping[str, JsonValue]) -> Identity:
        """The person the claims name, with the groups the grants file names (kept on the server)."""
        issuer, subject, name, groups = identity_from_claims(claims, self.settings.groups_claim)
        principal = Principal.person(issuer, subject, name)  # refuses an unusable subject or name (ValueError)
        named = self.kept_groups() if callable(self.kept_groups) else self.kept_groups  # the grants file now
        kept = sorted(g for g in groups if g in named and len(g) <= MAX_GROUP_CHARS)
        return Identity(principal, tuple(kept))


class OIDCLoginHandler(SessionHandler, OAuthLoginHandler):
    """Panel's OAuth login handler, driven by the discovery document, with the ID token checked."""

    oidc: OIDCClient  # set on the subclass `oidc_provider` makes for one server
    _OAUTH_LOGOUT_URL = ""  # Panel's error page reads it (no provider logout link on that page)

    def _redirect_target(self) -> str:
        return self.oidc.settings.redirect_uri or f"{self.request.protocol}://{self.request.host}{self._login_endpoint}"

    def _refuse(self, why: str) -> NoReturn:
        log.warning("workbench sign-in refused: %s", why)
        raise HTTPError(401, log_message="The sign-in could not be completed. Start again from the workbench.",
                        reason="Sign-in refused")

    async def get(self) -> None:
        if self.get_argument("error", None) is not None:
            self._refuse(f"the provider answered error={self.get_argument('error')!r}")
        code, url_state = self.get_argument("code", ""), self.get_argument("state", "")
        if not code:
            self._authorize()
            return
        cookie_state = self.get_state_cookie()  # type: ignore[no-untyped-call]  # Panel's handler is unannotated
        if not cookie_state or not hmac.compare_digest(cookie_state.encode(), url_state.encode()):
            self._refuse("the state does not match its cookie")
        returned_issuer = self.get_argument("iss", None)
        if returned_issuer is not None and returned_issuer != self.oidc.discovery.issuer:
            self._refuse(f"the authorization response names issuer {returned_issuer!r}")
        verifier = self.get_code_cookie()  # type: ignore[no-untyped-call]
        nonce = (self.get_secure_cookie(NONCE_COOKIE, max_age_days=config.oauth_expiry) or b"").decode()
        self.clear_cookie(NONCE_COOKIE, path=self._login_endpoint)
        if not verifier or not nonce:
            self._refuse("the PKCE verifier or the nonce cookie is missing")
        try:
            id_token = await self.oidc.exchange(code, self._redirect_target(), verifier)
            identity = self.oidc.identity(await self.oidc.verify(id_token, nonce))
        except (SignInFailed, ValueError) as exc:
            self._refuse(str(exc))
        self.open_session(identity, id_token)  # the ID token stays on the server (the provider's logout)
        # SECURITY: checked again just before the redirect (`safe_next`): the state is what came back.
        self.redirect(safe_next(_deserialize_state(url_state).get("next_url"), state.base_url or "/"))

    def _authorize(self) -> None:
        """Send the browser to the provider: state, nonce and the PKCE challenge in signed cookies."""
        # The state (the page to return to: a path on this workbench only) and, through Panel's
        # OAuthLoginHandler (unannotated), the PKCE pair, in signed cookies.
        next_url = safe_next(self.get_argument("next", None), state.base_url or "/")
        value = _serialize_state({"state_id": secrets.token_hex(16), "next_url": next_url})
        self.set_state_cookie(value)  # type: ignore[no-untyped-call]
        verifier, challenge = self.get_code()  # type: ignore[no-untyped-call]
        self.set_code_cookie(verifier)  # type: ignore[no-untyped-call]
        nonce = secrets.token_urlsafe(32)
        self.set_secure_cookie(NONCE_COOKIE, nonce, expires_days=config.oauth_expiry, httponly=True,
                               path=self._login_endpoint)
        query = {"response_type": "code", "client_id": self.oidc.settings.client_id,
                 "redirect_uri": self._redirect_target(), "scope": " ".join(self.oidc.settings.scopes),
                 "state": value, "nonce": nonce, "code_challenge": challenge, "code_challenge_method": "S256"}
        if self.sessions.book.ended_unsigned(self.signed_in_as()):
            # SECURITY: this browser's session ended without a sign-out (idle, its lifetime): the
            # provider's session may still live, so it asks for the password (a shared machine).
            query["prompt"] = "login"
        self.redirect(f"{self.oidc.discovery.authorization_endpoint}?{urllib.parse.urlencode(query)}")


class OIDCSignOutHandler(SignOutHandler):
    """`/logout`, then the provider's own logout (RP-initiated logout 1.0) with the session's ID
    token as `id_token_hint` and this workbench's `/logout` as `post_logout_redirect_uri` (register
    it at the provider), so the next sign-in on this browser asks for a password again."""

    oidc: OIDCClient

    def provider_logout(self, session: Session, switch: bool) -> str | None:
        endpoint = self.oidc.discovery.end_session_endpoint
        if endpoint is None or session.id_token is None:
            return None
        query = {"id_token_hint": session.id_token, "client_id": self.oidc.settings.client_id,
                 "post_logout_redirect_uri": post_logout_uri(self.oidc.settings, self.request, self.request.path),
                 "state": "switch" if switch else "out"}
        return f"{endpoint}?{urllib.parse.urlencode(query)}"


def post_logout_uri(settings: OIDCSettings, request: Any, logout_path: str) -> str:
    """This workbench's logout page as the provider sees it: the redirect URI's origin (when
    configured) or the request's, with the logout path."""
    if settings.redirect_uri:
        parts = urllib.parse.urlsplit(settings.redirect_uri)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, logout_path, "", ""))
    return f"{request.protocol}://{request.host}{logout_path}"


class OIDCProvider(SessionAuth, BasicAuthProvider):
    """Panel's auth provider (login, logout) with `OIDCLoginHandler`, server-side sessions
    (`workbench.app.sessions`) and the provider's logout."""

    def __init__(self, client: OIDCClient, sessions: SignedSessions) -> None:
        self.sessions = sessions
        self.signout = type("ServerOIDCSignOutHandler", (OIDCSignOutHandler,), {"oidc": client})
        self._handler: type[OIDCLoginHandler] = type("ServerOIDCLoginHandler", (OIDCLoginHandler,),
                                                     {"oidc": client, "sessions": sessions})
        super().__init__()  # type: ignore[no-untyped-call]  # Panel's BasicAuthProvider is unannotated

    @property
    def login_handler(self) -> type[OIDCLoginHandler]:
        self._handler._login_endpoint = self._login_endpoint
        self._handler._error_template = self._error_template
        return self._handler


def oidc_provider(settings: OIDCSettings, kept_groups: frozenset[str] | Callable[[], frozenset[str]],
                  sessions: SignedSessions,
                  discovery: Discovery | None = None) -> OIDCProvider:
    """The auth provider of a server whose people sign in at `settings.issuer` (discovered now
    unless given; OIDCConfigError if the provider is unusable)."""
    return OIDCProvider(OIDCClient(settings, discovery or discover(settings), kept_groups), sessions)
