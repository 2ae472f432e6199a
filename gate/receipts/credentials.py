"""Credential detection for CRM sync requests.

SECURITY: spec "CRM Sync Record" — the service stores mapped fields and the CRM object
reference, never CRM credentials. A request that carries anything that looks like a
credential is refused as a whole with SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN before any other
check, before hashing and before storing; the error names where the material was found
(`forbidden_fields`) and never echoes the material itself.

What counts as credential material (the rules are deliberately broad: a false positive costs
the caller a renamed field, a false negative stores a secret in an append-only ledger):

1. A member name anywhere in the body (any depth, including `field_mapping` keys) whose
   normalized form is one of `CREDENTIAL_NAMES` or ends with `_` + one of them
   (`api_key`, `crm_api_key`, `X-Api-Key`, `accessToken`, `hubspot_client_secret`, …).
   Normalization: split camelCase, lowercase, every run of other characters becomes `_`.
2. A text value anywhere in the body (including `field_mapping` values, which are field
   names and so never need these shapes) that looks like credential material: an HTTP
   authorization value (`Bearer …`, `Basic …`, `Token …`, `Digest …`, `Negotiate …` followed by
   one token of at least 16 token characters), a JSON Web Token, a PEM private
   key, an AWS access key id, a Google API key, or a well-known secret-key prefix
   (`CREDENTIAL_VALUE_PREFIXES`).
   A value that merely *names* a credential field (`"access_token"`) is a field name, not a
   credential, and is accepted.
3. `crm_record_url` with userinfo (`https://user:pass@host/…`, even a bare user), or with a
   query or fragment parameter whose name matches rule 1 (`?access_token=…`) or is one of
   `URL_CREDENTIAL_PARAMETERS` (presigned-URL signatures, `?key=` API keys).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from gate.strict_json import JsonValue

__all__ = [
    "CREDENTIAL_NAMES",
    "CREDENTIAL_VALUE_PREFIXES",
    "URL_CREDENTIAL_PARAMETERS",
    "credential_paths",
    "is_credential_name",
    "looks_like_credential",
]

CREDENTIAL_NAMES = frozenset({
    "access_token",
    "api_key",
    "apikey",
    "api_secret",
    "auth_token",
    "authorization",
    "bearer_token",
    "client_secret",
    "credential",
    "credentials",
    "hapikey",
    "id_token",
    "passwd",
    "password",
    "private_key",
    "refresh_token",
    "secret",
    "secret_key",
    "session_token",
    "token",
})

# Query/fragment parameter names that carry credentials in URLs only (presigned URLs, API-key
# parameters); as member names elsewhere they are ordinary words.
URL_CREDENTIAL_PARAMETERS = frozenset({"key", "sig", "signature", "x_amz_signature", "x_goog_signature"})

CREDENTIAL_VALUE_PREFIXES = (
    "sk_live_", "sk_test_", "rk_live_", "rk_test_",  # payment provider secret keys
    "xoxb-", "xoxp-", "xoxa-", "xoxr-",  # chat bot / user tokens
    "ghp_", "gho_", "ghu_", "ghs_", "github_pat_",  # code host tokens
    "pat-na1-", "pat-eu1-",  # CRM private app tokens
    "ya29.",  # OAuth access tokens of a large cloud provider
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[^a-z0-9]+")
_AUTH_SCHEME = re.compile(r"^(?:bearer|basic|token|digest|negotiate)\s+[A-Za-z0-9._~+/=-]{16,}$",
                          re.IGNORECASE)
_JWT = re.compile(r"^eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*$")
_AWS_KEY_ID = re.compile(r"^(?:AKIA|ASIA)[A-Z0-9]{16}$")
_GOOGLE_API_KEY = re.compile(r"^AIza[0-9A-Za-z_-]{35}$")
_PEM_PRIVATE = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")


def _normalize(name: str) -> str:
    return _SEPARATORS.sub("_", _CAMEL.sub("_", name).lower()).strip("_")


def is_credential_name(name: str) -> bool:
    """Rule 1: `name` names a credential."""
    normalized = _normalize(name)
    if normalized in CREDENTIAL_NAMES:
        return True
    return any(normalized.endswith("_" + credential) for credential in CREDENTIAL_NAMES)


def looks_like_credential(text: str) -> bool:
    """Rule 2: `text` has the shape of credential material."""
    text = text.strip()
    return bool(
        _AUTH_SCHEME.match(text)
        or _JWT.match(text)
        or _AWS_KEY_ID.match(text)
        or _GOOGLE_API_KEY.match(text)
        or _PEM_PRIVATE.search(text)
        or text.startswith(CREDENTIAL_VALUE_PREFIXES)
    )


def _url_paths(url: str, path: str) -> list[str]:
    """Rule 3 for one URL text."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return []  # not a URL at all: the format check reports it
    found = []
    if "@" in parts.netloc:
        found.append(f"{path}.userinfo")
    for part_name, part in (("query", parts.query), ("fragment", parts.fragment)):
        for name, _ in parse_qsl(part, keep_blank_values=True):
            if is_credential_name(name) or _normalize(name) in URL_CREDENTIAL_PARAMETERS:
                found.append(f"{path}.{part_name}.{name}")
    return found


def credential_paths(body: Mapping[str, JsonValue], url_members: tuple[str, ...] = ("crm_record_url",)) -> list[str]:
    """Every place in `body` that carries credential material, sorted; [] when none.

    Paths are dotted member paths (`field_mapping.api_key`, `executor.token`, `items[2].x`);
    URL findings are `<member>.userinfo`, `<member>.query.<name>`, `<member>.fragment.<name>`.
    """
    found: list[str] = []
    _walk(body, "", found, url_members)
    return sorted(set(found))


def _walk(value: Any, path: str, found: list[str], url_members: tuple[str, ...]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            key_text = str(key)
            item_path = f"{path}.{key_text}" if path else key_text
            if is_credential_name(key_text):
                found.append(item_path)
                continue
            if not path and key_text in url_members and isinstance(item, str):
                found.extend(_url_paths(item, item_path))
            _walk(item, item_path, found, url_members)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, f"{path}[{index}]", found, url_members)
    elif isinstance(value, str) and looks_like_credential(value):
        found.append(path or "$")
