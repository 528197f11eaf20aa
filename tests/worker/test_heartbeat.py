"""The announcer thread never leaves a pool process a lock it held.

A worker's main process forks its pool processes while the announcer thread runs. A fork made
mid-announcement once left the pool process holding the import lock of a module the thread
was importing (getaddrinfo's idna codec): its first Redis command hung, and every job sent to
it waited out its deadline (tests/integration saw it as a job received and never run). Here
the announcement is held in flight by a real Redis stopped with SIGSTOP, and a fork is made
meanwhile.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from redis import Redis

from bridge.redis_client import redis_client
from tests.redis_server import RedisServer
from worker import heartbeat

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def test_a_fork_waits_for_the_announcement_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()
    assert server.process is not None
    finished = threading.Event()
    real_announce = heartbeat.announce

    def announce(redis: Redis, *arguments: object) -> None:
        real_announce(redis, *arguments)  # type: ignore[arg-type]
        finished.set()

    monkeypatch.setattr(heartbeat, "announce", announce)
    announcer = heartbeat._Announcer(
        redis_client(server.url(), timeout=1.0), "node", ["airlock.light"], 30, frozenset
    )
    try:
        server.process.send_signal(signal.SIGSTOP)  # connects, then no reply: one timeout
        announcer.start()
        deadline = time.monotonic() + 10
        while not heartbeat._NO_FORK_MID_ANNOUNCEMENT.locked():
            assert time.monotonic() < deadline, "the announcer never announced"
            time.sleep(0.001)
        finished.clear()
        pid = os.fork()
        if pid == 0:  # the child: nothing of the announcer may be held here
            os._exit(1 if heartbeat._NO_FORK_MID_ANNOUNCEMENT.locked() else 0)
        assert finished.is_set(), "the fork went ahead mid-announcement"
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        server.process.send_signal(signal.SIGCONT)
        announcer.stop()
        server.stop()
