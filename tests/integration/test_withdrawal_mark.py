"""The withdrawal mark a worker's job reads: looked for at most once a second and not before the
job has run a second (short jobs spend no command on it), seen for good once set, and a Redis
that does not answer reads as not withdrawn instead of failing the job."""

from __future__ import annotations

import time

import pytest
from redis import Redis

from bridge.queue.jobs import withdrawal_key
from bridge.redis_client import redis_client
from tests.integration.load import wait_until
from tests.redis_server import RedisServer
from worker.withdrawals import LOOK_SECONDS, WithdrawalMark

pytestmark = [pytest.mark.integration, pytest.mark.redis]


class _Counting(Redis):
    """A real client that counts the commands it sends."""

    sent = 0

    def execute_command(self, *args: object, **options: object) -> object:
        _Counting.sent += 1
        return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]


def test_a_job_looks_once_a_second_and_a_seen_mark_stays_seen(own_redis: RedisServer) -> None:
    client = _Counting.from_url(own_redis.url(), socket_timeout=1)
    _Counting.sent = 0
    mark = WithdrawalMark(client, "job-1")
    # Asked every 0.1 s by the sandbox: nothing is sent in the job's first second.
    for _ in range(50):
        assert not mark.is_set()
    assert _Counting.sent == 0
    client.set(withdrawal_key("job-1"), b"1")
    sent = _Counting.sent
    wait_until(mark.is_set, LOOK_SECONDS * 3, "the mark to be seen")
    assert _Counting.sent == sent + 1  # one look found it
    client.delete(withdrawal_key("job-1"))
    sent = _Counting.sent
    time.sleep(LOOK_SECONDS)  # a look would be due now
    assert mark.is_set() and _Counting.sent == sent  # seen for good, not looked for again
    other = WithdrawalMark(client, "job-2", look_now=True)
    assert not other.is_set()
    assert _Counting.sent == sent + 1  # looked at once
    client.close()


def test_a_redis_that_is_gone_reads_as_not_withdrawn(own_redis: RedisServer) -> None:
    url = own_redis.url()
    own_redis.stop()
    mark = WithdrawalMark(redis_client(url, timeout=0.5), "job", look_now=True)
    assert not mark.is_set()


def test_a_job_looks_once_more_before_it_answers(own_redis: RedisServer) -> None:
    """A job withdrawn in the second since its last look would store an answer nobody reads:
    its last word looks again, unless it is younger than one look."""
    client = _Counting.from_url(own_redis.url(), socket_timeout=1)
    _Counting.sent = 0
    mark = WithdrawalMark(client, "job-3")
    assert not mark.is_set_now() and _Counting.sent == 0  # a short job spends nothing
    time.sleep(LOOK_SECONDS)
    assert not mark.is_set() and _Counting.sent == 1
    client.set(withdrawal_key("job-3"), b"1")
    sent = _Counting.sent
    assert not mark.is_set()  # its next look is a second away
    assert mark.is_set_now() and _Counting.sent == sent + 1
    client.close()
