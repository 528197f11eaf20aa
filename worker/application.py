"""The Celery application, configured from :class:`Settings` for the service's guarantees.

Each Celery setting and the failure it closes: docs/queue.md (Celery settings). Besides
consuming, the main process serves the pool's metrics, beats the heartbeat file and logs in the
chosen format (docs/operations.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from celery import Celery
from celery.bin.celery import celery as celery_command

from bridge.logs import LogFormat
from bridge.queue.jobs import LIGHT_QUEUE, wire_settings
from worker import heartbeat, logs, metrics, tasks, temp_dir
from worker.config import Settings

_RESTORE_LOCK_SECONDS = 10


def create_app(settings: Settings) -> Any:
    app = Celery("airlock", broker=settings.broker_url, backend=settings.result_backend)
    app.conf.update(
        **wire_settings(),
        task_default_queue=LIGHT_QUEUE,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_concurrency=settings.concurrency,
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
        },
        result_expires=settings.result_expires,
        broker_connection_retry_on_startup=True,
        # A Redis that is down for minutes, restarting, loading its AOF or full (noeviction
        # refuses writes with OutOfMemoryError, a "channel" error to kombu) must never end a
        # worker: it reconnects with backoff, for as long as it takes, and goes on serving.
        broker_connection_max_retries=None,
        broker_channel_error_retry=True,
        # A worker that lost its broker connection cannot acknowledge what it runs; the jobs
        # are redelivered elsewhere, so finishing them here would only duplicate work.
        worker_cancel_long_running_tasks_on_connection_loss=True,
    )
    tasks.register(app, settings)
    temp_dir.install()
    metrics.install(app, settings)
    app.steps["worker"].add(heartbeat.step(settings))
    logs.install(settings.log_format or LogFormat.PLAIN)
    return app


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
