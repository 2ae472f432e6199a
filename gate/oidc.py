"""The checks of a token an OpenID Connect issuer signed: one home for the workbench's sign-in
(ID tokens, workbench.app.oidc) and the API's CI principals (workload-identity tokens, api.ci).

A token is accepted only when all of these hold, in this order:

1. its size: at most `MAX_TOKEN_CHARS` characters of the JWS compact form (three base64url parts),
   refused before anything is parsed;
2. its signature: an algorithm of `ALGORITHMS` the issuer announced (never `none`, never an
   HMAC one keyed with a shared secret), made by a key of the issuer's JWKS named by the token's
   `kid`; a `kid` the cached set lacks fetches the set again, at most once per
   `JWKS_REFETCH_SECONDS` (`KeyCache`: key rotation, without letting tokens with made-up key ids
   drive a fetch per request);
3. its claims (`check_claims`): `iss` exactly the issuer, `aud` holding the audience, `exp` in
   the future, `iat` and `nbf` (when present) not in the future, `sub` a string, each time with
   `LEEWAY_SECONDS` for clock skew, and whatever else the caller names (the ID token's `nonce`);
   for a caller that names a lifetime cap (the CI principals: `MAX_CI_LIFETIME_SECONDS`), `exp − iat`
   at most that (a token valid for years is refused, however fresh).

The issuer and its endpoints come from its discovery document (`read_discovery`): the document's
`issuer` must equal the configured one (OpenID Connect Discovery 4.3), its URLs https unless on
loopback. Every failure is a `TokenRefused` whose message is for the log, never for the caller.
"""

from __future__ import annotations

import ipaddress
import json
import time
import urllib.parse
from collections.abc import Callable, Mapping
from http.client import HTTPException
from typing import Any

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from joserfc.jwt import ClaimsOption

from gate.errors import Signal
from gate.events.outbound import Outbound, from_environment
from gate.events.targets import TargetRefused
from gate.strict_json import JsonValue

# Asymmetric signatures only: `none` and the HMAC ones (keyed with a client secret) are refused.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
LEEWAY_SECONDS = 60  # clock skew between the issuer and this host
JWKS_REFETCH_SECONDS = 30.0  # an unknown key id fetches the key set again at most this often
MAX_TOKEN_CHARS = 16_384  # an ID token with many groups fits; a token larger is refused unread
MAX_CI_LIFETIME_SECONDS = 3600  # a CI token's exp − iat (GitHub's and GitLab's are minutes to an hour)
FETCH_TIMEOUT = 15.0
MAX_DOCUMENT_BYTES = 1_048_576  # a discovery document or a JWKS larger is refused
MAX_REDIRECTS = 3  # an issuer's document may move (each hop checked as the first)


class TokenRefused(Signal):
    """A token (or the issuer's answer about it) does not hold; the message is logged, never shown."""


class UnknownKey(TokenRefused):
    """The token names a key the cached JWKS lacks (fetch the set again, within the bound)."""


def is_loopback(address: str) -> bool:
    """True for `localhost` and loopback IP addresses (127.0.0.0/8, ::1)."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def check_url(url: object, what: str, issuer: str) -> str:
    """An issuer's endpoint: https, or http on loopback only (ValueError otherwise)."""
    if not isinstance(url, str) or not url:
        raise ValueError(f"the provider's discovery document has no {what}")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback(parts.hostname or "")):
        raise ValueError(f"{what} {url!r} of {issuer} must be https (http only on loopback)")
    return url


def signing_algorithms(announced: object) -> tuple[str, ...]:
    """The algorithms of ALGORITHMS the issuer announced (RS256 when it announces none), or ValueError."""
    listed = announced if isinstance(announced, list) and announced else ["RS256"]
    algorithms = tuple(a for a in ALGORITHMS if a in listed)
    if not algorithms:
        raise ValueError(f"the issuer signs only with {listed}: the gate takes {', '.join(ALGORITHMS)}")
    return algorithms


def fetch_json(url: str, timeout: float = FETCH_TIMEOUT, outbound: Outbound | None = None) -> dict[str, JsonValue]:
    """A JSON object from an https (or loopback http) URL, at most MAX_DOCUMENT_BYTES, through the
    one outbound client (gate.events.outbound: resolved once, connected to the address checked,
    an internal host refused unless GATE_OUTBOUND_ALLOW_HOSTS names it, at most
    `MAX_REDIRECTS` redirects each checked anew); ValueError otherwise."""
    client = outbound or from_environment()
    try:
        answer = client.request("GET", url, headers={"Accept": "application/json"}, redirects=MAX_REDIRECTS,
                                timeout=timeout, max_bytes=MAX_DOCUMENT_BYTES,
                                each_url=lambda hop: check_url(hop, "the address", hop))
    except TargetRefused as refused:
        raise ValueError(f"cannot read {url}: {refused.message}") from None
    except (OSError, HTTPException) as exc:
        raise ValueError(f"cannot read {url}: {exc}") from None
    if answer.status != 200:
        raise ValueError(f"{url} answers {answer.status}")
    if len(answer.body) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"{url} answers more than {MAX_DOCUMENT_BYTES} bytes")
    try:
        document = json.loads(answer.body)
    except ValueError:
        raise ValueError(f"{url} does not answer JSON") from None
    if not isinstance(document, dict):
        raise ValueError(f"{url} does not answer a JSON object")
    return document


