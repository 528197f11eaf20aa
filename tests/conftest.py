"""Shared fixtures: where the real-document corpus lives, and the suite's own Redis.

A test that needs a ``redis-server`` carries ``@pytest.mark.redis`` (and ``integration``), so
``pytest -m "not integration"`` runs with no Redis at all; the hooks here hold every test to it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from redis import Redis

from tests import redis_server
from tests.redis_server import SUITE_PORT, RedisServer

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = Path(os.environ.get("AIRLOCK_CORPUS_DIR", REPO_ROOT.parent / "shared" / "corpus"))
#: The fixtures that start a ``redis-server``; a test using one (even through other fixtures)
#: must carry the ``redis`` marker.
_REDIS_FIXTURES = frozenset({"suite_redis", "own_redis", "integration_redis"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse to run a test whose markers understate what it needs: unmarked, it would pass in
    a full run (the session's server is up) and error in an offline ``-m "not integration"``."""

    def marked(item: pytest.Item, name: str) -> bool:
        return item.get_closest_marker(name) is not None

    problems = [
        f"{item.nodeid}: uses a redis-server without @pytest.mark.redis"
        for item in items
        if _REDIS_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        and not marked(item, "redis")
    ] + [
        f"{item.nodeid}: marked redis but not integration"
        for item in items
        if marked(item, "redis") and not marked(item, "integration")
    ]
    if problems:
        raise pytest.UsageError("\n".join(problems))


def pytest_configure(config: pytest.Config) -> None:
    redis_server.permitted = False  # until a test marked ``redis`` runs (below)
    signal.signal(signal.SIGTERM, _interrupted)


def _interrupted(signum: int, frame: object) -> None:
    """End a run told to stop (a CI job's timeout, ``kill``) as Ctrl-C does, so the fixtures'
    teardown runs: the suite's ``redis-server``s and Celery workers start in sessions of their
    own, and a run that died of SIGTERM left them running on the machine for good."""
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """Only a test marked ``redis`` may start a ``redis-server`` (``RedisServer.start``), however
    it builds one: the fixture check above cannot see a server made in a test's own code."""
    redis_server.permitted = item.get_closest_marker("redis") is not None
    try:
        return (yield)
    finally:
        redis_server.permitted = False


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


@pytest.fixture(autouse=True)
def _suite_redis_for_marked_tests(request: pytest.FixtureRequest) -> None:
    """A test marked ``redis`` may build settings on ``SUITE_REDIS_URL`` alone; the server
    behind it is up."""
    if request.node.get_closest_marker("redis") is not None:
        request.getfixturevalue("suite_redis")


@pytest.fixture
def redis(suite_redis: RedisServer) -> Iterator[Redis]:
    """A client of the suite's Redis; tests use keys of their own, so nothing is flushed."""
    client = suite_redis.client()
    yield client
    client.close()
