"""The webhook SSRF guard (gate/events/targets.py) by value, each guard alone (issue 52, items 8-9).

Every refusal below is made with a resolver that answers a public address, so the guard under test
is the only reason a URL can be refused: a check that is removed or weakened lets its URL through
and fails here. The IPv6 spellings of internal IPv4 addresses are judged by the IPv4 address they
carry (RFC 4291, 2765/7915, 6052, 8215, 3056, 4380), the layouts pinned bit by bit."""

from __future__ import annotations

import ipaddress

import pytest

from gate.events.targets import MAX_URL_LENGTH, Target, TargetRefused, _resolve, check, embedded_ipv4, public

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"


def answers(*addresses: str):
    """A resolver that answers these addresses for every host, and records what it was asked."""
    asked: list[tuple[str, int]] = []

    def resolve(host: str, port: int) -> list[str]:
        asked.append((host, port))
        return list(addresses)
    resolve.asked = asked
    return resolve


def literal(host: str, port: int) -> list[str]:
    """The host itself: the URL's literal address, as getaddrinfo answers it without DNS."""
    return [host]


def refused(url: object, reason: str, resolve=None, allow=()) -> None:
    with pytest.raises(TargetRefused) as caught:
        check(url, allow, resolve or answers(PUBLIC_V4))
    assert caught.value.code == "EVENT_TARGET_REFUSED"
    assert reason in caught.value.message, caught.value.message


# ---------------------------------------------------------------- a clean URL passes, exactly


def test_a_public_url_is_a_target_at_the_address_checked():
    resolve = answers(PUBLIC_V4, PUBLIC_V6)
    assert check("https://hooks.example.com/in?x=1&y=2", (), resolve) == Target(
        "https", "hooks.example.com", 443, "/in?x=1&y=2", PUBLIC_V4)
    assert resolve.asked == [("hooks.example.com", 443)]
    assert check("http://hooks.example.com", (), resolve) == Target("http", "hooks.example.com", 80, "/", PUBLIC_V4)
    assert check("http://hooks.example.com:8443/a/b", (), answers(PUBLIC_V6)) == Target(
        "http", "hooks.example.com", 8443, "/a/b", PUBLIC_V6)
    assert resolve.asked[-1] == ("hooks.example.com", 80)


def test_a_url_of_the_longest_length_passes_and_one_more_character_does_not():
    base = "https://hooks.example.com/"
    longest = base + "a" * (MAX_URL_LENGTH - len(base))
    assert check(longest, (), answers(PUBLIC_V4)).path == "/" + "a" * (MAX_URL_LENGTH - len(base))
    refused(longest + "a", "at most 2000 characters")


# ---------------------------------------------------------------- each guard alone


@pytest.mark.parametrize("url", [None, 7, b"https://hooks.example.com/", ["https://hooks.example.com/"], ""])
def test_a_url_that_is_not_a_nonempty_string_is_refused(url):
    refused(url, "must be a string")


@pytest.mark.parametrize("url", [
    "https://user:secret@hooks.example.com/in", "https://user@hooks.example.com/in",
    "https://:secret@hooks.example.com/in", "http://a:b@hooks.example.com",
])
def test_credentials_are_refused_even_for_a_public_host(url):
    refused(url, "must not carry credentials")


@pytest.mark.parametrize("url", [
    "ftp://hooks.example.com/in", "file://hooks.example.com/etc/passwd", "gopher://hooks.example.com/",
    "httpx://hooks.example.com/", "//hooks.example.com/in", "hooks.example.com/in",
])
def test_a_scheme_other_than_http_or_https_is_refused_even_for_a_public_host(url):
    refused(url, "must be an http or https URL")


@pytest.mark.parametrize("char", [" ", "\t", "\n", "\r", "\x00", "\x1f", "\x20", "\x7f", "\x85", "\u2028", "\u3000"])
def test_spaces_and_control_characters_are_refused_even_for_a_public_host(char):
    refused(f"https://hooks.example.com/in{char}x", "spaces or control characters")
    refused(f"https://hooks.exa{char}mple.com/in", "spaces or control characters")


def test_the_first_printable_characters_pass():
    assert check("https://hooks.example.com/!~", (), answers(PUBLIC_V4)).path == "/!~"


@pytest.mark.parametrize("url", ["https://hooks.example.com:99999/in", "https://hooks.example.com:x/in",
                                 "https://hooks.example.com:-1/in"])
def test_an_invalid_port_is_refused(url):
    refused(url, "invalid port")


@pytest.mark.parametrize("url", ["https:///in", "http://:80/in", "https://?x"])
def test_a_url_without_a_host_is_refused(url):
    refused(url, "must name a host")


