"""Shared fixtures: where the real-document corpus lives, and the suite's own Redis."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from tests.redis_server import SUITE_PORT, RedisServer

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = Path(os.environ.get("AIRLOCK_CORPUS_DIR", REPO_ROOT.parent / "shared" / "corpus"))


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS_DIR.is_dir():
        pytest.fail(f"the corpus is missing at {CORPUS_DIR}; set AIRLOCK_CORPUS_DIR")
    return CORPUS_DIR


@pytest.fixture(scope="session")
def suite_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The suite's own ``redis-server`` (AOF everysec), started once and stopped at the end.

    Never a Redis the suite did not start: emptying or filling it harms no one else.
    """
    server = RedisServer(tmp_path_factory.mktemp("suite-redis"), SUITE_PORT)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis(suite_redis: RedisServer) -> Iterator[Redis]:
    """A client on the suite's own Redis; keys the tests write are random or content-addressed."""
    client = suite_redis.client()
    yield client
    client.close()
