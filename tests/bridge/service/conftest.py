"""The bridge service's units read and write streams on the suite's own Redis."""

from tests.worker.conftest import _suite_redis_running, redis

__all__ = ["_suite_redis_running", "redis"]
