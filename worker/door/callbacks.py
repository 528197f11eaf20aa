"""Callbacks: a job's answer POSTed to the caller's URL, signed, retried, never to the inside.

A callback URL is a request to make this server connect somewhere: left open, it reaches the
cloud's metadata service, the cluster's Redis or an admin page on loopback (Gotenberg's
webhook SSRF advisories). So the host is resolved and every address it resolves to must be
public, unless an operator's allow-list admits its range; the connection goes to the address
that was checked (a second resolution could answer differently: DNS rebinding), and every
redirect is checked the same way before it is followed.

The body is signed with HMAC-SHA256 keyed by the SHA-256 of the submitting key (what the keys
file stores, and what the key's holder can compute), over ``<timestamp>.<body>``: a receiver
checks the signature and refuses old timestamps, so a captured delivery cannot be replayed.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

from worker.door.config import Network

_log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Airlock-Signature"
TIMESTAMP_HEADER = "X-Airlock-Timestamp"
#: Seconds before each retry: a receiver that is briefly down gets the answer within 7 s.
RETRY_DELAYS = (1.0, 2.0, 4.0)
_TIMEOUT_SECONDS = 10.0
_MAX_REDIRECTS = 3


class CallbackRefused(ValueError):
    """A callback URL this server will not call, and why."""


@dataclass(frozen=True)
class Target:
    """A checked callback: the URL as given, and the address it will be sent to."""

    url: str
    address: str


#: IPv6 ranges that carry an IPv4 address a translator or tunnel delivers to: NAT64 (the
#: well-known and the local-use prefix) and the deprecated IPv4-compatible form. Python calls
#: some of these global whatever IPv4 address they carry (64:ff9b::7f00:1 is 127.0.0.1).
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def _public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """Whether ``address`` is public, and so is any IPv4 address it carries."""
    if not address.is_global:
        return False
    if isinstance(address, ipaddress.IPv4Address):
        return True
    if address in _LOCAL_NAT64:
        return False
    embedded = address.ipv4_mapped or address.sixtofour
    if embedded is None and address.teredo is not None:
        embedded = address.teredo[1]
    if embedded is None and (address in _NAT64 or address in _IPV4_COMPATIBLE):
        embedded = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return embedded is None or embedded.is_global


def check(url: str, allowed: Sequence[Network]) -> Target:
    """``url``, with the address to connect to, or :class:`CallbackRefused` naming why."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as exc:  # a port out of range, a broken IPv6 bracket
        raise CallbackRefused(f"the callback URL is malformed: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CallbackRefused("a callback must be an http or https URL with a host")
    if parts.username or parts.password:
        raise CallbackRefused("a callback URL may not carry a login")
    try:
        found = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise CallbackRefused(
            f"the callback host {parts.hostname} does not resolve: {exc}"
        ) from None
    addresses = [ipaddress.ip_address(entry[4][0]) for entry in found]
    for address in addresses:
        if not (_public(address) or any(address in network for network in allowed)):
            raise CallbackRefused(
                f"the callback host {parts.hostname} resolves to {address}, which is not a "
                "public address (private, loopback, link-local and reserved ranges are "
                "refused unless AIRLOCK_HTTP_CALLBACK_ALLOW admits them)"
            )
    return Target(url, str(addresses[0]))


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """What :data:`SIGNATURE_HEADER` carries: ``sha256=<hex>``."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


@dataclass
class Delivery:
    """How a callback fared, for the job's status."""

    state: str = "pending"  # pending, delivered, failed
    attempts: int = 0
    last_error: str | None = None


class Callbacks:
    def __init__(self, allowed: Sequence[Network], workers: int = 8) -> None:
        self._allowed = tuple(allowed)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="airlock-callback")
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def check(self, url: str) -> Target:
        return check(url, self._allowed)

    def send(
        self, target: Target, body: Callable[[], bytes], secret: str | None, delivery: Delivery
    ) -> None:
        """Deliver ``body()`` to ``target`` in the background, retrying per RETRY_DELAYS."""
        self._pool.submit(self._deliver, target, body, secret, delivery)

    def close(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _deliver(
        self, target: Target, body: Callable[[], bytes], secret: str | None, delivery: Delivery
    ) -> None:
        content = body()
        for delay in (0.0, *RETRY_DELAYS):
            if delay and self._stop.wait(delay):
                return
            with self._lock:
                delivery.attempts += 1
            try:
                error = self._post(target, content, secret)
            except Exception as exc:  # noqa: BLE001 - a delivery must end delivered or failed
                error = f"{type(exc).__name__}: {exc}"
            with self._lock:
                if error is None:
                    delivery.state, delivery.last_error = "delivered", None
                    return
                delivery.last_error = error
        with self._lock:
            delivery.state = "failed"
        _log.warning("callback to %s failed after %d attempts: %s", target.url,
                     delivery.attempts, delivery.last_error)  # fmt: skip

    def _post(self, target: Target, content: bytes, secret: str | None) -> str | None:
        """One attempt, redirects followed after each is checked; None when delivered."""
        timestamp = str(int(time.time()))
        headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: timestamp}
        if secret is not None:
            headers[SIGNATURE_HEADER] = signature(secret, timestamp, content)
        current = target
        try:
            for _ in range(_MAX_REDIRECTS + 1):
                response = _pinned_post(current, content, headers)
                if response.is_redirect and "location" in response.headers:
                    current = check(urljoin(current.url, response.headers["location"]),
                                    self._allowed)  # fmt: skip
                    continue
                if response.is_success:
                    return None
                return f"the receiver answered {response.status_code}"
        except CallbackRefused as exc:
            return f"a redirect was refused: {exc}"
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        return f"more than {_MAX_REDIRECTS} redirects"


def _pinned_post(target: Target, content: bytes, headers: dict[str, str]) -> httpx.Response:
    """POST to the checked address, the URL's host kept for Host and TLS's name."""
    parts = urlsplit(target.url)
    host = parts.hostname or ""
    address = f"[{target.address}]" if ":" in target.address else target.address
    netloc = address if parts.port is None else f"{address}:{parts.port}"
    pinned = parts._replace(netloc=netloc).geturl()
    with httpx.Client(timeout=_TIMEOUT_SECONDS, follow_redirects=False) as client:
        return client.post(
            pinned,
            content=content,
            headers={**headers, "Host": parts.netloc.rsplit("@", 1)[-1]},
            extensions={"sni_hostname": host},
        )
