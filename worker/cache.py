"""The result cache: a file sent again is not parsed again.

Text only, never a failure; best effort; every entry MAC'd under the workers' own secret
(``AIRLOCK_RESULT_CACHE_KEY``), so text anyone else planted is never served. See docs/queue.md
(Result cache).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import metadata

from redis import Redis, RedisError

from bridge.knowledge.attachments import TextExtractor
from sandbox.limits import ParseLimits

_KEY_PREFIX = "airlock:extracted:"
_MAC_BYTES = hashlib.sha256().digest_size
_log = logging.getLogger(__name__)

# The distributions whose code turns bytes into text. A deployment that upgrades any of them
# gets a fresh cache instead of text a different parser produced.
_PARSER_DISTRIBUTIONS = (
    "airlock",
    "pypdf",
    "python-docx",
    "pillow",
    "lxml",
    "charset-normalizer",
)


@cache
def extractor_version() -> str:
    """The versions of the code that parses; read from metadata, so no parser is imported."""
    versions = []
    for name in _PARSER_DISTRIBUTIONS:
        try:
            versions.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name}=absent")
    return ";".join(versions)


def cache_namespace(parse_limits: ParseLimits) -> str:
    """The part of every key fixed by this process's configuration and code."""
    # How long a scan must be to be read in pages changes how it is read, never its text.
    parse = {k: v for k, v in asdict(parse_limits).items() if k != "fan_out_pages"}
    identity = json.dumps({"parse": parse, "version": extractor_version()}, sort_keys=True)
    return hashlib.sha256(identity.encode()).hexdigest()


@dataclass(frozen=True)
class CachedExtractor:
    """A :class:`TextExtractor` that remembers the text ``inner`` produced.

    Built per job for one payload whose SHA-256 the task already verified against the claim
    check: hashing a payload of megabytes a second time would only repeat that work.
    """

    inner: TextExtractor
    redis: Redis
    namespace: str
    ttl_seconds: int
    payload_sha256: str
    secret: bytes = field(repr=False)
    on_refused: Callable[[], None] = lambda: None

    def _key(self, kind: str, media_type: str, max_pages: int) -> str:
        identity = json.dumps([self.namespace, self.payload_sha256, kind, media_type, max_pages])
        return _KEY_PREFIX + hashlib.sha256(identity.encode()).hexdigest()

    def _mac(self, key: str, text: bytes) -> bytes:
        # The key is under the MAC too: a genuine entry copied to another document's key fails.
        return hmac.new(self.secret, key.encode() + b"\0" + text, hashlib.sha256).digest()

    def _opened(self, key: str, untrusted_entry: bytes) -> str | None:
        """The entry's text if the workers' secret vouches for it, else None (and counted)."""
        untrusted_mac, untrusted_text = untrusted_entry[:_MAC_BYTES], untrusted_entry[_MAC_BYTES:]
        if not hmac.compare_digest(untrusted_mac, self._mac(key, untrusted_text)):
            self.on_refused()
            _log.warning("result cache entry %s has no valid MAC: ignored", key)
            return None
        try:
            # Still untrusted: the bridge re-normalises and re-checks it like fresh text.
            return untrusted_text.decode("utf-8")
        except UnicodeDecodeError:
            _log.warning("result cache entry %s is not UTF-8; extracting again", key)
            return None

    def cached(self, kind: str, media_type: str, max_pages: int) -> str | None:
        """The text a worker cached for this payload, if the workers' secret vouches for it."""
        return self._cached(self._key(kind, media_type, max_pages))

    def _cached(self, key: str) -> str | None:
        try:
            untrusted_cached = self.redis.get(key)
        except RedisError as exc:
            _log.warning("result cache unreachable, extracting without it: %s", exc)
            return None
        return self._opened(key, untrusted_cached) if isinstance(untrusted_cached, bytes) else None

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        key = self._key(kind, media_type, max_pages)
        cached = self._cached(key)
        if cached is not None:
            return cached
        text = self.inner.extract(kind, media_type, payload, max_pages=max_pages)
        try:
            encoded = text.encode("utf-8")
            self.redis.set(key, self._mac(key, encoded) + encoded, ex=self.ttl_seconds)
        except UnicodeEncodeError:
            pass  # a lone surrogate would not read back as the same text: not cached
        except RedisError as exc:
            _log.warning("result cache unreachable, text not cached: %s", exc)
        return text
