"""Run only by tests/test_suite_cleanup.py, in a pytest of its own (the name keeps the suite from
collecting it): a test holding the suite's ``redis-server`` until its run is told to stop."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.redis_server import RedisServer


@pytest.mark.redis
@pytest.mark.integration
def test_holds_the_suite_redis(suite_redis: RedisServer) -> None:
    assert suite_redis.process is not None
    Path(os.environ["AIRLOCK_PROBE_PID_FILE"]).write_text(str(suite_redis.process.pid))
    time.sleep(120)  # until the outer test sends SIGTERM
