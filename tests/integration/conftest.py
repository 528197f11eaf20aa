"""Real Redis and real ``celery worker`` processes, started per test and always torn down.

Everything runs in a ``redis-server`` the integration tests start empty for themselves
(``tests.redis_server``, a free port, a temp dir); no Redis the suite did not start is touched.
Workers run with the test hooks (``-I tests.integration.worker_hooks``), one pool process
unless a test asks for more, and are stopped (or killed, with their whole process group) at
teardown, whatever the test did to them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from redis import Redis

from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.jobs import QUEUES
from tests.conftest import REPO_ROOT
from tests.redis_server import RedisServer

CELERY = REPO_ROOT / ".venv" / "bin" / "celery"
AIRLOCK = REPO_ROOT / ".venv" / "bin" / "airlock"
PYTHON = REPO_ROOT / ".venv" / "bin" / "python"
_READY_SECONDS = 60.0
_STOP_SECONDS = 15.0

#: Short limits for the tests that kill whole workers, so the visibility timeout can be waited
#: out: every job there takes ~2 s, under the 4 s soft limit; a lost job is visible again after
#: 6 s.
FAST_RECOVERY = {
    "AIRLOCK_SANDBOX_WALL_SECONDS": "3",
    "AIRLOCK_TASK_SOFT_TIME_LIMIT": "4",
    "AIRLOCK_TASK_TIME_LIMIT": "5",
    "AIRLOCK_VISIBILITY_TIMEOUT": "6",
    "AIRLOCK_RESTORE_INTERVAL": "1",
}


@pytest.fixture(scope="session")
def integration_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """The integration tests' own ``redis-server``, apart from the units' (``suite_redis``):
    it starts empty, so nothing the units wrote (queues, consumer keys) is ever seen here and
    nothing needs flushing."""
    server = RedisServer(tmp_path_factory.mktemp("integration-redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_url(integration_redis: RedisServer) -> str:
    return integration_redis.url()


@pytest.fixture
def redis(redis_url: str) -> Iterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def marker_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "markers"
    directory.mkdir()
    return directory


@dataclass
class WorkerProcess:
    """One ``celery worker`` main process and its pool, in a process group of its own."""

    nodename: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = _READY_SECONDS) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if f"{self.nodename} ready." in self.log():
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"worker {self.nodename} did not start:\n{self.log()[-4000:]}")

    def pool_pids(self) -> list[int]:
        """The pool processes: children of the main process running celery's code."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        return [int(pid) for pid in children.read_text().split()]

    def kill_everything(self) -> None:
        """``kill -9`` of the whole worker: the machine it ran on is gone."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(_STOP_SECONDS)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self.kill_everything()
        else:
            # The main process is gone; its pool processes may not be.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)


def worker_env(
    redis_url: str, marker_dir: Path, overrides: Mapping[str, str], source: Path = REPO_ROOT
) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("AIRLOCK_") or key == "AIRLOCK_SANDBOX_REQUIRE"
    }
    env.update(
        AIRLOCK_BROKER_URL=redis_url,
        # No metrics endpoint unless a test asks for one: workers started side by side would
        # all try to bind the default port.
        AIRLOCK_METRICS_PORT="0",
        AIRLOCK_TEST_MARKER_DIR=str(marker_dir),
        # The workers' secret for the result cache's MACs: without one they cache nothing.
        AIRLOCK_RESULT_CACHE_KEY="5e" * 32,
        PYTHONPATH=os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")])),
    )
    env.update(overrides)
    return env


class WorkerFactory:
    """Starts workers against the test database and stops every one of them at teardown."""

    def __init__(self, redis_url: str, marker_dir: Path, log_dir: Path) -> None:
        self.redis_url = redis_url
        self.marker_dir = marker_dir
        self._log_dir = log_dir
        self._started: list[WorkerProcess] = []

    def __call__(
        self,
        queues: Sequence[str] = QUEUES,
        concurrency: int | None = 1,
        env: Mapping[str, str] | None = None,
        wait: bool = True,
        via_cli: bool = False,
        log_level: str | None = "info",
        without: Sequence[str] = ("gossip", "mingle", "heartbeat"),
        release: Path | None = None,
    ) -> WorkerProcess:
        """``celery -A worker worker -Q queues ...``, or ``airlock worker ...`` with ``via_cli``
        (which consumes the configured queues unless told otherwise); ``concurrency=None`` passes
        no ``-c`` (the worker sizes its pool itself, as deployed); ``log_level=None``
        passes no ``-l``; ``without=()`` runs Celery's gossip, mingle and heartbeat, as the
        deployments do; ``release`` runs the worker of another release from its source tree
        (with this environment's packages), as a fleet mid-upgrade has it."""
        name = f"t{uuid.uuid4().hex[:8]}"
        nodename = f"{name}@{socket.gethostname()}"
        log_path = self._log_dir / f"{name}.log"
        program = [str(AIRLOCK), "worker"] if via_cli else [str(CELERY), "-A", "worker", "worker"]
        source = release or REPO_ROOT
        if release is not None:
            program = [str(PYTHON), "-m", "celery", "-A", "worker", "worker"]
        command = [
            *program,
            *([] if via_cli else ["-Q", ",".join(queues)]),
            "--pool", "prefork", *([] if concurrency is None else ["-c", str(concurrency)]),
            *(f"--without-{feature}" for feature in without),
            "-n", nodename,
            "-I", "tests.integration.worker_hooks",
            *(["-l", log_level] if log_level else []),
        ]  # fmt: skip
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                command,
                cwd=source,
                env=worker_env(self.redis_url, self.marker_dir, env or {}, source),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        worker = WorkerProcess(nodename, process, log_path)
        self._started.append(worker)
        if wait:
            worker.wait_ready()
        return worker

    def stop_all(self) -> None:
        for worker in self._started:
            worker.stop()


@pytest.fixture
def start_worker(redis_url: str, marker_dir: Path, tmp_path: Path) -> Iterator[WorkerFactory]:
    """Start a worker: ``start_worker(queues=..., concurrency=1, env={...})``; ready on return."""
    factory = WorkerFactory(redis_url, marker_dir, tmp_path)
    yield factory
    factory.stop_all()


@pytest.fixture(scope="module")
def shared_worker(
    redis_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    """Two pool processes on both queues, for the tests that do not harm their worker."""
    directory = tmp_path_factory.mktemp("shared-worker")
    factory = WorkerFactory(redis_url, directory, directory)
    yield factory(concurrency=2)
    factory.stop_all()


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A ``redis-server`` of this test alone, to kill, restart or fill."""
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_workers(own_redis: RedisServer, tmp_path: Path) -> Iterator[WorkerFactory]:
    """Workers on ``own_redis``, their markers in ``own_workers.marker_dir``."""
    markers = tmp_path / "markers"
    markers.mkdir()
    factory = WorkerFactory(own_redis.url(), markers, tmp_path)
    yield factory
    factory.stop_all()


@pytest.fixture
def client(redis_url: str) -> Iterator[CeleryQueue]:
    queue = CeleryQueue(redis_url, redis_url)
    yield queue
    queue.close()


def wait_until_empty(
    redis: Redis, lists: Sequence[str], hashes: Sequence[str] = (), timeout: float = 30.0
) -> None:
    """Wait until the workers have taken (or discarded) every job: ``lists`` and ``hashes``
    are all empty."""
    deadline = time.monotonic() + timeout
    while any(redis.llen(key) for key in lists) or any(redis.hlen(key) for key in hashes):
        assert time.monotonic() < deadline, f"{[*lists, *hashes]} were not drained"
        time.sleep(0.05)


def wait_for_marker(marker: Path, lines: int = 1, timeout: float = 30.0) -> list[int]:
    """The pids a hooked job recorded, once ``lines`` deliveries have reached the hook."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker.exists():
            pids = [int(line) for line in marker.read_text().split()]
            if len(pids) >= lines:
                return pids
        time.sleep(0.02)
    raise AssertionError(f"no job reached the hook for {marker.name} within {timeout}s")