def read_discovery(issuer: str, fetch: Callable[[str], dict[str, JsonValue]] = fetch_json) -> dict[str, JsonValue]:
    """The issuer's discovery document, whose `issuer` is exactly `issuer` (ValueError otherwise)."""
    check_url(issuer, "the issuer", issuer)
    document = fetch(issuer.rstrip("/") + "/.well-known/openid-configuration")
    check_issuer(document, issuer)
    return document


def check_issuer(document: Mapping[str, JsonValue], issuer: str) -> None:
    if document.get("issuer") != issuer:
        raise ValueError(f"the discovery document of {issuer} names issuer {document.get('issuer')!r}: "
                         "they must be identical (OpenID Connect Discovery 4.3)")


class KeyCache:
    """An issuer's JWKS as last fetched, and whether a token's unknown `kid` may fetch it again:
    the first use fetches; a refresh is allowed once `JWKS_REFETCH_SECONDS` have passed since the
    last fetch (monotonic time)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.keys: KeySet | None = None
        self._fetched = float("-inf")

    def needs_fetch(self, refresh: bool) -> bool:
        return self.keys is None or (refresh and self.clock() - self._fetched > JWKS_REFETCH_SECONDS)

    def store(self, document: Mapping[str, JsonValue]) -> KeySet:
        """Keep a fetched JWKS document (TokenRefused when it is not a usable key set)."""
        try:
            keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise TokenRefused(f"the issuer's JWKS is unusable: {exc}") from None
        self.keys, self._fetched = keys, self.clock()
        return keys


def decode_signed(token: str, keys: KeySet, algorithms: tuple[str, ...]) -> dict[str, JsonValue]:
    """The claims of a JWS-signed JWT whose signature `keys` verify with one of `algorithms`:
    UnknownKey when it names a key the set lacks, TokenRefused for anything else."""
    # SECURITY: bounded before parsing; exactly the compact JWS form (no JWE, no JSON serialisation).
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        raise TokenRefused(f"the token is not a string of at most {MAX_TOKEN_CHARS} characters")
    if token.count(".") != 2:
        raise TokenRefused("the token is not a signed JWT (header.payload.signature)")
    try:
        decoded = jwt.decode(token, keys, algorithms=list(algorithms))
    except JoseError as exc:
        if exc.error == "invalid_key_id":
            raise UnknownKey(f"the token names a key the issuer's JWKS lacks: {exc}") from None
        raise TokenRefused(f"the token's signature does not hold: {exc}") from None
    except (ValueError, TypeError, KeyError) as exc:  # a malformed part joserfc does not wrap
        raise TokenRefused(f"the token cannot be read: {type(exc).__name__}") from None
    return dict(decoded.claims)


def check_claims(claims: dict[str, Any], *, issuer: str, audience: str, now: float,
                 max_lifetime: int | None = None, **more: ClaimsOption) -> dict[str, Any]:
    """`claims` once `iss`, `aud`, `exp`, `iat`, `nbf`, `sub`, the lifetime cap (`exp − iat` at most
    `max_lifetime` seconds, when given) and the `more` claim options hold (joserfc's ClaimsOption:
    {"essential": True, "value": ...}); TokenRefused otherwise."""
    registry = jwt.JWTClaimsRegistry(
        now=int(now), leeway=LEEWAY_SECONDS,
        iss={"essential": True, "value": issuer}, aud={"essential": True, "value": audience},
        exp={"essential": True}, iat={"essential": True}, sub={"essential": True}, **more)
    try:
        registry.validate(claims)
    except JoseError as exc:
        raise TokenRefused(f"the token's claims do not hold: {exc}") from None
    if not isinstance(claims["sub"], str):
        raise TokenRefused("the token's sub is not a string")
    if max_lifetime is not None:
        lifetime = claims["exp"] - claims["iat"]  # numbers: the registry checked both
        if lifetime > max_lifetime:
            raise TokenRefused(f"the token lives {lifetime} s (exp − iat), more than the {max_lifetime} s allowed")
    return claims
