"""A Redis Cluster node is refused at start, by the workers, the bridge and ``gather``, with a
message that says why: Celery's Redis transport cannot run on a cluster (celery#2852). A
cluster URL scheme is refused with the settings (tests/worker/test_config.py); here the node is
given as a plain ``redis://`` one, which only asking it reveals (``cluster_enabled:1``)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.knowledge.errors import BridgeContractError
from bridge.queue.celery_queue import CeleryQueue
from tests.integration.conftest import AIRLOCK, worker_env
from tests.metrics_scrape import free_port
from tests.redis_server import RedisServer

pytestmark = [pytest.mark.integration, pytest.mark.redis]

_EXIT_SECONDS = 60.0


@pytest.fixture
def cluster_node(tmp_path: Path) -> Iterator[RedisServer]:
    """A real ``redis-server`` in cluster mode (a node of a cluster yet to be formed)."""
    # Its cluster bus on a free port of its own (by default it is the Redis port + 10,000).
    bus = str(free_port())
    server = RedisServer(
        tmp_path / "cluster", None, "--cluster-enabled", "yes", "--cluster-port", bus
    )
    server.start()
    yield server
    server.stop()


def _run(command: str, url: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = worker_env(url, tmp_path, {"AIRLOCK_LOG_FORMAT": "plain"})
    return subprocess.run(
        [str(AIRLOCK), command],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=_EXIT_SECONDS,
        check=False,
    )


def test_gather_refuses_a_cluster_node(cluster_node: RedisServer) -> None:
    with pytest.raises(BridgeContractError, match=r"cluster mode.*celery#2852"):
        CeleryQueue(cluster_node.url(), cluster_node.url())


def test_the_bridge_refuses_to_start_on_a_cluster_node(
    cluster_node: RedisServer, tmp_path: Path
) -> None:
    bridge = _run("bridge", cluster_node.url(), tmp_path)
    assert bridge.returncode == 2, bridge.stderr
    assert "cluster mode" in bridge.stderr and "celery#2852" in bridge.stderr


def test_a_worker_refuses_to_start_on_a_cluster_node(
    cluster_node: RedisServer, tmp_path: Path
) -> None:
    """It exits non-zero (a supervisor restarts it, and it says why again) instead of serving
    jobs that would fail one by one."""
    worker = _run("worker", cluster_node.url(), tmp_path)
    assert worker.returncode != 0
    assert "cluster mode" in worker.stdout + worker.stderr
    assert "ready." not in worker.stdout + worker.stderr
