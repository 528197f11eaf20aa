"""A Redis client on the dedicated test database, for the units that talk to Redis.

Keys written here are content-addressed or random, so these tests neither flush the database
nor collide with each other or with the integration suite.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from redis import Redis

REDIS_URL = f"redis://127.0.0.1:6379/{int(os.environ.get('AIRLOCK_TEST_REDIS_DB', '9'))}"


@pytest.fixture
def redis() -> Iterator[Redis]:
    client = Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except OSError as exc:
        pytest.fail(f"Redis is not reachable at {REDIS_URL}: {exc}")
    yield client
    client.close()
