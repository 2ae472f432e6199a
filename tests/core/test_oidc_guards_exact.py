"""gate/oidc.py, each guard alone at its boundary (issue 63 item 8): the token-size limit (a token
of exactly the limit is read, one character more is refused by the size check, not by a later
signature failure), malformed tokens by their own message, the leeway either side, the JWKS
refetch interval on an injected clock, and the documents' fetch through a recording client."""

from __future__ import annotations

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from gate import oidc
from gate.events.outbound import Answer

NOW = 1_795_700_000
ISSUER, AUDIENCE = "https://ci.example", "https://gate.example"
KEY = RSAKey.generate_key(2048, parameters={"kid": "k1"})
KEYS = KeySet([KEY])


def _token(pad: int = 0, header: dict | None = None, **claims) -> str:
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "s", "iat": NOW, "exp": NOW + 300, **claims}
    if pad:
        body["pad"] = "p" * pad
    return jwt.encode({"alg": "RS256", "kid": "k1", **(header or {})}, body, KEY)


def _claims(now: float = NOW, **claims) -> dict:
    return oidc.check_claims(oidc.decode_signed(_token(**claims), KEYS, ("RS256",)), issuer=ISSUER,
                             audience=AUDIENCE, now=now)


def test_the_limits_are_as_documented():
    assert (oidc.MAX_TOKEN_CHARS, oidc.MAX_DOCUMENT_BYTES, oidc.LEEWAY_SECONDS, oidc.JWKS_REFETCH_SECONDS,
            oidc.FETCH_TIMEOUT, oidc.MAX_REDIRECTS) == (16_384, 1_048_576, 60, 30.0, 15.0, 3)


def test_a_token_of_exactly_the_size_limit_is_read_and_one_character_more_is_refused_unread():
    # a header member of one letter brings the length onto a multiple of four (base64url steps)
    token = next(t for t in (_token(pad, {"typ": "J"}) for pad in range(11_800, 12_000))
                 if len(t) == oidc.MAX_TOKEN_CHARS)
    assert oidc.decode_signed(token, KEYS, ("RS256",))["sub"] == "s"
    for longer in (token + "A", "a.b." + "c" * (oidc.MAX_TOKEN_CHARS - 3)):
        assert len(longer) == oidc.MAX_TOKEN_CHARS + 1
        with pytest.raises(oidc.TokenRefused) as refused:
            oidc.decode_signed(longer, KEYS, ("RS256",))
        assert str(refused.value) == "the token is not a string of at most 16384 characters"
    with pytest.raises(oidc.TokenRefused, match="not a string"):
        oidc.decode_signed(7, KEYS, ("RS256",))  # type: ignore[arg-type]


@pytest.mark.parametrize(("token", "message"), [
    ("a.b", "not a signed JWT"), ("a.b.c.d", "not a signed JWT"), ("abc", "not a signed JWT"),
    ("..", "signature does not hold"), ("e30.e30.", "signature does not hold"),
    ("!!.e30.c2ln", "signature does not hold"),
])
def test_a_malformed_token_is_refused_by_its_own_check(token, message):
    with pytest.raises(oidc.TokenRefused, match=message) as refused:
        oidc.decode_signed(token, KEYS, ("RS256",))
    assert not isinstance(refused.value, oidc.UnknownKey)


