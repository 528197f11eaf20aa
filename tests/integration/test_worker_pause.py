"""A worker paused and resumed (SIGSTOP, a frozen VM) is not mistaken for a clock problem.

Started as the deployments start them (``airlock worker``, none of the suite's Celery flags),
two workers share a broker; one is stopped for longer than Celery's 16-second heartbeat drift
allowance and then resumed. With gossip on, the other logged "Substantial drift ... may mean
clocks are out of sync" about heartbeats that were only late; airlock's workers do not gossip.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.integration.conftest import WorkerFactory

pytestmark = [pytest.mark.integration, pytest.mark.redis, pytest.mark.slow]

_PAUSE_SECONDS = 20.0  # over celery.events.state.HEARTBEAT_DRIFT_MAX (16 s)


def test_a_paused_worker_makes_no_clock_drift_warning(start_worker: WorkerFactory) -> None:
    steady = start_worker(via_cli=True, without=())
    paused = start_worker(via_cli=True, without=())
    os.kill(paused.process.pid, signal.SIGSTOP)
    try:
        time.sleep(_PAUSE_SECONDS)
    finally:
        os.kill(paused.process.pid, signal.SIGCONT)
    time.sleep(5)  # the resumed worker's late heartbeats go out now
    for worker in (steady, paused):
        assert worker.process.poll() is None, worker.log()[-2000:]
        assert "out of sync" not in worker.log()
