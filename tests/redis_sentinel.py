"""A primary, a replica and three ``redis-sentinel`` processes the test suite starts, owns and
stops: a Sentinel deployment on free loopback ports, each node in its own directory.

Like tests/redis_server.py, nothing here touches a Redis or a Sentinel someone else runs: every
port is a free one, every file is under the test's directory, and a test may ``kill -9`` any
node. The Sentinels decide failovers quickly (a node is down after ``down_after_ms``), so a
test waits seconds for a promotion, not the 30 s Sentinel's defaults would take.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from redis import Redis, RedisError

from tests import redis_server
from tests.metrics_scrape import free_port
from tests.redis_server import RedisServer

REDIS_SENTINEL = shutil.which("redis-sentinel") or "/usr/bin/redis-sentinel"
MASTER_NAME = "airlock"
_START_SECONDS = 20.0
#: Sentinels agree on a failover when two of the three see the primary down.
_QUORUM = 2


class SentinelServer:
    """One ``redis-sentinel`` on 127.0.0.1:``port`` watching the master ``MASTER_NAME``.

    Sentinel rewrites its configuration file as it learns the deployment (replicas, peers,
    epochs), so the file is written once, at the first start, and kept across restarts.
    """

    def __init__(
        self,
        directory: Path,
        primary: RedisServer,
        *,
        down_after_ms: int,
        failover_timeout_ms: int,
        extra: Sequence[str] = (),
        login: tuple[str, str] | None = None,
    ) -> None:
        """``extra``: more lines of the configuration (users, the Sentinels' logins to the
        nodes and to each other); ``login``: how the harness itself logs in to it."""
        self.directory = directory
        self.port = free_port()
        self.login = login
        self.process: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)
        self.config = directory / "sentinel.conf"
        self.config.write_text(
            "\n".join(
                [
                    f"port {self.port}",
                    "bind 127.0.0.1",
                    "daemonize no",
                    f'logfile "{directory / "sentinel.log"}"',
                    f'dir "{directory}"',
                    f"sentinel monitor {MASTER_NAME} 127.0.0.1 {primary.port} {_QUORUM}",
                    f"sentinel down-after-milliseconds {MASTER_NAME} {down_after_ms}",
                    f"sentinel failover-timeout {MASTER_NAME} {failover_timeout_ms}",
                    f"sentinel parallel-syncs {MASTER_NAME} 1",
                    *extra,
                    "",
                ]
            )
        )

    def client(self) -> Redis:
        user, password = self.login or (None, None)
        return Redis(port=self.port, username=user, password=password, socket_timeout=5)

    def start(self) -> None:
        if not redis_server.permitted:
            raise RuntimeError("only a test marked @pytest.mark.redis may start a redis-sentinel")
        self.process = subprocess.Popen(
            [REDIS_SENTINEL, str(self.config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + _START_SECONDS
        with contextlib.closing(self.client()) as client:
            while time.monotonic() < deadline and self.process.poll() is None:
                with contextlib.suppress(RedisError, OSError):
                    if client.ping():
                        return
                time.sleep(0.02)
        log = (self.directory / "sentinel.log").read_text(errors="replace")
        self.stop()
        raise RuntimeError(f"redis-sentinel on port {self.port} did not start:\n{log[-2000:]}")

    def master_address(self) -> tuple[str, int] | None:
        """Where this Sentinel says the master is (``SENTINEL get-master-addr-by-name``)."""
        with contextlib.closing(self.client()) as client:
            reply = client.sentinel_get_master_addr_by_name(MASTER_NAME)
        if not isinstance(reply, tuple | list):
            return None
        host, port = reply
        return (host.decode() if isinstance(host, bytes) else str(host), int(port))

    def master_state(self) -> dict[str, Any]:
        with contextlib.closing(self.client()) as client:
            state = client.sentinel_master(MASTER_NAME)
        assert isinstance(state, dict)
        return state

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)


class SentinelDeployment:
    """A primary, a replica of it, and three Sentinels watching them, all on loopback.

    ``node_args`` go to both Redis nodes (users, ``masteruser``/``masterauth``: after a
    failover either may be the other's replica), ``sentinel_lines`` to every Sentinel.
    """

    def __init__(
        self,
        directory: Path,
        *,
        down_after_ms: int = 1500,
        failover_timeout_ms: int = 10_000,
        node_args: Sequence[str] = (),
        node_login: tuple[str, str] | None = None,
        sentinel_lines: Sequence[str] = (),
        sentinel_login: tuple[str, str] | None = None,
    ) -> None:
        self.primary = RedisServer(directory / "primary", None, *node_args, login=node_login)
        self.replica = RedisServer(
            directory / "replica",
            None,
            *node_args,
            "--replicaof", "127.0.0.1", str(self.primary.port),
            login=node_login,
        )  # fmt: skip
        self.sentinels = [
            SentinelServer(
                directory / f"sentinel{number}",
                self.primary,
                down_after_ms=down_after_ms,
                failover_timeout_ms=failover_timeout_ms,
                extra=sentinel_lines,
                login=sentinel_login,
            )
            for number in range(3)
        ]

    @property
    def nodes(self) -> list[RedisServer]:
        return [self.primary, self.replica]

    def url(self, login: tuple[str, str] | None = None, db: int = 0) -> str:
        """The Sentinel URL airlock is configured with: every Sentinel, the master's name, and
        ``login`` for the master (and, being the same, for the Sentinels)."""
        user, password = login or ("", "")
        credentials = f"{user}:{password}@" if password else ""
        addresses = ";".join(
            f"sentinel://{credentials}127.0.0.1:{sentinel.port}/{db}" for sentinel in self.sentinels
        )
        return f"{addresses}?master_name={MASTER_NAME}"

    def start(self, timeout: float = 60.0) -> None:
        """Start every node and return once the replica is in sync and each Sentinel knows the
        replica and both other Sentinels: before that, a failover could not happen."""
        self.primary.start()
        self.replica.start()
        self._wait(lambda: self._replica_in_sync(self.replica), timeout, "the replica's sync")
        for sentinel in self.sentinels:
            sentinel.start()
        self._wait(self._sentinels_see_everyone, timeout, "the Sentinels to find each other")

    def master(self) -> RedisServer:
        """The node the Sentinels name as master now."""
        (address,) = {sentinel.master_address() for sentinel in self.sentinels}
        (node,) = [node for node in self.nodes if address == ("127.0.0.1", node.port)]
        return node

    def wait_for_promotion(self, old: RedisServer, timeout: float) -> RedisServer:
        """Wait until every Sentinel names a master other than ``old`` and that node says it is
        one; return it."""

        def promoted() -> bool:
            addresses = {sentinel.master_address() for sentinel in self.sentinels}
            if len(addresses) != 1 or addresses == {("127.0.0.1", old.port)}:
                return False
            return self._role(self.master()) == "master"

        self._wait(promoted, timeout, "the Sentinels to promote the replica")
        return self.master()

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        for node in self.nodes:
            node.stop()

    def wait_for_replica(self, node: RedisServer, timeout: float) -> None:
        """Wait until ``node`` replicates the master in sync and every Sentinel counts it as a
        live replica again: a node back from a kill is ready to be promoted."""

        def replicating() -> bool:
            return self._replica_in_sync(node) and self._sentinels_see_everyone()

        self._wait(replicating, timeout, f"the node on port {node.port} to replicate again")

    def _sentinels_see_everyone(self) -> bool:
        """Each Sentinel knows both other Sentinels and every node but the master as a live
        replica in sync."""
        try:
            master = self.master()
            replicas = {("127.0.0.1", node.port) for node in self.nodes if node is not master}
            for sentinel in self.sentinels:
                if int(sentinel.master_state()["num-other-sentinels"]) != len(self.sentinels) - 1:
                    return False
                with contextlib.closing(sentinel.client()) as client:
                    known = client.sentinel_slaves(MASTER_NAME)
                live = {
                    (str(replica["ip"]), int(replica["port"]))
                    for replica in known
                    if not {"s_down", "o_down", "disconnected"} & set(replica["flags"].split(","))
                    and replica.get("master-link-status") == "ok"
                }
                if not replicas <= live:
                    return False
        except (RedisError, ValueError):  # ValueError: the Sentinels disagree on the master
            return False
        return True

    @staticmethod
    def _role(node: RedisServer) -> str | None:
        try:
            with contextlib.closing(node.client()) as client:
                return str(client.info("replication")["role"])
        except RedisError:
            return None

    @staticmethod
    def _replica_in_sync(node: RedisServer) -> bool:
        try:
            with contextlib.closing(node.client()) as client:
                return client.info("replication").get("master_link_status") == "up"
        except RedisError:
            return False

    @staticmethod
    def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
            time.sleep(0.05)