def test_a_part_joserfc_does_not_wrap_is_refused_as_unreadable(monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("kid")

    monkeypatch.setattr(oidc.jwt, "decode", broken)
    with pytest.raises(oidc.TokenRefused, match="cannot be read: KeyError"):
        oidc.decode_signed("a.b.c", KEYS, ("RS256",))


def test_the_leeway_is_sixty_seconds_each_way():
    assert _claims(now=NOW + 300 + 59)["sub"] == "s"  # exp passed 59 s ago
    with pytest.raises(oidc.TokenRefused, match="exp"):
        _claims(now=NOW + 300 + 61)
    assert _claims(iat=NOW + 60)["sub"] == "s"  # issued a minute ahead of this clock
    with pytest.raises(oidc.TokenRefused, match="future"):
        _claims(iat=NOW + 61)
    assert _claims(nbf=NOW + 60)["sub"] == "s"
    with pytest.raises(oidc.TokenRefused, match="not yet valid"):
        _claims(nbf=NOW + 61)
    assert _claims(now=NOW + 0.9)["sub"] == "s"  # the clock read as whole seconds
    with pytest.raises(oidc.TokenRefused, match="sub"):
        _claims(sub=5)


def test_the_key_set_is_fetched_again_only_after_the_interval():
    now = [1000.0]
    cache = oidc.KeyCache(lambda: now[0])
    assert cache.keys is None and cache.needs_fetch(refresh=False) and cache.needs_fetch(refresh=True)
    assert cache.store(KEYS.as_dict()) is cache.keys
    now[0] += oidc.JWKS_REFETCH_SECONDS
    assert not cache.needs_fetch(refresh=True)  # exactly the interval: not yet
    now[0] += 0.001
    assert cache.needs_fetch(refresh=True) and not cache.needs_fetch(refresh=False)
    cache.store(KEYS.as_dict())  # the interval counts from the last fetch
    assert not cache.needs_fetch(refresh=True)
    for document in ({"keys": "x"}, {"nokeys": []}, []):
        with pytest.raises(oidc.TokenRefused, match="unusable"):
            cache.store(document)  # type: ignore[arg-type]
    assert oidc.KeyCache().clock is not None


class Recording:
    def __init__(self, answer: Answer):
        self.answer, self.calls = answer, []

    def request(self, method, url, body=None, headers=None, **options):
        each = options.pop("each_url")
        self.calls.append((method, url, body, headers, options))
        each(url)
        return self.answer


def test_documents_are_fetched_through_the_client_with_their_limits():
    client = Recording(Answer(200, {}, b'{"issuer": "https://ci.example/"}'))
    assert oidc.read_discovery(ISSUER + "/", lambda url: oidc.fetch_json(url, outbound=client)) == {
        "issuer": ISSUER + "/"}
    (method, url, body, headers, options), = client.calls
    assert (method, url, body, headers) == ("GET", ISSUER + "/.well-known/openid-configuration", None,
                                            {"Accept": "application/json"})
    assert options == {"redirects": 3, "timeout": 15.0, "max_bytes": oidc.MAX_DOCUMENT_BYTES}
    oidc.fetch_json(ISSUER + "/j", 2.5, outbound=client)
    assert client.calls[-1][4]["timeout"] == 2.5
    for status in (201, 204, 301, 500):
        with pytest.raises(ValueError, match=f"answers {status}"):
            oidc.fetch_json(ISSUER + "/j", outbound=Recording(Answer(status, {}, b"{}")))
    with pytest.raises(ValueError, match="must be https"):
        oidc.fetch_json("http://ci.example/j", outbound=client)
    assert oidc.fetch_json("http://localhost:9/j", outbound=Recording(Answer(200, {}, b"{}"))) == {}


def test_loopback_and_endpoint_rules():
    assert all(oidc.is_loopback(a) for a in ("localhost", "127.0.0.1", "127.9.9.9", "[::1]", "::1"))
    assert not any(oidc.is_loopback(a) for a in ("", "example.org", "10.0.0.1", "[::2]", "localhost.evil"))
    for url in (None, "", 5):
        with pytest.raises(ValueError, match="has no jwks_uri"):
            oidc.check_url(url, "jwks_uri", ISSUER)
    assert oidc.check_url("https://x.example/k", "jwks_uri", ISSUER) == "https://x.example/k"
    assert oidc.check_url("http://[::1]:8/k", "jwks_uri", ISSUER) == "http://[::1]:8/k"
    for url in ("ftp://x.example/k", "http://x.example/k", "https:x", "HTTPS://x.example/k"):
        if url.startswith(("https:", "HTTPS:")):
            continue
        with pytest.raises(ValueError, match="must be https"):
            oidc.check_url(url, "jwks_uri", ISSUER)
    assert oidc.signing_algorithms([]) == ("RS256",) and oidc.signing_algorithms("RS512") == ("RS256",)
    assert oidc.signing_algorithms(list(reversed(oidc.ALGORITHMS))) == oidc.ALGORITHMS
    with pytest.raises(ValueError, match="must be identical"):
        oidc.check_issuer({}, ISSUER)
    oidc.check_issuer({"issuer": ISSUER}, ISSUER)


def test_iat_is_required_and_the_refusals_name_the_address():
    body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "s", "exp": NOW + 300}
    with pytest.raises(oidc.TokenRefused, match="iat"):
        oidc.check_claims(oidc.decode_signed(jwt.encode({"alg": "RS256", "kid": "k1"}, body, KEY), KEYS, ("RS256",)),
                          issuer=ISSUER, audience=AUDIENCE, now=NOW)
    client = Recording(Answer(200, {}, b"{}"))
    with pytest.raises(ValueError, match=r"of http://ci\.example/j must be https"):
        oidc.fetch_json("http://ci.example/j", outbound=client)
    with pytest.raises(ValueError, match=r"of http://ci\.example must be https"):
        oidc.read_discovery("http://ci.example", lambda url: {})
    seen = []
    oidc.read_discovery("https://ci.example/X/", lambda url: seen.append(url) or {"issuer": "https://ci.example/X/"})
    assert seen == ["https://ci.example/X/.well-known/openid-configuration"]


def test_the_caller_s_claims_are_checked_too():
    token = oidc.decode_signed(_token(nonce="n1"), KEYS, ("RS256",))
    assert oidc.check_claims(token, issuer=ISSUER, audience=AUDIENCE, now=NOW,
                             nonce={"essential": True, "value": "n1"})["nonce"] == "n1"
    with pytest.raises(oidc.TokenRefused, match="nonce"):
        oidc.check_claims(token, issuer=ISSUER, audience=AUDIENCE, now=NOW, nonce={"essential": True, "value": "n2"})
