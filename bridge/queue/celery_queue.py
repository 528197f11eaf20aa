"""The ``ExtractionQueue`` over Celery and Redis: publish jobs, collect answers, withdraw.

Answers are read from result channels subscribed before publishing, with an MGET sweep when
quiet; stragglers are revoked and lost jobs republished (reconcile.py). Nothing read here is
trusted: it goes to envelope.py. The whole path: docs/queue.md.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Celery
from celery.backends.base import KeyValueStoreBackend
from kombu.exceptions import KombuError
from redis import Redis, RedisError
from redis.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bridge.queue.admission import DEFAULT_MAX_QUEUED, Admission, admit
from bridge.queue.claim_check import store_payloads
from bridge.queue.envelope import StoredAnswer, read_progress, read_stored
from bridge.queue.jobs import QUEUES, TASK_NAME, queue_for, wire_settings, withdrawal_key
from bridge.queue.publishing import Message, send
from bridge.queue.reconcile import Reconciler
from bridge.queue.source import NotQueued, QueuedJob, QueueFull, QueueUnavailable
from bridge.redis_client import celery_endpoint, names_redis, redis_client, refuse_cluster

_log = logging.getLogger(__name__)

#: How long the result channel may stay quiet before the client looks at the keys directly.
_SWEEP_SECONDS = 1.0
#: How often a call that can be withdrawn looks whether it was, while it waits for answers.
_WITHDRAW_TICK = 0.1
#: How long a withdrawal mark outlives its call's deadline: a job cannot run past the deadline
#: (its message expires, its child is killed), so the mark is read by nobody after this.
_MARK_MARGIN_SECONDS = 60
_CONNECT_SECONDS = 5.0
#: Result-channel connections kept for later calls: as many as calls usually run at once.
_IDLE_SUBSCRIPTIONS = 8
#: How long a finished call's channels may take to be unsubscribed before its connection is
#: dropped instead of kept.
_UNSUBSCRIBE_SECONDS = 1.0
#: How long a result connection may stay idle and still be used again.
_IDLE_SECONDS = 30.0
#: How often a waiting caller looks for jobs the broker lost; one is sent again after two
#: looks missed it, so a lost job costs about twice this, never the caller's deadline.
RECONCILE_SECONDS = 2.0
#: The pauses between tries to reach a Redis that went away while a call waits.
_FIRST_PAUSE_SECONDS = 0.1
_LONGEST_PAUSE_SECONDS = 1.0
_INFRASTRUCTURE_ERRORS = (RedisError, KombuError, OSError)
#: Failures to reach Redis at all: their text names the address and errno, nothing sent.
_UNREACHED = (RedisConnectionError, RedisTimeoutError, OSError)


def _new_task_id() -> str:
    return uuid.uuid4().hex


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    return chain


def unavailable(exc: BaseException) -> QueueUnavailable:
    """The caller's exception for an infrastructure failure, never quoting what was sent.

    A failed pipeline names its commands with their arguments in the error text (a payload's
    first bytes included), so only a connection failure's own text (host, port, errno) is
    quoted; any other error is named by its type.
    """
    chain = _causes(exc)
    if any(isinstance(cause, OutOfMemoryError) for cause in chain):
        return QueueFull()
    reached = next((cause for cause in chain if isinstance(cause, _UNREACHED)), None)
    detail = type(exc).__name__ if reached is None else f"{type(reached).__name__}: {reached}"
    return QueueUnavailable(f"the extraction queue is unreachable ({detail})")


def result_key(task_id: str) -> str:
    """Where Celery's Redis backend stores a task's state, and the channel it publishes on."""
    return f"{KeyValueStoreBackend.task_keyprefix}{task_id}"


class _Subscriptions:
    """Result-channel connections kept idle between calls, each unsubscribed from everything.

    Opening one per call (connect, HELLO, the client's handshake) and dropping the command
    connection it borrowed cost a small job's round trip over a millisecond, and left a TCP
    connection in TIME_WAIT per call. A connection is kept only once Redis confirmed every
    channel gone, so no late answer of one call reaches the next. One found readable while
    idle (Redis closed it: a restart, a Sentinel's demotion) is dropped, and so is one idle
    for longer than :data:`_IDLE_SECONDS`: a connection a NAT forgot says nothing, and a
    subscribe sent on it would wait out its call's deadline.
    """

    def __init__(self, redis: Redis, keep: int) -> None:
        self._redis = redis
        self._keep = keep
        self._idle: list[tuple[float, PubSub]] = []
        self._lock = threading.Lock()

    def take(self) -> PubSub:
        with self._lock:
            while self._idle:
                since, pubsub = self._idle.pop()
                if time.monotonic() - since < _IDLE_SECONDS and _idle_and_clean(pubsub):
                    return pubsub
                _drop(pubsub)
        return PubSub(self._redis.connection_pool)

    def give_back(self, pubsub: PubSub) -> None:
        try:
            _unsubscribe_all(pubsub)
        except _INFRASTRUCTURE_ERRORS:
            _drop(pubsub)
            return
        with self._lock:
            if len(self._idle) < self._keep:
                self._idle.append((time.monotonic(), pubsub))
                return
        _drop(pubsub)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for _, pubsub in idle:
            _drop(pubsub)


def _unsubscribe_all(pubsub: PubSub) -> None:
    """Unsubscribe and read up to Redis's last confirmation, discarding answers before it.

    On the connection itself, not through the PubSub's commands: those reconnect and subscribe
    again after an error before raising, which held a finished call for the 6 s connect timeout
    where it should give up after :data:`_UNSUBSCRIBE_SECONDS`.
    """
    if not pubsub.subscribed:
        return
    connection = pubsub.connection
    if connection is None or _unconnected(connection):
        raise RedisConnectionError("the result connection is closed")
    pubsub.pending_unsubscribe_channels.update(pubsub.channels)
    connection.send_command("UNSUBSCRIBE", check_health=False)
    deadline = time.monotonic() + _UNSUBSCRIBE_SECONDS
    while pubsub.subscribed:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not connection.can_read(timeout=remaining):
            raise RedisTimeoutError("the result channels were not unsubscribed in time")
        reply = connection.read_response(timeout=remaining, push_request=True)
        pubsub.handle_message(reply)


def _idle_and_clean(pubsub: PubSub) -> bool:
    connection = pubsub.connection
    if connection is None:
        return True
    if _unconnected(connection):
        return False
    try:
        return not connection.can_read(timeout=0)
    except _INFRASTRUCTURE_ERRORS:
        return False


def _unconnected(connection: Any) -> bool:
    """Whether the connection lost its socket: any use of it would connect it again."""
    return getattr(connection, "_sock", None) is None


def _drop(pubsub: PubSub) -> None:
    with contextlib.suppress(*_INFRASTRUCTURE_ERRORS):
        pubsub.close()


class _Listener:
    """The result channels of one call's jobs.

    Subscribed (and confirmed) before anything is published, so no answer can precede the
    subscription; subscribed again after Redis came back, when the caller also reads the keys,
    since an answer published while it was away never reached the channel.
    """

    def __init__(self, subscriptions: _Subscriptions) -> None:
        self._subscriptions = subscriptions
        self._pubsub: PubSub | None = None
        self._unconfirmed = 0

    @property
    def listening(self) -> bool:
        return self._pubsub is not None

    def subscribe(self, channels: list[str]) -> None:
        """Send the subscription; :meth:`confirm` waits for it, so other round trips can be
        made meanwhile."""
        self.close()
        self._pubsub = pubsub = self._subscriptions.take()
        pubsub.subscribe(*channels)
        self._unconfirmed = len(channels)

    def confirm(self, deadline: float) -> None:
        pubsub = self._pubsub
        if pubsub is None:
            raise RedisConnectionError("the result channels are not subscribed")
        while self._unconfirmed > 0:
            message = pubsub.get_message(timeout=max(deadline - time.monotonic(), 0.0))
            if message is None:
                if time.monotonic() >= deadline:
                    return  # the sweep after the deadline still reads whatever arrived
                continue
            if message["type"] == "subscribe":
                self._unconfirmed -= 1

    def listen(self, channels: list[str], deadline: float) -> None:
        self.subscribe(channels)
        self.confirm(deadline)

    def next_message(self, timeout: float) -> dict[str, Any] | None:
        if self._pubsub is None:
            raise RedisConnectionError("the result channels are not subscribed")
        message: dict[str, Any] | None = self._pubsub.get_message(timeout=max(timeout, 0.0))
        return message

    def close(self) -> None:
        """Drop the connection: after a failure its state is not known."""
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            _drop(pubsub)

    def release(self) -> None:
        """Hand the connection back for the next call (after the call ended normally)."""
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            self._subscriptions.give_back(pubsub)


class _Outage:
    """The waiting call's time without Redis: the last error, and the pause before it tries
    again (doubling up to a second, so a restart costs about a second more than it lasts)."""

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self._pause = _FIRST_PAUSE_SECONDS

    def wait(self, error: BaseException, deadline: float) -> None:
        if self.error is None:
            _log.warning("lost Redis while waiting for answers, trying again: %s", error)
        self.error = error
        time.sleep(max(min(self._pause, deadline - time.monotonic()), 0.0))
        self._pause = min(self._pause * 2, _LONGEST_PAUSE_SECONDS)

    def end(self) -> None:
        if self.error is not None:
            _log.warning("Redis is back; went on waiting for answers")
        self.error = None
        self._pause = _FIRST_PAUSE_SECONDS


class CeleryQueue:
    """Jobs to ``celery worker`` processes through a broker; answers and payloads in Redis."""

    def __init__(
        self,
        broker_url: str,
        result_backend: str,
        *,
        payload_ttl: int = 3600,
        new_task_id: Callable[[], str] = _new_task_id,
        reconcile_seconds: float = RECONCILE_SECONDS,
        max_queued: int = DEFAULT_MAX_QUEUED,
        require_consumers: bool = True,
        on_answer: Callable[[], None] | None = None,
        on_progress: Callable[[int, int], None] | None = None,
        withdrawn: Callable[[], bool] | None = None,
    ) -> None:
        """``max_queued`` bounds each queue (``AIRLOCK_MAX_QUEUED``); with
        ``require_consumers``, a job whose queue no live worker consumes is answered
        ``NoWorkers`` at once (``False`` queues it anyway, for workers that start later).
        ``on_answer`` is called as each job's answer arrives (the CLI's progress counter),
        ``on_progress`` with pages done of total as a running job publishes them.
        ``withdrawn`` is asked while a call waits: once it answers True the call stops
        waiting, its unanswered jobs are revoked (a queued one never runs) and marked
        withdrawn (a running one's sandbox child is killed), and they are left unanswered."""
        self._on_answer = on_answer
        self._on_progress = on_progress
        self._withdrawn = withdrawn
        broker = celery_endpoint(broker_url)
        self._app: Any = Celery("airlock-client", broker=broker.url, set_as_current=False)
        self._app.conf.update(
            **wire_settings(),
            broker_connection_timeout=_CONNECT_SECONDS,
            broker_connection_retry_on_startup=False,
            task_publish_retry_policy={"max_retries": 2, "interval_start": 0.1},
            broker_transport_options=broker.transport_options,
        )
        # A Redis broker (one server or Sentinels' master) is kombu's Redis transport, the one
        # that can lose a popped job: the reconciler and admission read its queues.
        redis_broker = names_redis(broker_url)
        for url in {result_backend, broker_url} if redis_broker else {result_backend}:
            refuse_cluster(url, _CONNECT_SECONDS)
        self._redis = redis_client(result_backend, timeout=_CONNECT_SECONDS + _SWEEP_SECONDS)
        self._subscriptions = _Subscriptions(self._redis, _IDLE_SUBSCRIPTIONS)
        self._broker: Redis | None = (
            redis_client(broker_url, timeout=_CONNECT_SECONDS) if redis_broker else None
        )
        self._payload_ttl = payload_ttl
        self._new_task_id = new_task_id
        self._reconcile_seconds = reconcile_seconds
        self._max_queued = max_queued
        self._require_consumers = require_consumers

    def close(self) -> None:
        self._app.close()
        self._subscriptions.close()
        self._redis.close()
        if self._broker is not None:
            self._broker.close()

    def extract(
        self, jobs: Sequence[QueuedJob], deadline: float
    ) -> list[StoredAnswer | NotQueued | None]:
        admission = None
        try:
            if self._broker is not None:
                admission = admit(
                    self._broker,
                    [queue_for(queued.job.stage) for queued in jobs],
                    self._max_queued,
                    self._require_consumers,
                )
        except _INFRASTRUCTURE_ERRORS as exc:
            raise unavailable(exc) from exc
        verdicts = [None] * len(jobs) if admission is None else admission.verdicts
        admitted = [job for job, verdict in zip(jobs, verdicts, strict=True) if verdict is None]
        answers = iter(self._extract_admitted(admitted, deadline, admission))
        return [next(answers) if verdict is None else verdict for verdict in verdicts]

    def _extract_admitted(
        self, jobs: Sequence[QueuedJob], deadline: float, admission: Admission | None
    ) -> list[StoredAnswer | None]:
        if not jobs:
            self._release(admission)
            return []
        task_ids = [self._new_task_id() for _ in jobs]
        keys = {result_key(task_id): index for index, task_id in enumerate(task_ids)}
        listener = _Listener(self._subscriptions)
        try:
            try:
                listener.subscribe(list(keys))  # confirmed while the payloads are stored
                self._store(jobs)
                listener.confirm(deadline)
                self._publish(jobs, task_ids, deadline)
            finally:
                self._release(admission)
            answers = self._collect(listener, keys, jobs, task_ids, deadline)
        except _INFRASTRUCTURE_ERRORS as exc:
            listener.close()
            raise unavailable(exc) from exc
        finally:
            listener.release()
        unanswered = [i for i, answer in enumerate(answers) if answer is None]
        self._withdraw(task_ids, unanswered, deadline)
        return answers

    def _release(self, admission: Admission | None) -> None:
        """Best effort: room a failure here keeps reserved frees itself within seconds."""
        if admission is None or self._broker is None:
            return
        try:
            admission.release(self._broker)
        except _INFRASTRUCTURE_ERRORS as exc:
            _log.warning("could not release the room this call reserved: %s", exc)

    def _store(self, jobs: Sequence[QueuedJob]) -> None:
        store_payloads(
            self._redis, {queued.job.sha256: queued.payload for queued in jobs}, self._payload_ttl
        )

    def _publish(
        self,
        jobs: Sequence[QueuedJob],
        task_ids: list[str],
        deadline: float,
        call: str | None = None,
    ) -> None:
        """Publish ``jobs`` under ``task_ids``, each with ``call`` (the call's first task id,
        by default the first of ``task_ids``) as its Celery root id: the workers bound how many
        page tasks one call's documents fan out into together, not only one document's."""
        expires = datetime.now(UTC) + timedelta(seconds=max(deadline - time.monotonic(), 0.0))
        root = call or task_ids[0]
        send(
            self._app,
            [
                Message(TASK_NAME, queued.job.to_wire(), task_id, expires, root)
                for queued, task_id in zip(jobs, task_ids, strict=True)
            ],
            give_up_at=deadline,  # a publish after it would be of jobs already expired
        )

    def _collect(
        self,
        listener: _Listener,
        keys: dict[str, int],
        jobs: Sequence[QueuedJob],
        task_ids: list[str],
        deadline: float,
    ) -> list[StoredAnswer | None]:
        """Each job's first final answer, until ``deadline``.

        Redis going away once the jobs are published (a restart, a failover) does not end the
        wait: the jobs are in its AOF or are published again, and the workers store their
        answers once it is back. So the listener reconnects with backoff, reads what was stored
        meanwhile, and the reconciler sends what Redis lost. Only a Redis still unreachable at
        the deadline raises :class:`QueueUnavailable`.
        """
        answers: list[StoredAnswer | None] = [None] * len(jobs)
        pending = dict(keys)
        reconciler = (
            None
            if self._broker is None
            else Reconciler(self._broker, QUEUES, self._reconcile_seconds)
        )
        next_look = time.monotonic() + self._reconcile_seconds
        outage = _Outage()

        def take(key: str, untrusted_raw: object) -> None:
            index = pending.get(key)
            if index is None or not isinstance(untrusted_raw, bytes):
                return
            stored = read_stored(untrusted_raw, jobs[index].job.limits)
            if stored is not None:
                answers[index] = stored
                del pending[key]
                if self._on_answer is not None:
                    self._on_answer()
            elif self._on_progress is not None:
                progress = read_progress(untrusted_raw)
                if progress is not None:
                    self._on_progress(*progress)

        tick = _SWEEP_SECONDS if self._withdrawn is None else _WITHDRAW_TICK
        # A quiet second is swept once, however often a withdrawable call wakes to look.
        heard = time.monotonic()
        while pending and time.monotonic() < deadline and not self._was_withdrawn():
            try:
                if not listener.listening:
                    listener.listen(list(pending), deadline)
                    self._sweep(pending, take)  # answers stored while Redis was away
                message = listener.next_message(min(deadline - time.monotonic(), tick))
                if message is not None:
                    heard = time.monotonic()
                    if message["type"] == "message" and isinstance(message["channel"], bytes):
                        take(message["channel"].decode(), message["data"])
                elif time.monotonic() - heard >= _SWEEP_SECONDS:
                    self._sweep(pending, take)
                    heard = time.monotonic()
                if reconciler is not None and pending and time.monotonic() >= next_look:
                    self._republish_lost(
                        reconciler, pending, take, jobs=jobs, task_ids=task_ids, deadline=deadline
                    )
                    next_look = time.monotonic() + reconciler.interval
                outage.end()
            except _INFRASTRUCTURE_ERRORS as exc:
                listener.close()
                outage.wait(exc, deadline)
        if pending and not self._was_withdrawn():
            try:
                self._sweep(pending, take)
            except _INFRASTRUCTURE_ERRORS as exc:
                raise unavailable(exc) from exc  # still unreachable at the deadline
        return answers

    def _was_withdrawn(self) -> bool:
        return self._withdrawn is not None and self._withdrawn()

    def _republish_lost(
        self,
        reconciler: Reconciler,
        pending: dict[str, int],
        take: Callable[[str, object], None],
        *,
        jobs: Sequence[QueuedJob],
        task_ids: list[str],
        deadline: float,
    ) -> None:
        """Publish again, under its own id, each job no queue and no worker holds any more, and
        put back on its queue each job held only by an unacked entry no live worker holds.

        An answer may have been stored since the caller last looked (a job leaves the unacked
        hash once answered), so the keys are read first: only a job still unanswered is sent,
        its payload stored again first (a Redis that restarted without it lost that too).
        """
        verdict = reconciler.look([task_ids[index] for index in pending.values()])
        if not (verdict.lost or verdict.orphaned):
            return
        ids = {*verdict.lost, *verdict.orphaned.values()}
        self._sweep({result_key(task_id): pending[result_key(task_id)] for task_id in ids}, take)
        again = [
            pending[result_key(task_id)]
            for task_id in verdict.lost
            if result_key(task_id) in pending
        ]
        if again:
            _log.warning("publishing %d jobs again: the broker lost them", len(again))
            self._store([jobs[i] for i in again])
            again_ids = [task_ids[i] for i in again]
            self._publish([jobs[i] for i in again], again_ids, deadline, task_ids[0])
        orphaned = [
            tag for tag, task_id in verdict.orphaned.items() if result_key(task_id) in pending
        ]
        if orphaned:
            self._put_back(orphaned, [verdict.orphaned[tag] for tag in orphaned])
            reconciler.put_back(orphaned)

    def _put_back(self, delivery_tags: list[str], ids: list[str]) -> None:
        """Move unacked entries back to their queues with kombu's own restore, which does
        nothing to an entry a worker acknowledged meanwhile."""
        _log.warning(
            "putting jobs %s back on their queues: no live worker holds them", ", ".join(ids)
        )
        with self._app.connection_for_write() as connection:
            qos = connection.default_channel.qos
            for tag in delivery_tags:
                qos.restore_by_tag(tag)

    def _sweep(self, pending: dict[str, int], take: Callable[[str, object], None]) -> None:
        keys = list(pending)
        for key, untrusted_raw in zip(keys, self._redis.mget(keys), strict=True):
            if untrusted_raw is not None:
                take(key, untrusted_raw)

    def _withdraw(self, task_ids: list[str], unanswered: list[int], deadline: float) -> None:
        """Revoke what was not answered and delete every result this call created; when the
        caller withdrew the call, mark its unanswered jobs so that a worker running one kills
        its child (a revoke never reaches a job already running).

        Best effort: the answers are already in hand, and the expiry on each message and
        the backend's result expiry clean up whatever a failure here leaves behind.
        """
        revoked = [task_ids[index] for index in unanswered]
        # Three steps, each tried whatever became of the others: with the result backend and
        # the broker on two Redis servers, one unreachable must not keep the other's step.
        if revoked and self._was_withdrawn():
            mark_seconds = math.ceil(max(deadline - time.monotonic(), 0)) + _MARK_MARGIN_SECONDS
            try:
                with self._redis.pipeline(transaction=False) as pipe:
                    for task_id in revoked:
                        pipe.set(withdrawal_key(task_id), b"1", ex=mark_seconds)
                    pipe.execute()
            except _INFRASTRUCTURE_ERRORS as exc:
                _log.warning("could not mark jobs %s withdrawn: %s", ", ".join(revoked), exc)
        try:
            if revoked:
                self._app.control.revoke(revoked)
        except _INFRASTRUCTURE_ERRORS as exc:
            _log.warning("could not revoke jobs %s: %s", ", ".join(revoked), exc)
        try:
            self._redis.delete(*(result_key(task_id) for task_id in task_ids))
        except _INFRASTRUCTURE_ERRORS as exc:
            _log.warning("could not delete the results of jobs %s: %s", ", ".join(task_ids), exc)