def test_a_host_that_does_not_resolve_is_refused():
    def fails(error: Exception):
        def resolve(host: str, port: int) -> list[str]:
            raise error
        return resolve
    refused("https://hooks.example.com/in", "does not resolve", fails(OSError("no such host")))
    refused("https://hooks.example.com/in", "does not resolve", fails(UnicodeError("label too long")))
    refused("https://hooks.example.com/in", "does not resolve", answers())


def test_one_address_inside_among_public_ones_refuses_the_host_and_is_named():
    refused("https://hooks.example.com/in", "(10.0.0.5)", answers(PUBLIC_V4, "10.0.0.5", PUBLIC_V6))
    refused("https://hooks.example.com/in", "(fe80::1%eth0)", answers("fe80::1%eth0"))
    refused("https://hooks.example.com/in", "(::127.0.0.1%eth0)", answers("::127.0.0.1%eth0"))  # a zone hides nothing
    assert check("https://hooks.example.com/in", (), answers("2606:4700::1111%eth0")).address == "2606:4700::1111%eth0"


def test_an_allowed_host_is_taken_as_it_resolves_and_only_by_its_exact_name():
    assert check("http://receiver.internal:8080/h", {"receiver.internal"}, answers("10.1.2.3")) == Target(
        "http", "receiver.internal", 8080, "/h", "10.1.2.3")
    refused("http://receiver.internal:8080/h", "(10.1.2.3)", answers("10.1.2.3"), allow={"receiver"})
    refused("http://receiver.internal:8080/h", "(10.1.2.3)", answers("10.1.2.3"), allow={"127.0.0.1"})
    # the other guards hold for an allowed host too
    refused("ftp://receiver.internal/h", "http or https", answers("10.1.2.3"), allow={"receiver.internal"})
    refused("http://u:p@receiver.internal/h", "credentials", answers("10.1.2.3"), allow={"receiver.internal"})


def test_the_real_resolver_answers_each_address_once_for_a_stream():
    assert _resolve("127.0.0.1", 8490) == ["127.0.0.1"]
    assert _resolve("::127.0.0.1", 80) == ["::127.0.0.1"]
    assert check("http://[::127.0.0.1]:8490/h", {"::127.0.0.1"}) == Target("http", "::127.0.0.1", 8490, "/h",
                                                                           "::127.0.0.1")


# ---------------------------------------------------------------- which addresses are inside


@pytest.mark.parametrize("address", [
    "10.0.0.5", "172.16.0.1", "192.168.1.10", "127.0.0.1", "169.254.169.254", "0.0.0.0", "100.64.0.1",
    "224.0.0.1", "255.255.255.255", "240.0.0.1", "::1", "::", "fe80::1", "fc00::1", "ff02::1", "2001:db8::1",
])
def test_private_loopback_link_local_multicast_and_reserved_addresses_are_inside(address):
    assert public(address) is False
    refused("https://hooks.example.com/in", f"({address})", answers(address))


@pytest.mark.parametrize("address", [PUBLIC_V4, "8.8.8.8", "1.1.1.1", PUBLIC_V6, "2606:4700::1111",
                                     "2a00:1450:4001:80b::200e"])
def test_global_unicast_addresses_are_public(address):
    assert public(address) is True


# The spellings issue 52 item 8 found accepted, and the IPv4 address each carries.
ISSUE_SPELLINGS = {
    "::127.0.0.1": "127.0.0.1", "64:ff9b::7f00:1": "127.0.0.1", "2002:7f00:1::": "127.0.0.1",
    "::ffff:0:7f00:1": "127.0.0.1", "64:ff9b:1::7f00:1": "127.0.0.1",
    "64:ff9b::a9fe:a9fe": "169.254.169.254", "2002:a9fe:a9fe::": "169.254.169.254",
    "::a9fe:a9fe": "169.254.169.254", "::ffff:0:a9fe:a9fe": "169.254.169.254", "64:ff9b::a00:1": "10.0.0.1",
}


@pytest.mark.parametrize("address", sorted(ISSUE_SPELLINGS))
def test_the_issue_spellings_carry_an_internal_ipv4_address_and_are_refused(address):
    assert ipaddress.IPv4Address(ISSUE_SPELLINGS[address]) in embedded_ipv4(ipaddress.IPv6Address(address))
    assert public(address) is False
    refused(f"http://[{address}]:8490/", "resolves to a private, loopback", literal)


