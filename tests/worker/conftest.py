"""A Redis client on the suite's own Redis (``tests.redis_server``), for the units that use it.

Keys written here are content-addressed or random, so these tests neither flush the database
nor collide with each other or with the integration suite.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis import Redis

from tests.redis_server import SUITE_REDIS_URL, RedisServer

REDIS_URL = SUITE_REDIS_URL


@pytest.fixture(autouse=True)
def _suite_redis_running(suite_redis: RedisServer) -> RedisServer:
    """Every unit here may build settings on REDIS_URL; the server behind it is up."""
    return suite_redis


@pytest.fixture
def redis() -> Iterator[Redis]:
    client = Redis.from_url(REDIS_URL)
    yield client
    client.close()
