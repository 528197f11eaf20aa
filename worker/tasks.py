"""The extract task: one job in, one JSON envelope out.

Order matters. The job is validated before anything uses it (the queue is a trust boundary);
the delivery is counted before the payload is touched, so a payload that kills this process
is counted even though nothing after the kill runs; the payload's hash is checked before it
is parsed; the guards run again inside ``extract_attachment`` because anyone who can publish
can skip the bridge's run of them. Deterministic refusals are answers, never retries; only an
unreachable Redis or an unavailable sandbox is retried, with backoff.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from bridge.attachments import AttachmentRef, Outcome, extract_attachment
from bridge.claim_check import PayloadUnavailable, fetch_payload
from bridge.envelope import error_envelope, outcome_envelope
from bridge.errors import ExtractionFailed, IngestionRejected
from bridge.jobs import TASK_NAME, ExtractionJob, Stage, job_from_wire
from sandbox.errors import SandboxUnavailable
from worker import extraction
from worker.config import Settings
from worker.deliveries import delivery_key, record_delivery

#: Failures of the machinery, not verdicts on the document: another try may succeed.
INFRASTRUCTURE_ERRORS = (RedisConnectionError, RedisTimeoutError, SandboxUnavailable)
_MAX_RETRIES = 5
_RETRY_BACKOFF_MAX_SECONDS = 60
_REDIS_TIMEOUT_SECONDS = 10


class Runtime:
    """What one worker process needs for its jobs, created after the pool forked it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @cached_property
    def redis(self) -> Redis:
        # Timeouts turn a hung Redis into a retried ConnectionError/TimeoutError instead of a
        # task that hangs until Celery's time limit kills it with a less useful reason.
        return Redis.from_url(
            self.settings.result_backend,
            socket_connect_timeout=_REDIS_TIMEOUT_SECONDS,
            socket_timeout=_REDIS_TIMEOUT_SECONDS,
        )

    @property
    def delivery_ttl(self) -> int:
        # Long enough to see every redelivery, including ones that wait out a visibility
        # timeout after a whole worker was lost.
        return int(self.settings.visibility_timeout * (self.settings.max_deliveries + 1))


def _over_delivered(job: ExtractionJob, deliveries: int) -> dict[str, object]:
    return error_envelope(
        job.label,
        job.sha256,
        "ExtractionFailed",
        "WorkerLost",
        f"the worker failed {deliveries - 1} times on this job (it was delivered "
        f"{deliveries} times and its worker process died or was lost before answering each "
        "earlier time); it is answered as a failure instead of being delivered again",
    )


def run_job(task: Any, untrusted_job: object, runtime: Runtime) -> dict[str, object]:
    """The body of the extract task; ``task`` is the bound Celery task."""
    job = job_from_wire(untrusted_job)
    settings = runtime.settings
    key = delivery_key(task.request.id, job.stage.value, task.request.retries)
    deliveries = record_delivery(runtime.redis, key, runtime.delivery_ttl)
    if deliveries > settings.max_deliveries:
        return _over_delivered(job, deliveries)
    try:
        payload = fetch_payload(runtime.redis, job)
    except PayloadUnavailable as exc:
        return error_envelope(
            job.label, job.sha256, "ExtractionFailed", type(exc).__name__, str(exc)
        )
    if job.stage is Stage.OCR:
        # The sandbox answers once, at the end; the page count is known only then. A
        # watcher sees "OCR running" with the total unknown, then the final result.
        task.update_state(state="PROGRESS", meta={"stage": "ocr", "done": 0, "total": None})
    ref = AttachmentRef(job.label, job.kind, job.media_type, payload)
    extractor = extraction.extractor_for(settings, runtime.redis, job.stage, job.use_cache)
    outcome: Outcome
    try:
        outcome = extract_attachment(ref, extractor, job.limits)
    except (IngestionRejected, ExtractionFailed) as exc:
        outcome = exc
    if isinstance(outcome, ExtractionFailed):
        cause = outcome.__cause__
        if isinstance(cause, SandboxUnavailable):
            raise cause  # retried with backoff: the host, not the document, failed
        if job.stage is Stage.LIGHT and extraction.needs_ocr(cause):
            # Same task id, OCR queue: the bridge keeps waiting on the one id it published,
            # so the hand-off cannot lose or double-count the attachment. The caller's
            # deadline travels along, so a hand-off nobody waits for any more is not run.
            handed_on = task.signature(
                (job.handed_on(Stage.OCR).to_wire(),), expires=task.request.expires
            )
            return task.replace(handed_on)  # type: ignore[no-any-return]
    return outcome_envelope(outcome, job.label, job.sha256)


def register(app: Any, settings: Settings) -> Any:
    """Register the extract task on ``app`` and return it."""
    runtime = Runtime(settings)

    def extract(task: Any, untrusted_job: object) -> dict[str, object]:
        return run_job(task, untrusted_job, runtime)

    return app.task(
        name=TASK_NAME,
        bind=True,
        acks_late=True,
        reject_on_worker_lost=True,
        autoretry_for=INFRASTRUCTURE_ERRORS,
        retry_backoff=True,
        retry_backoff_max=_RETRY_BACKOFF_MAX_SECONDS,
        retry_jitter=True,
        max_retries=_MAX_RETRIES,
    )(extract)
