"""The Celery application, configured from :class:`Settings` for the service's guarantees.

Each Celery setting and the failure it closes: docs/queue.md (Celery settings). Besides
consuming, the main process serves the pool's metrics, beats the heartbeat file and logs in the
chosen format (docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from celery import Celery, bootsteps, signals
from celery.bin.celery import celery as celery_command
from redis.exceptions import OutOfMemoryError

from bridge.logs import LogFormat
from bridge.queue.jobs import LIGHT_QUEUE, wire_settings
from bridge.redis_client import (
    RIDE_OUT_SECONDS,
    celery_endpoint,
    names_redis,
    refuse_cluster,
)
from worker import extraction, heartbeat, logs, metrics, tasks, temp_dir
from worker.config import Settings
from worker.lanes import heavy_limit

_RESTORE_LOCK_SECONDS = 10
#: The start-up check for a Redis Cluster waits this long for an answer; no answer, no verdict.
_CLUSTER_CHECK_SECONDS = 5.0
#: How long a new pool process may take to say it is up (Celery's default: 4 s) before its
#: worker kills it: it starts its fork server first, which a loaded machine can take longer to.
_POOL_PROCESS_START_SECONDS = 60
#: Attempts to store an answer while Redis is down or full, at most a second apart (half that
#: on average: Celery's backoff has full jitter).
_RIDE_OUT_RETRIES = int(2 * RIDE_OUT_SECONDS)


def pool_size(concurrency: int, queues: Sequence[str]) -> int:
    """The pool processes of a worker that runs ``concurrency`` jobs of a core each: one more
    when it consumes the light queue beside heavy ones, so light jobs keep a lane of their own
    (worker/lanes.py) and heavy work keeps every core."""
    return concurrency + 1 if heavy_limit(queues, concurrency + 1) is not None else concurrency


def create_app(settings: Settings) -> Any:
    # A Sentinel URL reaches Celery as kombu's and Celery's own grammar plus transport options.
    broker = celery_endpoint(settings.broker_url)
    backend = celery_endpoint(settings.result_backend)
    app = Celery("airlock", broker=broker.url, backend=backend.url)
    app.conf.update(
        **wire_settings(),
        task_default_queue=LIGHT_QUEUE,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_concurrency=pool_size(settings.concurrency, settings.queues),
        worker_proc_alive_timeout=_POOL_PROCESS_START_SECONDS,
        task_soft_time_limit=settings.soft_time_limit,
        task_time_limit=settings.hard_time_limit,
        broker_transport_options={
            "visibility_timeout": settings.visibility_timeout,
            # kombu sweeps for expired unacknowledged jobs every interval x throttle seconds
            # (100 s by default); a throttle of 1 makes the interval the one control, so a
            # lost worker's job is back after at most visibility timeout + restore interval.
            "unacked_restore_interval": settings.restore_interval,
            "unacked_restore_throttle": 1,
            # The sweep runs under a Redis lock that expires on its own; a worker killed while
            # holding it (kombu's default expiry: 300 s) stopped every restore for five minutes,
            # and the jobs of the workers killed meanwhile outwaited their callers' deadlines.
            # A sweep takes well under a second; ten seconds is the longest stall a kill causes.
            "unacked_mutex_expire": _RESTORE_LOCK_SECONDS,
            **broker.transport_options,
        },
        result_backend_transport_options=backend.transport_options,
        result_expires=settings.result_expires,
        # What a job publishes (an OCR hand-off, a document's pages, a retry) rides out Redis
        # restarting as its answer does: a hand-off that failed then failed the document.
        task_publish_retry_policy={
            "max_retries": _RIDE_OUT_RETRIES,
            "interval_start": 0,
            "interval_step": 0.2,
            "interval_max": 1,
        },
        broker_connection_retry_on_startup=True,
        # A Redis that is down for minutes, restarting, loading its AOF or full (noeviction
        # refuses writes with OutOfMemoryError, a "channel" error to kombu) must never end a
        # worker: it reconnects with backoff, for as long as it takes, and goes on serving.
        broker_connection_max_retries=None,
        broker_channel_error_retry=True,
        # A job running when Redis goes away runs on and stores its answer once Redis is back.
        # Celery's cancel-on-connection-loss first writes the cancel to the result backend (the
        # Redis that just died), fails, and the job then takes the revoked path, which
        # acknowledges its message: every job running at a Redis crash was lost that way.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        # Celery's consumer, closing a lost connection without a restore that crashed workers
        # under load and would run the jobs still running a second time (worker/consumer.py).
        worker_consumer="worker.consumer:Consumer",
    )
    tasks.register(app, settings)
    signals.worker_process_init.connect(_riding_out(app), weak=False)
    signals.worker_process_init.connect(_starting_sandbox(settings), weak=False)
    temp_dir.install()
    metrics.install(app, settings)
    app.steps["worker"].add(_refusing_cluster(settings))
    app.steps["worker"].add(heartbeat.step(settings))
    logs.install(settings.log_format or LogFormat.PLAIN)
    return app


def _riding_out(app: Any) -> Callable[..., None]:
    """Make a pool process's result backend ride out Redis going away or filling up.

    A job's answer is stored by the pool process that ran it: failing the store when Redis is
    restarting or full would lose an answer already made. Only pool processes wait like this:
    the main process's event loop must keep turning (and beating) while Redis is away.
    """

    def ride_out(**_: object) -> None:
        backend = app.backend
        backend.always_retry = True
        backend.max_retries = _RIDE_OUT_RETRIES
        backend.max_sleep_between_retries_ms = 1000
        backend.connection_errors = (*backend.connection_errors, OutOfMemoryError)

    return ride_out


def _refusing_cluster(settings: Settings) -> type[Any]:
    """A worker bootstep that stops the worker at start when its Redis is a Cluster node.

    A cluster URL is refused with the settings; a node given as ``redis://`` is only known by
    asking it. Celery's Redis transport cannot run on a cluster (celery#2852): its queues and
    unacked hash would be spread over slots, and jobs would fail one by one instead.
    """

    class RefuseClusterStep(bootsteps.StartStopStep):  # type: ignore[misc]
        def start(self, worker: Any) -> None:
            urls = {settings.result_backend}
            if names_redis(settings.broker_url):
                urls.add(settings.broker_url)
            for url in sorted(urls):
                refuse_cluster(url, _CLUSTER_CHECK_SECONDS)

    return RefuseClusterStep


def _starting_sandbox(settings: Settings) -> Callable[..., None]:
    def start(**_: object) -> None:
        extraction.start_sandbox(settings)

    return start


def run_worker(settings: Settings, celery_args: Sequence[str]) -> int:
    """``celery worker`` on the airlock app, consuming the configured queues by default.

    Arguments after ``airlock worker`` go to Celery unchanged; a ``-Q`` among them overrides
    the configured queues, as a later option does on Celery's own command line. Logs are JSON
    unless ``AIRLOCK_LOG_FORMAT`` says otherwise: this is how deployments run workers. The level
    is INFO unless a ``-l`` says otherwise: at Celery's own default (WARNING) the line each
    finished task writes, the one operators follow a request by, would never be written.
    """
    app = create_app(replace(settings, log_format=settings.log_format or LogFormat.JSON))
    # Celery's own command, run as ``app.start`` runs it but keeping what it returns: both
    # ``worker_main`` and ``app.start`` drop the worker's exit code, and a worker stopped by an
    # unrecoverable error must exit non-zero so a supervisor restarts it.
    # No gossip or mingle: airlock's workers coordinate through Redis keys (deliveries,
    # liveness), never through each other's events. With gossip, a worker resumed after a
    # SIGSTOP (or a paused VM) made every other worker log "clocks are out of sync" about
    # heartbeats that were merely late; mingle only delays start-up asking for neighbours.
    arguments = [
        "worker",
        "--queues",
        ",".join(settings.queues),
        "--loglevel",
        "INFO",
        "--without-gossip",
        "--without-mingle",
    ]
    celery_command.params[0].default = app
    try:
        code = celery_command.main(args=[*arguments, *celery_args], standalone_mode=False)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    finally:
        celery_command.params[0].default = None
    return code if isinstance(code, int) else 0
