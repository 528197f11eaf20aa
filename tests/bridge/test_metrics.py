"""The shared Prometheus endpoint and the queue-depth collector (bridge/metrics.py)."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis import Redis

from bridge.metrics import QueueDepthCollector, metrics_port, serve_metrics, start_endpoint
from tests.metrics_scrape import scrape
from tests.redis_server import SUITE_REDIS_URL as REDIS_URL

UNREACHABLE = "redis://127.0.0.1:1/0"  # nothing listens on port 1


@pytest.fixture
def queues(redis: Redis) -> Iterator[tuple[str, str]]:
    names = (f"test.queue.{uuid.uuid4().hex}", f"test.queue.{uuid.uuid4().hex}")
    yield names
    redis.delete(*names)


@pytest.mark.integration
@pytest.mark.redis
def test_the_queue_depth_is_each_list_length_at_scrape_time(
    redis: Redis, queues: tuple[str, str]
) -> None:
    first, second = queues
    redis.rpush(first, b"a", b"b", b"c")
    collector = QueueDepthCollector(REDIS_URL, queues)
    endpoint = start_endpoint(0, collector, addr="127.0.0.1")
    try:
        scraped = scrape(endpoint.port)
        assert scraped[("airlock_queue_depth", frozenset({("queue", first)}))] == 3
        assert scraped[("airlock_queue_depth", frozenset({("queue", second)}))] == 0
        assert scraped[("airlock_queue_depth_errors_total", frozenset())] == 0
    finally:
        endpoint.close()
        collector.close()


def test_an_unreachable_redis_leaves_the_depth_out_and_counts_the_error() -> None:
    collector = QueueDepthCollector(UNREACHABLE, ("airlock.light",))
    families = {family.name: family for family in collector.collect()}
    assert "airlock_queue_depth" not in families
    [errors] = families["airlock_queue_depth_errors"].samples
    assert errors.value == 1
    collector.close()


def test_the_endpoint_sums_what_every_process_wrote_to_the_directory(tmp_path: Path) -> None:
    """Two processes stand in for pool processes: each writes its own file; one scrape sums."""
    program = (
        "from prometheus_client import Counter\n"
        "Counter('airlock_tasks', 'd', ['kind', 'outcome']).labels('text', 'admitted').inc(2)\n"
    )
    for _ in range(2):
        subprocess.run(
            [sys.executable, "-c", program],
            env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)},
            check=True,
            timeout=60,
        )
    assert len(list(tmp_path.glob("counter_*.db"))) == 2
    endpoint = start_endpoint(0, multiprocess_dir=str(tmp_path), addr="127.0.0.1")
    try:
        key = ("airlock_tasks_total", frozenset({("kind", "text"), ("outcome", "admitted")}))
        assert scrape(endpoint.port)[key] == 4
    finally:
        endpoint.close()


@pytest.mark.parametrize(
    ("raw", "port"), [("", 9808), ("0", 0), ("9809", 9809), (" 65535 ", 65535)]
)
def test_the_metrics_port(raw: str, port: int) -> None:
    assert metrics_port({"AIRLOCK_METRICS_PORT": raw}, 9808) == port


def test_a_taken_port_costs_the_metrics_not_the_process(caplog: pytest.LogCaptureFixture) -> None:
    """A worker and the bridge on one host both defaulted to 9808, and the bridge exited."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # where the endpoint binds by default
        taken.listen()
        port = taken.getsockname()[1]
        with caplog.at_level(logging.ERROR, logger="bridge.metrics"):
            assert serve_metrics(port) is None
    # The operator is told where, why, and which variables move it.
    assert (
        f"metrics endpoint not started on 127.0.0.1 port {port}: Address already in use; set "
        "AIRLOCK_METRICS_PORT to a free port (0: no endpoint) or AIRLOCK_METRICS_HOST"
    ) in caplog.text
    endpoint = serve_metrics(port)  # free again
    assert endpoint is not None
    try:
        assert endpoint.port == port
        assert endpoint.server.server_address[0] == "127.0.0.1"  # not every interface
    finally:
        endpoint.close()
