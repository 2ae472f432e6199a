"""Workbench sign-in through an OpenID Connect provider: the authorization-code flow with PKCE.

`oidc_provider(settings, access)` is the auth provider `workbench.app.server` hands to Panel.
Panel runs the flow's plumbing (its OAuth login handler: the `state` value bound to a signed
cookie, the PKCE verifier and S256 challenge in a signed cookie, the error page, the logout
page); `joserfc` checks the ID token. A sign-in runs:

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
   claim that the grants file names, in Panel's signed `user` cookie (`identity_from_cookie`).

SECURITY: every failure answers 401 with a fixed message (the provider's text is logged, never
shown); the token response and the ID token are never stored in a cookie or shown.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
import secrets
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from panel.auth import BasicAuthProvider, OAuthLoginHandler, _deserialize_state, _validate_next_url
from panel.config import config
from panel.io.state import state
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from tornado.web import HTTPError, decode_signed_value

from gate.errors import CodedError, Signal
from gate.principals import Principal
from workbench.app.access import Identity, identity_from_claims, is_loopback
from workbench.app.oidc_settings import OIDCSettings

log = logging.getLogger(__name__)

NONCE_COOKIE = "gate-oidc-nonce"
# Asymmetric signatures only: `none` and the HMAC ones (keyed with the client secret) are refused.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY_SECONDS = 60  # clock skew between the provider and this host
JWKS_REFETCH_SECONDS = 30.0  # an unknown key id fetches the key set again at most this often
MAX_GROUP_CHARS = 256
DISCOVERY_TIMEOUT = 15.0


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


def _check_url(url: object, what: str, issuer: str) -> str:
    if not isinstance(url, str) or not url:
        raise OIDCConfigError(f"the provider's discovery document has no {what}")
    parts = urllib.parse.urlsplit(url)
    loopback = is_loopback(parts.hostname or "")
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise OIDCConfigError(f"{what} {url!r} of {issuer} must be https (http only on loopback)")
    return url


def discovery_from(document: Mapping[str, Any], issuer: str) -> Discovery:
    """Check a discovery document against the configured issuer (OIDCConfigError if unusable)."""
    if document.get("issuer") != issuer:
        raise OIDCConfigError(f"the discovery document of {issuer} names issuer {document.get('issuer')!r}: "
                              "they must be identical (OpenID Connect Discovery 4.3)")
    if "code" not in document.get("response_types_supported", ["code"]):
        raise OIDCConfigError(f"{issuer} does not offer the authorization-code flow")
    if "S256" not in document.get("code_challenge_methods_supported", ["S256"]):
        raise OIDCConfigError(f"{issuer} does not offer PKCE with S256")
    announced = document.get("id_token_signing_alg_values_supported") or ["RS256"]
    algorithms = tuple(a for a in ALGORITHMS if a in announced)
    if not algorithms:
        raise OIDCConfigError(f"{issuer} signs ID tokens only with {announced}: the workbench takes "
                              f"{', '.join(ALGORITHMS)}")
    methods = document.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    client_auth = "client_secret_basic" if "client_secret_basic" in methods else "client_secret_post"
    return Discovery(issuer, _check_url(document.get("authorization_endpoint"), "authorization_endpoint", issuer),
                     _check_url(document.get("token_endpoint"), "token_endpoint", issuer),
                     _check_url(document.get("jwks_uri"), "jwks_uri", issuer), algorithms, client_auth)


def discover(settings: OIDCSettings) -> Discovery:
    """Read and check the provider's discovery document (once, when the server is built)."""
    _check_url(settings.issuer, "the issuer", settings.issuer)
    url = settings.issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        with urllib.request.urlopen(url, timeout=DISCOVERY_TIMEOUT) as response:  # noqa: S310  # https or loopback http, checked above
            document = json.loads(response.read())
    except (OSError, ValueError) as exc:
        raise OIDCConfigError(f"cannot read the discovery document {url}: {exc}") from None
    if not isinstance(document, dict):
        raise OIDCConfigError(f"the discovery document {url} is not a JSON object")
    return discovery_from(document, settings.issuer)


class SignInFailed(Signal):
    """One sign-in failed; the message is logged, the browser gets a fixed 401 page (`_refuse`)."""


