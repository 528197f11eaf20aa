"""A test run that is told to stop leaves no server behind (tests/conftest.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import running
from tests.integration.load import wait_until

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.integration
def test_a_run_stopped_by_sigterm_stops_its_redis_server(tmp_path: Path) -> None:
    pid_file = tmp_path / "redis.pid"
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--basetemp", str(tmp_path / "inner"), "tests/suite_cleanup_probe.py"],
        cwd=REPO,
        env={**os.environ, "AIRLOCK_PROBE_PID_FILE": str(pid_file)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    redis_pid = 0
    try:
        wait_until(pid_file.exists, 120, "the inner run's redis-server")
        wait_until(lambda: pid_file.read_text() != "", 10, "the server's pid")
        redis_pid = int(pid_file.read_text())
        assert running(redis_pid)
        run.send_signal(signal.SIGTERM)
        assert run.wait(60) != 0
        wait_until(lambda: not running(redis_pid), 30, "the inner run's redis-server to stop")
    finally:
        run.kill()
        run.wait()
        if redis_pid and running(redis_pid):  # the failure's leftover, not the next run's
            os.kill(redis_pid, signal.SIGKILL)
