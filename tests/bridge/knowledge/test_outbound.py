"""The outbound URL guard: every literal spelling of an inward target is refused, for its reason."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.knowledge.errors import KnowledgeBridgeError, OutboundRejected
from bridge.knowledge.outbound import ALLOWED_URL_SCHEMES, check_outbound_url

LOOPBACK = "reaches 127.0.0.1, the loopback network"
NOT_CANONICAL = "non-canonical form"
AMBIGUOUS = "looks numeric"
OUT_OF_RANGE = "part out of range"
CHARSET = "holds characters other than"
BAD_CHARACTER = "whitespace or invisible character"

# (url, a fragment of the reason that proves which rule refused it, the attack it stands for)
REFUSED: list[tuple[str, str, str]] = [
    # AS-NET-1: only TLS targets.
    ("http://example.com/", "scheme 'http' is not permitted", "plain-HTTP fetch"),
    ("HTTP://EXAMPLE.COM/", "scheme 'http' is not permitted", "upper-case plain HTTP"),
    ("file:///etc/passwd", "scheme 'file'", "local file read"),
    ("gopher://127.0.0.1:16379/_FLUSHALL", "scheme 'gopher'", "gopher smuggling into Redis"),
    ("ftp://example.com/", "scheme 'ftp'", "FTP fetch"),
    ("dict://127.0.0.1:11211/", "scheme 'dict'", "dict protocol against memcached"),
    ("javascript:alert(1)", "scheme 'javascript'", "script URL"),
    ("data:text/html,hi", "scheme 'data'", "inline data"),
    ("//127.0.0.1/", "scheme ''", "scheme-relative URL"),
    ("127.0.0.1", "scheme ''", "bare host"),
    # No host: nothing to check.
    ("https:///path", "names no host", "empty authority"),
    ("https:127.0.0.1", "names no host", "special-scheme shorthand a browser reads as a host"),
    ("https://:443/", "names no host", "port without host"),
    # Names that reach this machine without DNS.
    ("https://localhost/", "names the local host", "localhost"),
    ("https://LOCALHOST/", "names the local host", "upper-case localhost"),
    ("HTTPS://localhost:8080/admin", "names the local host", "upper-case scheme, local port"),
    ("https://localhost./", "names the local host", "root-dotted localhost"),
    ("https://localhost.localdomain/", "names the local host", "/etc/hosts alias"),
    ("https://localhost6.localdomain6/", "names the local host", "IPv6 /etc/hosts alias"),
    ("https://ip6-localhost/", "names the local host", "Debian IPv6 alias"),
    ("https://ip6-loopback/", "names the local host", "Debian IPv6 alias"),
    ("https://admin.localhost/", "special-use domain 'localhost'", "RFC 6761 subdomain"),
    ("https://admin.localhost./", "special-use domain 'localhost'", "dotted RFC 6761 subdomain"),
    ("https://printer.local/", "special-use domain 'local'", "mDNS name on the local link"),
    ("https://metadata.google.internal/", "special-use domain 'internal'", "GCP metadata"),
    ("https://router.home.arpa/", "special-use domain 'home.arpa'", "residential network"),
    ("https://ｌｏｃａｌｈｏｓｔ/", "names the local host", "fullwidth localhost"),
    ("https://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/", "names the local host", "circled-letter localhost"),
    ("https://intranet/", "single label", "search-domain completion"),
    ("https://metadata/", "single label", "search-domain completion to metadata"),
    # IPv4 loopback, in every spelling inet_aton accepts.
    ("https://127.0.0.1/", LOOPBACK, "dotted quad"),
    ("https://127.0.0.1:443/", LOOPBACK, "dotted quad with port"),
    ("https://127.0.0.1./", LOOPBACK, "root-dotted address"),
    ("https://127.255.255.254/", "the loopback network", "elsewhere in 127/8"),
    ("https://2130706433/", LOOPBACK, "decimal integer"),
    ("https://0177.0.0.1/", LOOPBACK, "octal first part"),
    ("https://0x7f.1/", LOOPBACK, "hex short form"),
    ("https://127.1/", LOOPBACK, "two-part short form"),
    ("https://127.0.1/", LOOPBACK, "three-part short form"),
    ("https://0x7f000001/", LOOPBACK, "hex integer"),
    ("https://0X7F000001/", LOOPBACK, "upper-case hex integer"),
    ("https://017700000001/", LOOPBACK, "octal integer"),
    ("https://0x7f.0.0.01/", LOOPBACK, "mixed hex and octal"),
    ("https://0x7f.0x0.0x0.0x1/", LOOPBACK, "hex in every part"),
    # Numeric-looking hosts no resolver agrees on.
    ("https://1.2.3.4.5/", AMBIGUOUS, "five parts"),
    ("https://09.1.1.1/", AMBIGUOUS, "invalid octal digit"),
    ("https://example.1/", AMBIGUOUS, "name ending in a number"),
    ("https://0xg.1.1.1/", AMBIGUOUS, "invalid hex digit"),
    ("https://256.1.1.1/", OUT_OF_RANGE, "byte over 255"),
    ("https://1.2.3.256/", OUT_OF_RANGE, "last byte over 255"),
    ("https://4294967296/", OUT_OF_RANGE, "integer over 32 bits"),
    ("https://0x/", "reaches 0.0.0.0", "empty hex reads as zero"),
    ("https://010.0.0.1/", NOT_CANONICAL, "8.0.0.1 to inet_aton, 10.0.0.1 to a decimal parser"),
    ("https://0x8.8.8.8/", NOT_CANONICAL, "public address in hex"),
    ("https://134744072/", NOT_CANONICAL, "public address as an integer"),
    # Internal IPv4 ranges.
    ("https://0.0.0.0/", "this network", "0.0.0.0 connects to the local host"),
    ("https://10.0.0.1/", "private network", "RFC 1918 10/8"),
    ("https://172.16.0.1/", "private network", "RFC 1918 172.16/12"),
    ("https://172.31.255.255/", "private network", "top of 172.16/12"),
    ("https://192.168.1.1/", "private network", "RFC 1918 192.168/16"),
    ("https://169.254.169.254/latest/meta-data/", "link-local", "cloud metadata service"),
    ("https://100.100.100.200/", "carrier-grade NAT", "Alibaba metadata in 100.64/10"),
    ("https://100.64.0.1/", "carrier-grade NAT", "CGNAT"),
    ("https://192.0.0.192/", "IETF protocol assignments", "192.0.0/24"),
    ("https://192.0.2.1/", "TEST-NET-1", "documentation"),
    ("https://198.51.100.7/", "TEST-NET-2", "documentation"),
    ("https://203.0.113.9/", "TEST-NET-3", "documentation"),
    ("https://198.18.0.1/", "benchmarking", "RFC 2544"),
    ("https://192.88.99.1/", "6to4 relay", "deprecated anycast"),
    ("https://224.0.0.1/", "multicast", "all-hosts multicast"),
    ("https://255.255.255.255/", "limited broadcast", "broadcast"),
    ("https://240.0.0.1/", "class E", "reserved 240/4"),
    # The same addresses in Unicode digits and dots, which IDNA maps to ASCII.
    ("https://１２７.０.０.１/", LOOPBACK, "fullwidth digits"),
    ("https://127。0。0。1/", LOOPBACK, "ideographic full stops U+3002"),
    ("https://127．0．0．1/", LOOPBACK, "fullwidth full stops U+FF0E"),
    ("https://127｡0｡0｡1/", LOOPBACK, "halfwidth ideographic full stops U+FF61"),
    ("https://１２７。０。０。１/", LOOPBACK, "fullwidth digits and ideographic dots"),
    ("https://𝟏𝟐𝟕.𝟎.𝟎.𝟏/", LOOPBACK, "mathematical bold digits"),
    ("https://\U0001fbf1\U0001fbf2\U0001fbf7.0.0.1/", LOOPBACK, "segmented digits (Unicode 13)"),
    ("https://127\u20240\u20240\u20241/", LOOPBACK, "one-dot leaders U+2024"),
    ("https://０ｘ７ｆ.１/", LOOPBACK, "fullwidth hex short form"),
    ("https://１６９.２５４.１６９.２５４/", "link-local", "fullwidth metadata address"),
    ("https://⑽.0.0.1/", CHARSET, "parenthesised ten maps to '(10)'"),
    ("https://⒈27.0.0.1/", AMBIGUOUS, "digit-full-stop adds a dot"),
    # IPv6: loopback, local scopes, and every form that embeds an IPv4 address.
    ("https://[::1]/", "the loopback address", "IPv6 loopback"),
    ("https://[0:0:0:0:0:0:0:1]/", "the loopback address", "uncompressed loopback"),
    ("https://[::]/", "unspecified address", "unspecified"),
    ("https://[fe80::1]/", "link-local", "link-local"),
    ("https://[fe80::1%25eth0]/", "zone id", "link-local with a zone id"),
    ("https://[fc00::1]/", "unique-local", "ULA"),
    ("https://[fd00:ec2::254]/", "unique-local", "AWS IPv6 metadata"),
    ("https://[fec0::1]/", "site-local", "deprecated site-local"),
    ("https://[ff02::1]/", "multicast", "all-nodes multicast"),
    ("https://[::ffff:127.0.0.1]/", LOOPBACK, "IPv4-mapped loopback"),
    ("https://[::ffff:7f00:1]/", LOOPBACK, "IPv4-mapped loopback in hex"),
    ("https://[::ffff:169.254.169.254]/", "link-local", "IPv4-mapped metadata"),
    ("https://[::127.0.0.1]/", "IPv4-compatible", "IPv4-compatible loopback"),
    ("https://[::ffff:0:7f00:1]/", "reserved", "IPv4-translated loopback"),
    ("https://[64:ff9b::7f00:1]/", LOOPBACK, "NAT64 embedding loopback"),
    ("https://[64:ff9b::10.0.0.1]/", "reaches 10.0.0.1", "NAT64 embedding a private address"),
    ("https://[64:ff9b:1::a00:1]/", "local-use NAT64", "local-use NAT64 prefix"),
    ("https://[2002:7f00:1::]/", LOOPBACK, "6to4 embedding loopback"),
    ("https://[2002:c0a8:101::1]/", "reaches 192.168.1.1", "6to4 embedding a private address"),
    ("https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "Teredo", "Teredo tunnel"),
    ("https://[2001:db8::1]/", "documentation", "IPv6 documentation"),
    ("https://[100::1]/", "discard-only", "discard prefix"),
    ("https://[4000::1]/", "outside global unicast", "unallocated space"),
    ("https://[v1.fe80::1]/", "is not an IPv6 address", "IPvFuture literal"),
    ("https://[::1]x/", "is not host[:digits]", "junk after the bracket urlsplit ignores"),
    ("https://[127.0.0.1]/", "cannot be parsed", "IPv4 in brackets"),
    ("https://[::1/", "cannot be parsed", "unclosed bracket"),
    ("https://[::ｆｆｆｆ:127.0.0.1]/", "cannot be parsed", "fullwidth hex in brackets"),
    # Parser differentials: where two clients would disagree about the host.
    ("https://public.example@127.0.0.1/", "userinfo", "userinfo naming a public host"),
    ("https://127.0.0.1@public.example/", "userinfo", "userinfo naming loopback"),
    ("https://user:pass@public.example/", "userinfo", "credentials in the URL"),
    ("https://a@b@127.0.0.1/", "userinfo", "two at-signs"),
    ("https://public.example:80@127.0.0.1/", "userinfo", "port-shaped userinfo"),
    ("https://127.0.0.1\\@public.example/", "backslash", "backslash read as '/' by browsers"),
    ("https:\\\\127.0.0.1\\", "backslash", "backslash authority"),
    ("https://%31%32%37.0.0.1/", CHARSET, "percent-encoded loopback"),
    ("https://%6c%6f%63%61%6c%68%6f%73%74/", CHARSET, "percent-encoded localhost"),
    ("https://127.0.0.1%00.public.example/", CHARSET, "encoded NUL truncation"),
    ("https://ｅｘａｍｐｌｅ％２ｅｃｏｍ/", CHARSET, "fullwidth percent"),
    ("https://127.0.0.1;.public.example/", CHARSET, "semicolon a resolver may stop at"),
    ("https://example.com:99999/", "not a port number", "port out of range"),
    ("https://example.com:0000000443/", "not a port number", "over-long port"),
    ("https://example.com:+443/", "is not host[:digits]", "signed port"),
    ("https://example.com:８０/", "is not host[:digits]", "fullwidth port"),
    ("https://example.com:443:443/", "is not host[:digits]", "two ports"),
    ("https://xn--localhost-.com/", "not a valid internationalised name", "dishonest punycode"),
    ("https://a..example.com/", "not a valid internationalised name", "empty label"),
    ("https://" + "a" * 64 + ".com/", "not a valid internationalised name", "label over 63"),
    ("https://exa\u0378mple.com/", "unassigned code point", "code point newer than this Python"),
    ("https://ex\u202eample.com/", BAD_CHARACTER, "bidi override"),
    ("https://exa\u200bmple.com/", BAD_CHARACTER, "zero-width space"),
    (" https://example.com/", BAD_CHARACTER, "leading space urlsplit strips"),
    ("https://example.com/ ", BAD_CHARACTER, "trailing space"),
    ("https://127.0.0.1\t.public.example/", BAD_CHARACTER, "tab urlsplit deletes"),
    ("https://127.0.0.1\n/", BAD_CHARACTER, "newline urlsplit deletes"),
    ("\x00https://127.0.0.1/", BAD_CHARACTER, "leading NUL urlsplit strips"),
    ("https://example.com\u3000/", BAD_CHARACTER, "ideographic space"),
    ("https://example.com/\u2028", BAD_CHARACTER, "line separator"),
]

ACCEPTED: list[tuple[str, str]] = [
    ("https://example.com/", "plain public name"),
    ("https://EXAMPLE.com/Path?q=1#frag", "case and components are returned untouched"),
    ("HTTPS://example.com/", "upper-case scheme is still https"),
    ("https://example.com:8443/api", "explicit port"),
    ("https://example.com:/", "empty port means the default"),
    ("https://example.com./", "root-dotted public name"),
    ("https://sub_domain.example.com/", "underscore in a label"),
    ("https://8.8.8.8/", "public dotted quad"),
    ("https://93.184.215.14:443/", "public address with port"),
    ("https://[2606:4700:4700::1111]/", "public IPv6"),
    ("https://[::ffff:8.8.8.8]/", "IPv4-mapped public address"),
    ("https://[64:ff9b::808:808]/", "NAT64 of a public address"),
    ("https://[2002:808:808::1]/", "6to4 of a public address"),
    ("https://bücher.example/", "internationalised name"),
    ("https://xn--bcher-kva.example/", "punycode name"),
    ("https://ｅｘａｍｐｌｅ.com/", "fullwidth letters normalise to a public name"),
    ("https://example.com/@127.0.0.1", "an at-sign in the path is not userinfo"),
    ("https://example.com/go?to=http://127.0.0.1/", "the query is the target's business"),
    ("https://example.com/%2e%2e/%00", "percent-encoding outside the host"),
    ("https://1.2.3.example.com/", "numeric labels in a name that ends in a word"),
    # The boundary, stated by test: a DNS name is checked where it is resolved, not here.
    ("https://127.0.0.1.nip.io/", "a DNS name, whatever it resolves to"),
]


@pytest.mark.parametrize(
    ("url", "reason"),
    [pytest.param(url, reason, id=attack) for url, reason, attack in REFUSED],
)
def test_refused(url: str, reason: str) -> None:
    with pytest.raises(OutboundRejected) as caught:
        check_outbound_url(url)
    assert reason in str(caught.value)


@pytest.mark.parametrize("url", [pytest.param(url, id=why) for url, why in ACCEPTED])
def test_accepted_returns_the_original_string(url: str) -> None:
    assert check_outbound_url(url) is url


def test_enough_distinct_cases() -> None:
    refused = {url for url, _, _ in REFUSED}
    accepted = {url for url, _ in ACCEPTED}
    assert len(refused) == len(REFUSED) >= 60
    assert len(accepted) == len(ACCEPTED) >= 10
    assert not refused & accepted


def test_only_https_is_allowed() -> None:
    assert frozenset({"https"}) == ALLOWED_URL_SCHEMES


def test_refusal_is_in_the_bridge_hierarchy() -> None:
    with pytest.raises(KnowledgeBridgeError):
        check_outbound_url("https://127.0.0.1/")


def test_reason_quoting_is_bounded() -> None:
    # A reason may reach a log or a prompt; a megabyte URL must not come along with it.
    with pytest.raises(OutboundRejected) as caught:
        check_outbound_url("gopher://" + "x" * 1_000_000)
    assert len(str(caught.value)) < 400


def _outcome(url: str) -> str | None:
    """The URL back, or None if refused; any other exception fails the calling test."""
    try:
        return check_outbound_url(url)
    except OutboundRejected:
        return None


_HOST_ALPHABET = st.sampled_from(
    [
        *"0123456789abcdefx.:[]%@\\/?#-_ ",
        *("１", "２", "７", "０", "。", "．", "｡", "％", "＠", "：", "\u2024", "\t", "\x00", "ü"),
        *("\U0001fbf1", "\u0378", "\u202e", "\ud800", "[::1]", "localhost", "0x", "%25"),
    ]
)

_URLISH = st.builds(
    "".join,
    st.tuples(
        st.sampled_from(["https://", "HTTPS://", "http://", "https:", "https:///", "", "//"]),
        st.sampled_from(["", "user@", "a:b@", "x@y@"]),
        st.lists(_HOST_ALPHABET, max_size=24).map("".join),
        st.sampled_from(["", ":", ":443", ":99999", ":+1", ":８０"]),
        st.sampled_from(["", "/", "/p?q=1#f", "\\@x", "/%2e"]),
    ),
)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.text())
def test_fuzz_arbitrary_text_only_ever_refuses(url: str) -> None:
    result = _outcome(url)
    assert result is None or result is url


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(_URLISH)
@pytest.mark.slow
def test_fuzz_url_shaped_text_only_ever_refuses(url: str) -> None:
    result = _outcome(url)
    assert result is None or result is url


@given(st.ip_addresses(v=4))
def test_every_non_global_ipv4_is_refused_in_every_form(address: ipaddress.IPv4Address) -> None:
    forms = [str(address), f"[::ffff:{address}]", f"[64:ff9b::{address}]"]
    if not address.is_global:
        for form in forms:
            assert _outcome(f"https://{form}/") is None, form
    # Any spelling but the dotted quad is refused, public or not: resolvers disagree on them.
    for spelling in (str(int(address)), hex(int(address)), "0" + oct(int(address))[2:]):
        assert _outcome(f"https://{spelling}/") is None, spelling


@given(st.ip_addresses(v=6))
def test_every_non_global_ipv6_is_refused(address: ipaddress.IPv6Address) -> None:
    # Python counts all of ::ffff:0:0/96 as private; the guard checks the address it embeds.
    embedded = address.ipv4_mapped
    inward = not (embedded or address).is_global
    if inward:
        assert _outcome(f"https://[{address}]/") is None
