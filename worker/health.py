"""What ``airlock health`` means: live is cheap and local, ready goes through the broker.

``--live`` reads only the heartbeat file's age; ``--ready --worker`` pings the node it names and
runs one trivial job through a sandbox built as the worker builds its own. See
docs/operations.md (Health).
"""

from __future__ import annotations

from dataclasses import dataclass

from celery import Celery
from kombu.exceptions import KombuError

from bridge.queue.jobs import wire_settings
from bridge.redis_client import celery_endpoint
from sandbox.errors import SandboxError
from sandbox.runner import SandboxRunner
from worker import heartbeat
from worker.config import Settings


@dataclass(frozen=True)
class Verdict:
    healthy: bool
    detail: str


def live(settings: Settings) -> Verdict:
    beat = heartbeat.read(settings.heartbeat_file)
    if beat is None:
        return Verdict(False, f"no heartbeat at {settings.heartbeat_file}: no worker started here")
    limit = heartbeat.STALE_AFTER_BEATS * settings.heartbeat_seconds
    if beat.age_seconds > limit:
        return Verdict(
            False,
            f"worker {beat.node} last beat {beat.age_seconds:.0f} s ago (limit {limit:g} s): "
            "its main loop is stuck",
        )
    return Verdict(True, f"worker {beat.node} beat {beat.age_seconds:.1f} s ago")


def ready(settings: Settings, worker: bool, timeout: float) -> Verdict:
    """The broker answers within ``timeout``; with ``worker``, so does this container's node."""
    broker = celery_endpoint(settings.broker_url)
    app = Celery("airlock-health", broker=broker.url, set_as_current=False)
    app.conf.update(
        **wire_settings(),
        broker_connection_timeout=timeout,
        broker_connection_retry=False,
        broker_transport_options=broker.transport_options,
    )
    try:
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=0)
            if not worker:
                return Verdict(True, "the broker is reachable")
            beat = heartbeat.read(settings.heartbeat_file)
            if beat is None:
                return Verdict(False, "no worker has started here (no heartbeat file)")
            replies = app.control.ping(
                destination=[beat.node], timeout=timeout, connection=connection
            )
    except (KombuError, OSError) as exc:
        return Verdict(False, f"the broker is unreachable: {type(exc).__name__}: {exc}")
    finally:
        app.close()
    if not any(beat.node in reply for reply in replies):
        return Verdict(False, f"worker {beat.node} did not answer a ping within {timeout:g} s")
    ran = sandbox(settings)
    if not ran.healthy:
        return ran
    return Verdict(True, f"worker {beat.node} answered a ping through the broker; {ran.detail}")


def sandbox(settings: Settings) -> Verdict:
    """Run one plain-text job through the real text parser in a fresh sandbox, with the
    worker's limits and requirement.

    A fresh one, in this process: the probe cannot reach the runners inside the worker's pool
    processes, but it meets what they meet in this container (the required layers, the
    parsers' imports, the scratch directory, the pids and memory limits). About 0.2 s of CPU.
    """
    try:
        with SandboxRunner(
            settings.sandbox,
            warm_children=0,
            require=settings.sandbox_require,
            uid_base=settings.sandbox_uid_base,
        ) as runner:
            runner.run("text", "text/plain", b"airlock readiness probe", settings.parse_limits)
    except SandboxError as exc:
        return Verdict(False, f"the sandbox cannot run a job: {type(exc).__name__}: {exc}")
    return Verdict(True, "the sandbox ran a job")
