"""The suite's own Redis is up for every unit here: they build settings on ``REDIS_URL``."""

from __future__ import annotations

import pytest

from tests.redis_server import SUITE_REDIS_URL, RedisServer

REDIS_URL = SUITE_REDIS_URL


@pytest.fixture(autouse=True)
def _suite_redis_running(suite_redis: RedisServer) -> RedisServer:
    """Every unit here may build settings on REDIS_URL; the server behind it is up."""
    return suite_redis

