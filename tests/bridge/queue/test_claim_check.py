"""Payloads under their hash: small ones written in the refreshing round trip, large ones
refreshed first and sent only when missing; the worker's check refuses bytes not the named."""

from __future__ import annotations

import pytest
from redis import Redis

from bridge.queue.claim_check import (
    SENT_AT_ONCE_BYTES,
    PayloadUnavailable,
    fetch_payload,
    sha256_hex,
    store_payloads,
)
from bridge.queue.jobs import payload_key

pytestmark = [pytest.mark.integration, pytest.mark.redis]


class _Claim:
    def __init__(self, payload: bytes) -> None:
        self.sha256 = sha256_hex(payload)
        self.size = len(payload)


def test_a_small_payload_is_written_and_its_lifetime_renewed(redis: Redis) -> None:
    payload = b"a small note " + sha256_hex(b"small").encode()
    key = payload_key(sha256_hex(payload))
    store_payloads(redis, {sha256_hex(payload): payload}, 60)
    redis.expire(key, 5)
    store_payloads(redis, {sha256_hex(payload): payload}, 60)
    assert 5 < redis.ttl(key) <= 60
    assert fetch_payload(redis, _Claim(payload)) == payload


def test_a_value_planted_under_a_small_payloads_key_is_written_over(redis: Redis) -> None:
    """Sent whole every time, a small payload replaces whatever was planted under its key."""
    payload = b"the submitted note " + sha256_hex(b"planted").encode()
    redis.set(payload_key(sha256_hex(payload)), b"planted by someone else", ex=60)
    store_payloads(redis, {sha256_hex(payload): payload}, 60)
    assert fetch_payload(redis, _Claim(payload)) == payload


def test_a_large_payload_already_stored_is_only_refreshed(redis: Redis) -> None:
    """Not uploaded again: what is under the key stays, and the worker's check refuses it."""
    payload = b"L" * (SENT_AT_ONCE_BYTES + 1) + sha256_hex(b"large").encode()
    key = payload_key(sha256_hex(payload))
    redis.set(key, b"planted", ex=5)
    store_payloads(redis, {sha256_hex(payload): payload}, 60)
    assert redis.get(key) == b"planted"
    assert 5 < redis.ttl(key) <= 60
    with pytest.raises(PayloadUnavailable, match="do not match"):
        fetch_payload(redis, _Claim(payload))
    redis.delete(key)
    store_payloads(redis, {sha256_hex(payload): payload}, 60)
    assert fetch_payload(redis, _Claim(payload)) == payload


def test_small_and_large_payloads_of_one_call_are_all_stored(redis: Redis) -> None:
    payloads = [b"s" * n + sha256_hex(b"mixed").encode() for n in (1, SENT_AT_ONCE_BYTES, 10**6)]
    store_payloads(redis, {sha256_hex(p): p for p in payloads}, 60)
    assert [fetch_payload(redis, _Claim(p)) for p in payloads] == payloads
