"""The result cache: a file sent again is not parsed again.

Keyed by everything that decides the text: the payload's SHA-256, the declared kind and media
type, the page ceiling, the parse limits, and the versions of the code that parses. Only text
is cached, never a failure: a wall-clock or memory kill depends on the load of the host it
happened on, and caching it would make one bad minute permanent for that file. The cache sits
inside ``extract_attachment``, after the guards, so a cached text is admitted exactly as a
fresh one is; and it is best effort, because an unreachable cache must cost a parse, not
turn into an extraction failure.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from functools import cache
from importlib import metadata

from redis import Redis, RedisError

from bridge.attachments import TextExtractor
from sandbox.limits import ParseLimits

_KEY_PREFIX = "airlock:extracted:"
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
    identity = json.dumps(
        {"parse": asdict(parse_limits), "version": extractor_version()}, sort_keys=True
    )
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

    def _key(self, kind: str, media_type: str, max_pages: int) -> str:
        identity = json.dumps([self.namespace, self.payload_sha256, kind, media_type, max_pages])
        return _KEY_PREFIX + hashlib.sha256(identity.encode()).hexdigest()

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        key = self._key(kind, media_type, max_pages)
        try:
            untrusted_cached = self.redis.get(key)
        except RedisError as exc:
            _log.warning("result cache unreachable, extracting without it: %s", exc)
            untrusted_cached = None
        if isinstance(untrusted_cached, bytes):
            try:
                # Still untrusted: the bridge re-normalises and re-checks it like fresh text.
                return untrusted_cached.decode("utf-8")
            except UnicodeDecodeError:
                _log.warning("result cache entry %s is not UTF-8; extracting again", key)
        text = self.inner.extract(kind, media_type, payload, max_pages=max_pages)
        try:
            self.redis.set(key, text.encode("utf-8"), ex=self.ttl_seconds)
        except UnicodeEncodeError:
            pass  # a lone surrogate would not read back as the same text: not cached
        except RedisError as exc:
            _log.warning("result cache unreachable, text not cached: %s", exc)
        return text