class OIDCClient:
    """The relying party of one server: the token exchange and the ID token's checks."""

    def __init__(self, settings: OIDCSettings, discovery: Discovery, kept_groups: frozenset[str],
                 clock: Callable[[], float] = time.time) -> None:
        self.settings, self.discovery, self.kept_groups, self.clock = settings, discovery, kept_groups, clock
        self._keys: KeySet | None = None
        self._keys_fetched = float("-inf")

    async def _fetch_json(self, request: HTTPRequest | str) -> dict[str, Any]:
        try:
            response = await AsyncHTTPClient().fetch(request)
        except HTTPClientError as exc:
            body = exc.response.body[:500] if exc.response is not None and exc.response.body else b""
            raise SignInFailed(f"the provider answered {exc.code}: {body!r}") from None
        except OSError as exc:
            raise SignInFailed(f"the provider is unreachable: {exc}") from None
        try:
            document = json.loads(response.body)
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
        tokens = await self._fetch_json(HTTPRequest(self.discovery.token_endpoint, method="POST", headers=headers,
                                                    body=urllib.parse.urlencode(form), request_timeout=30))
        id_token = tokens.get("id_token")
        if not isinstance(id_token, str):
            raise SignInFailed("the token response holds no id_token (is `openid` among the scopes?)")
        return id_token

    async def _key_set(self, refresh: bool) -> KeySet:
        now = time.monotonic()
        if self._keys is None or (refresh and now - self._keys_fetched > JWKS_REFETCH_SECONDS):
            document = await self._fetch_json(self.discovery.jwks_uri)
            try:
                self._keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
            except (JoseError, ValueError, TypeError, KeyError) as exc:
                raise SignInFailed(f"the provider's JWKS is unusable: {exc}") from None
            self._keys_fetched = now
        return self._keys

    async def verify(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The ID token's claims once its signature and its claims hold (SignInFailed otherwise)."""
        for refresh in (False, True):
            try:
                token = jwt.decode(id_token, await self._key_set(refresh), algorithms=list(self.discovery.algorithms))
                break
            except JoseError as exc:
                if refresh or exc.error != "invalid_key_id":
                    raise SignInFailed(f"the ID token's signature does not hold: {exc}") from None
        claims = dict(token.claims)
        registry = jwt.JWTClaimsRegistry(
            now=lambda: int(self.clock()), leeway=LEEWAY_SECONDS,
            iss={"essential": True, "value": self.discovery.issuer},
            aud={"essential": True, "value": self.settings.client_id},
            exp={"essential": True}, iat={"essential": True}, sub={"essential": True},
            nonce={"essential": True, "value": nonce})
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise SignInFailed(f"the ID token's claims do not hold: {exc}") from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.settings.client_id:
            raise SignInFailed("the ID token has several audiences and its azp is not this client")
        if not isinstance(claims["sub"], str):
            raise SignInFailed("the ID token's sub is not a string")
        return claims

    def cookie_value(self, claims: Mapping[str, Any]) -> str:
        """The signed `user` cookie's value: the person and the groups the grants file names."""
        issuer, subject, name, groups = identity_from_claims(claims, self.settings.groups_claim)
        Principal.person(issuer, subject, name)  # refuses an unusable subject or name (ValueError)
        kept = sorted(g for g in groups if g in self.kept_groups and len(g) <= MAX_GROUP_CHARS)
        return json.dumps({"iss": issuer, "sub": subject, "name": name, "groups": kept}, separators=(",", ":"))


def identity_from_cookie(cookies: Mapping[str, str], secret: str | bytes | None, max_age_days: float,
                         issuer: str) -> Identity | None:
    """The signed-in person of a session, from the signed `user` cookie alone (None if absent,
    unsigned, expired, or written for another issuer)."""
    value = cookies.get("user")
    if not value or not secret:
        return None
    decoded = decode_signed_value(secret, "user", value, max_age_days=max_age_days)
    if decoded is None:
        return None
    try:
        data = json.loads(decoded)
        principal = Principal.person(data["iss"], data["sub"], data.get("name"))
        groups = tuple(g for g in data.get("groups", []) if isinstance(g, str))
    except (ValueError, KeyError, TypeError):
        return None
    return Identity(principal, groups) if principal.issuer == issuer else None


class OIDCLoginHandler(OAuthLoginHandler):
    """Panel's OAuth login handler, driven by the discovery document, with the ID token checked."""

    oidc: OIDCClient  # set on the subclass `oidc_provider` makes for one server

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
            claims = await self.oidc.verify(await self.oidc.exchange(code, self._redirect_target(), verifier), nonce)
            user = self.oidc.cookie_value(claims)
        except (SignInFailed, ValueError) as exc:
            self._refuse(str(exc))
        self.clear_cookie("is_guest")
        self.set_secure_cookie("user", user, expires_days=config.oauth_expiry, httponly=True, path=config.cookie_path)
        next_url = _validate_next_url(_deserialize_state(url_state).get("next_url"))
        self.redirect(next_url or state.base_url)

    def _authorize(self) -> None:
        """Send the browser to the provider: state, nonce and the PKCE challenge in signed cookies."""
        # Panel's OAuthLoginHandler (unannotated): the state and the PKCE pair, in signed cookies.
        value = self.get_state()  # type: ignore[no-untyped-call]
        self.set_state_cookie(value)  # type: ignore[no-untyped-call]
        verifier, challenge = self.get_code()  # type: ignore[no-untyped-call]
        self.set_code_cookie(verifier)  # type: ignore[no-untyped-call]
        nonce = secrets.token_urlsafe(32)
        self.set_secure_cookie(NONCE_COOKIE, nonce, expires_days=config.oauth_expiry, httponly=True,
                               path=self._login_endpoint)
        query = {"response_type": "code", "client_id": self.oidc.settings.client_id,
                 "redirect_uri": self._redirect_target(), "scope": " ".join(self.oidc.settings.scopes),
                 "state": value, "nonce": nonce, "code_challenge": challenge, "code_challenge_method": "S256"}
        self.redirect(f"{self.oidc.discovery.authorization_endpoint}?{urllib.parse.urlencode(query)}")


class OIDCProvider(BasicAuthProvider):
    """Panel's auth provider (login, logout, the signed `user` cookie) with `OIDCLoginHandler`."""

    def __init__(self, client: OIDCClient) -> None:
        self._handler: type[OIDCLoginHandler] = type("ServerOIDCLoginHandler", (OIDCLoginHandler,), {"oidc": client})
        super().__init__()  # type: ignore[no-untyped-call]  # Panel's BasicAuthProvider is unannotated

    @property
    def login_handler(self) -> type[OIDCLoginHandler]:
        self._handler._login_endpoint = self._login_endpoint
        self._handler._error_template = self._error_template
        return self._handler


def oidc_provider(settings: OIDCSettings, kept_groups: frozenset[str],
                  discovery: Discovery | None = None) -> OIDCProvider:
    """The auth provider of a server whose people sign in at `settings.issuer` (discovered now
    unless given; OIDCConfigError if the provider is unusable)."""
    return OIDCProvider(OIDCClient(settings, discovery or discover(settings), kept_groups))
