"""CI as a principal (docs/ci-principal.md): a workload-identity token of the configured CI issuer
acts as `ci:<repository>@<ref>` with the roles the grants file's `ci` member gives it.

A bearer token of three dot-separated parts, on a route that takes CI principals (`keyed(ci=True)`:
publishing, reading and moving releases), is checked by `gate.oidc`, the same checks as the
workbench's sign-in: size first, then the signature against the issuer's JWKS (its discovery
document read at the first token; an unknown `kid` fetches the keys again at most every 30 s), an
asymmetric algorithm the issuer announced, `iss` the configured issuer, `aud` the configured
audience, `exp`, `iat` and `nbf` against the gate's clock with a minute's leeway, and a lifetime
(`exp − iat`) of at most `oidc.MAX_CI_LIFETIME_SECONDS`. Its repository and ref claims
(`GATE_CI_REPOSITORY_CLAIM`, `GATE_CI_REF_CLAIM`) name the principal; the grants file, read again
when it changes, gives its roles per scope (viewer, author, releaser at most), by an entry whose
repository and owner ids are the token's (`GATE_CI_REPOSITORY_ID_CLAIM`, `GATE_CI_OWNER_ID_CLAIM`:
a name changes hands, the ids do not), and `viewer` at most to a run whose event
(`GATE_CI_EVENT_CLAIM`) is not one of `GATE_CI_WRITE_EVENTS`. Each acceptance is logged with the
ids, the event, the workflow (`GATE_CI_WORKFLOW_CLAIM`) and the commit: the audit of who ran what.

The scope it acts in is the `x-gate-scope` header's, or, without one, the one scope its grants name.
Answers: 401 `*_UNAUTHORIZED` (with `WWW-Authenticate`) for a token that does not verify, whatever
the reason, which is logged and never shown; 403 for a verified principal with no role in the scope
(another repository, another branch) or on a route that takes no CI principal. A CI caller's limits
are the `starter` plan's.

SECURITY: the token is never logged or echoed; a grants file that cannot be read after a change
gives no CI principal any role until it is fixed (fail closed).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from api.auth import SCOPE_HEADER, AuthFailure
from gate import oidc
from gate.events.outbound import for_settings
from gate.grants import AccessConfigError, CIRun, Grants, ci_id, load_grants
from gate.principals import Principal, permissions_of
from gate.services.decide import Caller
from gate.settings import Settings, SettingsError
from gate.strict_json import JsonValue

log = logging.getLogger(__name__)

CI_PLAN = "starter"
MAX_SCOPE_CHARS = 200
GRANTS_CHECK_SECONDS = 1.0  # the grants file is stat-ed at most this often
INVALID = "the CI token is not valid"


class GrantsWatch:
    """The grants file as it is now: read again when its modification time or size changes."""

    def __init__(self, path: Path, monotonic: Callable[[], float]) -> None:
        self.path, self.monotonic = path, monotonic
        self._lock = threading.Lock()
        self._checked = monotonic()
        self._stamp = self._stat()
        try:
            self._grants = load_grants(path)
        except AccessConfigError as exc:
            raise SettingsError(f"GATE_GRANTS_FILE: {exc}") from None

    def _stat(self) -> tuple[int, int] | None:
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def current(self) -> Grants:
        with self._lock:
            now = self.monotonic()
            if now - self._checked >= GRANTS_CHECK_SECONDS:
                self._checked = now
                stamp = self._stat()
                if stamp != self._stamp:
                    self._stamp = stamp
                    try:
                        self._grants = load_grants(self.path)
                    except AccessConfigError as exc:
                        log.warning("the CI grants file cannot be used, no CI principal holds a role until it "
                                    "is fixed: %s", exc)
                        self._grants = Grants()
            return self._grants


class CIPrincipals:
    """The CI issuer of one app: its discovery, its keys and the grants of its principals."""

    def __init__(self, settings: Settings, clock: Callable[[], float], *,
                 fetch: Callable[[str], dict[str, JsonValue]] | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if settings.ci_issuer is None or settings.ci_audience is None or settings.grants_file is None:
            raise ValueError("CIPrincipals needs GATE_CI_ISSUER, GATE_CI_AUDIENCE and GATE_GRANTS_FILE")
        self.issuer, self.audience = settings.ci_issuer, settings.ci_audience
        self.repository_claim, self.ref_claim = settings.ci_repository_claim, settings.ci_ref_claim
        self.id_claims = (settings.ci_repository_id_claim, settings.ci_owner_id_claim)
        self.event_claim, self.workflow_claim = settings.ci_event_claim, settings.ci_workflow_claim
        self.write_events = frozenset(settings.ci_write_events)
        limits = settings.plans[CI_PLAN]
        self.rate_limit, self.monthly_cap = limits["rate_limit"], limits["monthly_cap"]
        # every fetch (discovery, JWKS) through the one outbound client (gate.events.outbound)
        outbound = for_settings(settings)
        self.fetch = fetch or (lambda url: oidc.fetch_json(url, outbound=outbound))
        self.clock, self.monotonic = clock, monotonic
        self.grants = GrantsWatch(settings.grants_file, monotonic)
        self._lock = threading.Lock()
        self._discovery: tuple[str, tuple[str, ...]] | None = None  # (jwks_uri, algorithms)
        self._discovery_tried = float("-inf")
        self._keys = oidc.KeyCache(monotonic)

    def _issuer(self) -> tuple[str, tuple[str, ...]]:
        """The JWKS address and the algorithms of the issuer's discovery document (read once; a
        failed read is tried again at most every JWKS_REFETCH_SECONDS)."""
        with self._lock:
            if self._discovery is None:
                if self.monotonic() - self._discovery_tried <= oidc.JWKS_REFETCH_SECONDS:
                    raise oidc.TokenRefused("the CI issuer's discovery failed moments ago")
                self._discovery_tried = self.monotonic()
                try:
                    document = oidc.read_discovery(self.issuer, self.fetch)
                    self._discovery = (oidc.check_url(document.get("jwks_uri"), "jwks_uri", self.issuer),
                                       oidc.signing_algorithms(document.get("id_token_signing_alg_values_supported")))
                except ValueError as exc:
                    raise oidc.TokenRefused(f"the CI issuer is unusable: {exc}") from None
            return self._discovery

    def _key_set(self, jwks_uri: str, refresh: bool) -> Any:
        with self._lock:
            keys = self._keys.keys
            if keys is None or self._keys.needs_fetch(refresh):
                try:
                    keys = self._keys.store(self.fetch(jwks_uri))
                except ValueError as exc:
                    raise oidc.TokenRefused(f"the CI issuer's JWKS cannot be read: {exc}") from None
            return keys

    def verify(self, token: str) -> dict[str, JsonValue]:
        """The token's claims once `gate.oidc`'s checks hold (TokenRefused otherwise)."""
        if len(token) > oidc.MAX_TOKEN_CHARS:  # SECURITY: before any discovery, fetch or parse
            raise oidc.TokenRefused("the token is too large")
        jwks_uri, algorithms = self._issuer()
        for refresh in (False, True):
            try:
                claims = oidc.decode_signed(token, self._key_set(jwks_uri, refresh), algorithms)
                break
            except oidc.UnknownKey:
                if refresh:
                    raise
        return oidc.check_claims(claims, issuer=self.issuer, audience=self.audience, now=self.clock(),
                                 max_lifetime=oidc.MAX_CI_LIFETIME_SECONDS)

    def principal(self, claims: dict[str, JsonValue]) -> Principal:
        try:
            return Principal.ci(claims.get(self.repository_claim), claims.get(self.ref_claim))  # type: ignore[arg-type]
        except ValueError as exc:
            raise oidc.TokenRefused(f"the token's {self.repository_claim} and {self.ref_claim} claims: {exc}") from None

    def run(self, claims: dict[str, JsonValue]) -> CIRun:
        """The ids a verified token's grants are bound to and whether its event writes."""
        repository_id, owner_id = (ci_id(claims.get(claim)) for claim in self.id_claims)
        if repository_id is None or owner_id is None:
            raise oidc.TokenRefused(f"the token's {' and '.join(self.id_claims)} claims are not ids (digits)")
        event = claims.get(self.event_claim)
        return CIRun(repository_id, owner_id, isinstance(event, str) and event in self.write_events)

    def _audit(self, claims: dict[str, JsonValue], principal: Principal, run: CIRun) -> str:
        """What the log names of an accepted run: the ids, the event, the workflow and the commit."""
        def claim(name: str) -> str:
            value = claims.get(name)
            return value[:300] if isinstance(value, str) and value.isprintable() else "(none)"

        return (f"{principal.id} (repository id {run.repository_id}, owner id {run.owner_id}, event "
                f"{claim(self.event_claim)}{'' if run.writes else ' (viewer at most)'}, workflow "
                f"{claim(self.workflow_claim)}, sha {claim('sha')})")

    def caller(self, token: str, scope_header: str | None) -> Caller:
        """The caller a CI token acts as in the scope it names (AuthFailure otherwise)."""
        try:
            claims = self.verify(token)
            principal, run = self.principal(claims), self.run(claims)
        except oidc.TokenRefused as exc:
            log.warning("a CI token was refused: %s", exc)
            raise AuthFailure(401, INVALID) from None
        grants = self.grants.current()
        audit = self._audit(claims, principal, run)
        scope = self._scope(principal, run, grants, scope_header)
        roles = grants.ci_roles(principal, scope, run)
        if not roles:
            log.warning("%s holds no role in scope %r", audit, scope)
            raise AuthFailure(403, f"{principal.id} holds no role in this scope (the grants file's ci member)")
        log.info("%s acts in scope %r as %s", audit, scope, ", ".join(sorted(roles)))
        return Caller(key_id=principal.id, scope=scope, plan=CI_PLAN, rate_limit=self.rate_limit,
                      monthly_cap=self.monthly_cap, permissions=permissions_of(roles), principal=principal)

    @staticmethod
    def _scope(principal: Principal, run: CIRun, grants: Grants, header: str | None) -> str:
        if header is not None and header.strip():
            scope = header.strip()
            if len(scope) > MAX_SCOPE_CHARS or not scope.isprintable():
                raise AuthFailure(403, f"{SCOPE_HEADER} must name a scope (at most {MAX_SCOPE_CHARS} printable characters)")
            return scope
        named = sorted(grants.ci_scopes(principal, run))
        if len(named) == 1 and named[0] != "*":
            return named[0]
        if not named:
            raise AuthFailure(403, f"{principal.id} holds no role in any scope (the grants file's ci member)")
        raise AuthFailure(403, f"{principal.id} may act in several scopes: name one in {SCOPE_HEADER}")