# One test per embedding: the internal spelling is refused, the same form of a public IPv4 passes
# (so the refusal is the IPv4 inside, not the form), and the decoding is exact.
@pytest.mark.parametrize("form, inside, outside, carried", [
    # IPv4-compatible ::/96 (RFC 4291 2.5.5.1)
    ("compatible", "::c0a8:10a", "::808:808", ["8.8.8.8"]),
    # IPv4-mapped ::ffff:0:0/96 (RFC 4291 2.5.5.2): judged as the IPv4 address alone
    ("mapped", "::ffff:10.0.0.5", "::ffff:8.8.8.8", ["8.8.8.8"]),
    # SIIT's IPv4-translated ::ffff:0:0:0/96 (RFC 2765 2.1, RFC 7915)
    ("siit", "::ffff:0:ac10:1", "::ffff:0:808:808", ["8.8.8.8"]),
    # NAT64's well-known prefix 64:ff9b::/96 (RFC 6052 2.1)
    ("nat64", "64:ff9b::c0a8:101", "64:ff9b::808:808", ["8.8.8.8"]),
    # 6to4 2002::/16 (RFC 3056 2): bits 16-47
    ("6to4", "2002:a00:5:1::1", "2002:808:808:1::1", ["8.8.8.8"]),
])
def test_each_embedding_is_judged_by_the_ipv4_address_inside(form, inside, outside, carried):
    assert public(inside) is False, form
    refused(f"https://[{inside}]/in", "resolves to a private, loopback", literal)
    assert public(outside) is True, form
    assert [str(v4) for v4 in embedded_ipv4(ipaddress.IPv6Address(outside))] == carried
    assert check(f"https://[{outside}]/in", (), literal).address == outside


def test_the_embeddings_decode_exactly():
    def carried(address: str) -> list[str]:
        return [str(v4) for v4 in embedded_ipv4(ipaddress.IPv6Address(address))]
    assert carried("::1.2.3.4") == ["1.2.3.4"]
    assert carried("::ffff:1.2.3.4") == ["1.2.3.4"]
    assert carried("::ffff:0:102:304") == ["1.2.3.4"]
    assert carried("64:ff9b::102:304") == ["1.2.3.4"]
    assert carried("2002:102:304:aaaa:bbbb:cccc:dddd:eeee") == ["1.2.3.4"]
    # Teredo 2001::/32 (RFC 4380 4): the server at bits 32-63, the client inverted in the last 32
    assert carried("2001:0:4136:e378:8000:63bf:3fff:fdd2") == ["65.54.227.120", "192.0.2.45"]
    assert carried("2001:0:a00:1:ffff:ffff:80ff:fffe") == ["10.0.0.1", "127.0.0.1"]
    assert carried("2001:0:c000:201::3fff:fdd2") == ["192.0.2.1", "192.0.2.45"]  # every bit of the server
    assert carried("2002:c000:201::") == ["192.0.2.1"]
    # no embedding: nothing carried
    for plain in ("2606:4700::1111", "64:ff9b:0:1::102:304", "64:ff9b:2::102:304", "2003::1", "2001:1::1",
                  "::1:0:102:304", "0:0:0:1::102:304", "::fffe:0:102:304"):
        assert carried(plain) == [], plain


def test_teredo_is_refused_for_an_internal_server_or_client_and_as_special_purpose_space():
    assert public("2001:0:a00:1:ffff:ffff:f7f7:f7f7") is False  # server 10.0.0.1, client 8.8.8.8
    assert public("2001:0:808:808:ffff:ffff:80ff:fffe") is False  # server 8.8.8.8, client 127.0.0.1
    assert public("2001:0:808:808:ffff:ffff:f7f7:f7f7") is False  # 2001::/32 is not global unicast


# The local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) may be split into any RFC 6052 prefix that
# fits (/48, /56, /64, /96), the u octet (bits 64-71) skipped: each layout read alone finds the
# internal address below while the other three read 8.8.8.8, and all four read public passes.
@pytest.mark.parametrize("address, readings", [
    ("64:ff9b:1:7f08:8:808:808:808", ["127.8.8.8", "8.8.8.8", "8.8.8.8", "8.8.8.8"]),  # /48: 48-63, 72-87
    ("64:ff9b:1:80a:8:808:808:808", ["8.10.8.8", "10.8.8.8", "8.8.8.8", "8.8.8.8"]),  # /56: 56-63, 72-95 (10.x)
    ("64:ff9b:1:808:a:808:808:808", ["8.8.10.8", "8.10.8.8", "10.8.8.8", "8.8.8.8"]),  # /64: 72-103
    ("64:ff9b:1:808:8:808:a9fe:a9fe", ["8.8.8.8", "8.8.8.8", "8.8.8.169", "169.254.169.254"]),  # /96: 96-127
])
def test_the_local_use_nat64_prefix_is_read_in_every_layout(address, readings):
    assert [str(v4) for v4 in embedded_ipv4(ipaddress.IPv6Address(address))] == readings
    assert public(address) is False


def test_the_local_use_nat64_prefix_passes_when_every_layout_reads_a_public_address():
    address = "64:ff9b:1:808:8:808:808:808"
    assert [str(v4) for v4 in embedded_ipv4(ipaddress.IPv6Address(address))] == ["8.8.8.8"] * 4
    assert public(address) is True
    # the u octet is never part of the address
    assert [str(v4) for v4 in embedded_ipv4(ipaddress.IPv6Address("64:ff9b:1:808:ff08:808:808:808"))] == \
        ["8.8.8.8"] * 4
