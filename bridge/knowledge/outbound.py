"""The outbound URL guard (AS-NET-1/2): no fetch derived from untrusted content reaches inward.

A URL is read the way the most permissive client would read it; wherever clients disagree, it
is refused rather than resolved one way here and another at the socket. Each rule and the
target it keeps out: docs/spec-decisions.md (Outbound URL guard).
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from typing import NoReturn
from urllib.parse import urlsplit

from bridge.knowledge.attachments import quoted
from bridge.knowledge.errors import OutboundRejected

#: TLS only. The metadata services and most internal admin endpoints speak plain HTTP, so a
#: verified TLS handshake is a second wall behind the host checks (a name rebound to an
#: internal address still fails it); and fetched text goes into a prompt, so a network
#: attacker must not be able to rewrite it in transit.
ALLOWED_URL_SCHEMES = frozenset({"https"})

# Names that /etc/hosts maps to this machine on common distributions. They are answered from
# that file, never from DNS, so no resolution-time check downstream would ever see them.
_DENIED_HOSTNAMES = frozenset(
    {
        "localhost",
        "localhost.localdomain",
        "localhost6",
        "localhost6.localdomain6",
        "ip6-localhost",
        "ip6-loopback",
        "ip6-localnet",
        "ip6-mcastprefix",
        "ip6-allnodes",
        "ip6-allrouters",
        "broadcasthost",
    }
)

# Special-use domains, refused with every name under them: "localhost" (RFC 6761, resolvers
# answer loopback), "local" (RFC 6762, answered by multicast DNS on the local link),
# "internal" (reserved by ICANN for private networks; home of metadata.google.internal),
# "home.arpa" (RFC 8375, residential networks) and "localdomain" (the /etc/hosts convention).
_DENIED_DOMAINS = ("localhost", "local", "internal", "home.arpa", "localdomain")

# Characters that clients strip, keep or stop at differently: controls and whitespace
# (urlsplit silently drops tab and newline; curl keeps them), invisible formatting characters,
# surrogates, and the Unicode line and space separators.
_AMBIGUOUS_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp", "Zs"})

# The authority once userinfo is refused: a bracketed literal or a name, then an optional port.
# urlsplit tolerates junk after "]" ("[::1]x") and a browser does not, so the shape is
# matched whole here instead of trusting urlsplit's hostname.
_AUTHORITY = re.compile(r"(?:\[(?P<literal>[^\[\]]*)\]|(?P<name>[^\[\]:]*))(?::(?P<port>[0-9]*))?")

_MAX_PORT = 65535

# What a host name may hold after IDNA: letters, digits, "-" and "_" in dot-separated labels.
_HOST_NAME = re.compile(r"[a-z0-9_-]+(?:\.[a-z0-9_-]+)*")

# A last label that makes a browser (WHATWG "ends in a number") parse the host as IPv4.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")

# One part of an IPv4 address as inet_aton reads it: "0x" hex (empty means 0), a leading 0
# for octal, decimal otherwise.
_IPV4_PART = re.compile(r"0x(?P<hex>[0-9a-f]*)|0(?P<oct>[0-7]+)|(?P<dec>[1-9][0-9]*|0)")

_IPV4_PARTS_MAX = 4

# IPv4 ranges that are this machine, its networks, or nobody's. Documentation and benchmarking
# ranges are unrouted on the internet, so whatever answers there is inside some network.
_DENIED_IPV4: tuple[tuple[IPv4Network, str], ...] = tuple(
    (IPv4Network(network), what)
    for network, what in (
        ("0.0.0.0/8", "'this network'; Linux connects 0.0.0.0 to the local host"),
        ("10.0.0.0/8", "a private network (RFC 1918)"),
        ("100.64.0.0/10", "carrier-grade NAT space, internal to a provider (RFC 6598)"),
        ("127.0.0.0/8", "the loopback network"),
        ("169.254.0.0/16", "link-local, where the cloud metadata service answers"),
        ("172.16.0.0/12", "a private network (RFC 1918)"),
        ("192.0.0.0/24", "IETF protocol assignments (RFC 6890)"),
        ("192.0.2.0/24", "documentation (TEST-NET-1)"),
        ("192.88.99.0/24", "the deprecated 6to4 relay anycast (RFC 7526)"),
        ("192.168.0.0/16", "a private network (RFC 1918)"),
        ("198.18.0.0/15", "benchmarking (RFC 2544)"),
        ("198.51.100.0/24", "documentation (TEST-NET-2)"),
        ("203.0.113.0/24", "documentation (TEST-NET-3)"),
        ("224.0.0.0/4", "multicast"),
        ("255.255.255.255/32", "the limited broadcast address"),
        ("240.0.0.0/4", "reserved (class E)"),
    )
)

# IPv6 forms that carry an IPv4 address and deliver to it: the embedded address is what gets
# reached, so it is what gets checked. (Mapped addresses and 6to4 have stdlib accessors.)
_NAT64_WELL_KNOWN = IPv6Network("64:ff9b::/96")

# Everything the IANA allocates for global unicast. An address outside it is loopback,
# link-local, unique-local, multicast or reserved, whatever its name.
_GLOBAL_UNICAST = IPv6Network("2000::/3")

# Named IPv6 ranges, most specific first, so a refusal says what the address is. The ones
# outside 2000::/3 would be refused anyway; they are listed for the reason, not the decision.
_DENIED_IPV6: tuple[tuple[IPv6Network, str], ...] = tuple(
    (IPv6Network(network), what)
    for network, what in (
        ("::/128", "the unspecified address, which connects to the local host"),
        ("::1/128", "the loopback address"),
        ("::/96", "IPv4-compatible (deprecated); some stacks route it to the IPv4 it embeds"),
        ("64:ff9b:1::/48", "local-use NAT64, translated inside the operator's network"),
        ("::/8", "reserved, including the IPv4-translated form"),
        ("100::/64", "the discard-only prefix"),
        ("2001::/32", "Teredo, which tunnels to an IPv4 host written obfuscated in it"),
        ("2001:db8::/32", "documentation"),
        ("2001::/23", "IETF protocol assignments"),
        ("3fff::/20", "documentation"),
        ("fc00::/7", "unique-local (private), where AWS's IPv6 metadata service answers"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "site-local (deprecated private addressing)"),
        ("ff00::/8", "multicast"),
    )
)


def check_outbound_url(url: str) -> str:
    """Return ``url`` unchanged if it may be fetched; otherwise raise :class:`OutboundRejected`.

    Only what the URL literally says is checked. Resolving a name here would be a
    time-of-check gap (the client resolves again, and may get another answer), so the
    resolution-time and per-redirect checks AS-NET-2 also requires belong in the HTTP client,
    next to the socket. What this function does own is every spelling that reaches an address
    without DNS: a numeric host is read the way a C resolver reads it (``2130706433``,
    ``0177.0.0.1`` and ``127.1`` are all loopback), and the host is IDNA-normalised first, since
    loopback written in fullwidth digits (U+FF11 U+FF12 U+FF17 ...) is still loopback. No other
    exception escapes, for any string.
    """
    _refuse_ambiguous_characters(url)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise OutboundRejected(
            f"outbound url {quoted(repr(url))} cannot be parsed ({quoted(str(exc))}); a URL "
            "one parser rejects is a URL another parser reads its own way."
        ) from exc
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_URL_SCHEMES:
        raise OutboundRejected(
            f"outbound scheme {quoted(repr(scheme))} is not permitted; untrusted-derived "
            f"targets may use {sorted(ALLOWED_URL_SCHEMES)} only (AS-NET-1)."
        )
    if "@" in parts.netloc:
        raise OutboundRejected(
            f"outbound url {quoted(repr(url))} carries userinfo before '@'. Clients disagree "
            "about which '@' ends it (http://public.example@127.0.0.1/ fetches 127.0.0.1), and "
            "an untrusted target has no credentials to send."
        )
    authority = _AUTHORITY.fullmatch(parts.netloc)
    if authority is None:
        raise OutboundRejected(
            f"outbound authority {quoted(repr(parts.netloc))} is not host[:digits]. Parsers "
            "differ on anything else (urlsplit ignores text after ']', a browser rejects the "
            "URL), so it is refused rather than read one way here and another way later."
        )
    _refuse_bad_port(authority["port"])
    literal, name = authority["literal"], authority["name"]
    if not literal and not name:
        raise OutboundRejected(
            f"outbound url {quoted(repr(url))} names no host; a target that cannot be "
            "identified cannot be checked."
        )
    if literal:
        _refuse_denied_address(_ipv6_literal(literal), literal)
    else:
        _refuse_denied_name(name)
    return url


def _refuse_denied_name(name: str) -> None:
    """Refuse a host name, or a numeric host, that reaches inward without DNS."""
    host = _normalise_hostname(name).removesuffix(".")
    _refuse_local_name(host)
    if not _HOST_NAME.fullmatch(host):
        raise OutboundRejected(
            f"outbound host {quoted(repr(host))} holds characters other than letters, digits, "
            "'-', '_' and '.'. Clients treat the rest differently (a browser decodes '%31' to "
            "'1', a resolver may stop at ';'), so the host checked would not be the host fetched."
        )
    address = _ipv4_literal(host)
    if address is not None:
        _refuse_denied_address(address, host)
        if str(address) != host:
            raise OutboundRejected(
                f"outbound host {quoted(repr(host))} spells {address} in a non-canonical form. "
                "Resolvers disagree on such spellings (inet_aton reads 010.0.0.1 as 8.0.0.1, "
                "a decimal parser as 10.0.0.1), so only the dotted-decimal form is accepted."
            )
    elif "." not in host:
        raise OutboundRejected(
            f"outbound host {quoted(repr(host))} is a single label; a resolver completes it "
            "with its search domains, which are the deployment's own internal zones."
        )


def _refuse_ambiguous_characters(url: str) -> None:
    """Refuse characters that make clients disagree about where the host is."""
    if "\\" in url:
        raise OutboundRejected(
            f"outbound url {quoted(repr(url))} contains a backslash. Browsers read it as '/', "
            "urlsplit as an ordinary character, so http://127.0.0.1\\@public.example is "
            "127.0.0.1 to one and public.example to the other."
        )
    for ch in url:
        if unicodedata.category(ch) in _AMBIGUOUS_CATEGORIES:
            raise OutboundRejected(
                f"outbound url {quoted(repr(url))} contains U+{ord(ch):04X}, a control, "
                "whitespace or invisible character; clients strip, keep or stop at these "
                "differently, so the URL checked would not be the URL fetched."
            )


def _refuse_bad_port(port: str | None) -> None:
    """Refuse a port that a strict client rejects and a lenient one might read some other way."""
    # The length test comes first so int() never sees an arbitrarily long digit string.
    if port and (len(port) > len(str(_MAX_PORT)) or int(port) > _MAX_PORT):
        raise OutboundRejected(
            f"outbound port {quoted(repr(port))} is not a port number (0-{_MAX_PORT})."
        )


def _normalise_hostname(name: str) -> str:
    """The ASCII, lower-case spelling a client resolves for ``name``, or a refusal.

    Every later check compares against ASCII, and clients map a host through IDNA (UTS #46)
    before resolving it: fullwidth digits become digits, U+3002, U+FF0E and U+FF61 become dots.
    The standard library's IDNA 2003 codec does that mapping, but with Unicode 3.2 tables; NFKC
    with the running Python's tables is applied first so characters added since (U+1FBF1 is
    a "1") are mapped too. Unassigned code points are refused because a client with newer
    tables than this interpreter could map them to a digit or a dot. The encoded name must
    also decode again, which refuses ``xn--`` labels that are not honest punycode.
    """
    unassigned = [ch for ch in name if unicodedata.category(ch) == "Cn"]
    if unassigned:
        raise OutboundRejected(
            f"outbound host {quoted(repr(name))} contains unassigned code point "
            f"U+{ord(unassigned[0]):04X}; a client with newer Unicode tables may read it as a "
            "digit or a dot."
        )
    try:
        encoded = unicodedata.normalize("NFKC", name).encode("idna")
        encoded.decode("idna")
    except UnicodeError as exc:
        raise OutboundRejected(
            f"outbound host {quoted(repr(name))} is not a valid internationalised name "
            f"({quoted(str(exc))}); a host this guard cannot normalise is one it cannot check."
        ) from exc
    return encoded.decode("ascii").lower()


def _refuse_local_name(host: str) -> None:
    """Refuse names that reach this machine or its local network without asking DNS."""
    if host in _DENIED_HOSTNAMES:
        raise OutboundRejected(
            f"outbound host {quoted(repr(host))} names the local host; untrusted-derived "
            "targets may not reach the service's own machine (AS-NET-2)."
        )
    for domain in _DENIED_DOMAINS:
        if host == domain or host.endswith("." + domain):
            raise OutboundRejected(
                f"outbound host {quoted(repr(host))} is in the special-use domain "
                f"{domain!r}, which names this machine or its local network, never a public "
                "host (AS-NET-2)."
            )


def _ipv4_literal(host: str) -> IPv4Address | None:
    """The address a numeric-looking host reaches, read as inet_aton reads it; else ``None``.

    A host whose last label is a number is parsed as IPv4 by browsers whatever the rest says,
    so such a host that is not a valid address is refused: resolvers differ on what it means,
    and some of them read it as an address.
    """
    labels = host.split(".")
    if not _NUMERIC_LABEL.fullmatch(labels[-1]):
        return None
    numbers = [_ipv4_part(label) for label in labels]
    valid = [number for number in numbers if number is not None]
    if len(valid) != len(labels) or len(labels) > _IPV4_PARTS_MAX:
        raise OutboundRejected(
            f"outbound host {quoted(repr(host))} looks numeric but is not an IPv4 address any "
            "resolver agrees on; some read such hosts as an address, some look them up, so it "
            "is refused as ambiguous."
        )
    *leading, last = valid
    # inet_aton: every part but the last is one byte; the last fills the remaining bytes.
    if any(part > 0xFF for part in leading) or last >= 1 << (8 * (_IPV4_PARTS_MAX - len(leading))):
        raise OutboundRejected(
            f"outbound host {quoted(repr(host))} is a numeric host with a part out of range; "
            "resolvers disagree on whether it wraps, truncates or fails, so it is refused."
        )
    value = last
    for index, part in enumerate(leading):
        value += part << (8 * (_IPV4_PARTS_MAX - 1 - index))
    return IPv4Address(value)


def _ipv4_part(label: str) -> int | None:
    match = _IPV4_PART.fullmatch(label)
    if match is None:
        return None
    if match["hex"] is not None:
        return int(match["hex"] or "0", 16)
    if match["oct"] is not None:
        return int(match["oct"], 8)
    return int(match["dec"])


def _ipv6_literal(literal: str) -> IPv6Address:
    """The address inside ``[...]``, refusing anything but a plain IPv6 address."""
    try:
        address = IPv6Address(literal)
    except ipaddress.AddressValueError as exc:
        raise OutboundRejected(
            f"outbound host {quoted(repr(literal))} is not an IPv6 address; only IPv6 belongs in "
            "brackets, and a future address format is one no check here understands."
        ) from exc
    if address.scope_id is not None:
        raise OutboundRejected(
            f"outbound host {quoted(repr(literal))} carries a zone id; a zone names an interface "
            "of this machine, which is exactly what an untrusted target may not pick."
        )
    return address


def _embedded_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address that an IPv4-mapped, NAT64 or 6to4 address delivers to, if any."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64_WELL_KNOWN:
        return IPv4Address(int(address) & 0xFFFF_FFFF)
    return address.sixtofour


def _refuse_denied_address(address: IPv4Address | IPv6Address, host: str) -> None:
    """Refuse an address on this machine or an internal network; IPv6 that embeds one too."""
    if isinstance(address, IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is None:
            for v6_network, what in _DENIED_IPV6:
                if address in v6_network:
                    _refuse_address(host, address, what)
            if address not in _GLOBAL_UNICAST:
                _refuse_address(host, address, "outside global unicast space (2000::/3)")
            return
        address = embedded
    for network, what in _DENIED_IPV4:
        if address in network:
            _refuse_address(host, address, what)


def _refuse_address(host: str, address: IPv4Address | IPv6Address, what: str) -> NoReturn:
    raise OutboundRejected(
        f"outbound host {quoted(repr(host))} reaches {address}, {what}; untrusted-derived "
        "targets may not reach the service's own machine or its networks (AS-NET-2)."
    )
