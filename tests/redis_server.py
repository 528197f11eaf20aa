"""A ``redis-server`` the test suite starts, owns and stops: never a Redis someone else runs.

Other test runs and services share this machine; a suite that flushed a database of the Redis
on 6379 could erase their data, and one that shared it could read their keys. Each server here
listens on a free loopback port and keeps its files (AOF included) in its own directory, so a
test may kill it with SIGKILL, restart it from its AOF, or fill it to ``maxmemory`` without
touching anything else.
"""

from __future__ import annotations

import contextlib
import inspect
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from redis import Redis, RedisError

from tests.metrics_scrape import free_port

#: The port a deployment's Redis listens on (redis-py's default), for tests that read the
#: deployment manifests; no test connects to it.
DEPLOYED_REDIS_PORT: int = inspect.signature(Redis).parameters["port"].default

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
_START_SECONDS = 20.0
#: Under pytest, tests/conftest.py keeps this False except while a test marked ``redis`` runs:
#: no other test may start a server, or the offline run (``-m "not integration"``) would find
#: it missing. Outside pytest (bench/) a server may be started.
permitted = True


class RedisServer:
    """One ``redis-server`` process on 127.0.0.1:``port`` with its data in ``directory``.

    ``appendfsync everysec`` is what the deployments ship (docs/operations.md), so a kill -9
    here loses at most what production would.
    """

    def __init__(
        self,
        directory: Path,
        port: int | None = None,
        *extra: str,
        login: tuple[str, str] | None = None,
    ) -> None:
        """``login`` (user, password): how the harness itself authenticates, for a server whose
        ``extra`` configuration disables the default user."""
        self.directory = directory
        self.port = port or free_port()
        self.extra: Sequence[str] = extra
        self.login = login
        self.process: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)

    def url(self, db: int = 0, login: tuple[str, str] | None = None) -> str:
        """The server's URL, with ``login`` or the harness's own credentials if it has any."""
        user, password = login or self.login or ("", "")
        credentials = f"{user}:{password}@" if password else ""
        return f"redis://{credentials}127.0.0.1:{self.port}/{db}"

    def client(self, db: int = 0) -> Redis:
        return Redis.from_url(self.url(db))

    @property
    def log_path(self) -> Path:
        return self.directory / "redis.log"

    def start(self) -> None:
        """Start (or restart, loading the AOF) and return once it answers PING."""
        if not permitted:
            raise RuntimeError("only a test marked @pytest.mark.redis may start a redis-server")
        command = [
            REDIS_SERVER,
            "--bind", "127.0.0.1", "--port", str(self.port),
            "--dir", str(self.directory), "--logfile", str(self.log_path),
            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
            "--daemonize", "no", "--protected-mode", "yes",
            *self.extra,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True
        )
        deadline = time.monotonic() + _START_SECONDS
        client = self.client()
        try:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    break
                with contextlib.suppress(RedisError, OSError):
                    if client.ping():
                        return
                time.sleep(0.02)
        finally:
            client.close()
        log = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        self.stop()
        raise RuntimeError(f"redis-server on port {self.port} did not start:\n{log[-2000:]}")

    def kill(self) -> None:
        """``kill -9``: what a crash or the OOM killer does; the AOF keeps what was fsynced."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.kill()


#: The suite's own server listens here. Chosen when the suite is collected, because modules
#: build their settings from the URL at import; the ``suite_redis`` fixture starts it.
SUITE_PORT = free_port()
SUITE_REDIS_URL = f"redis://127.0.0.1:{SUITE_PORT}/0"
