"""The extract task: one job in, one JSON envelope out.

The job is validated, its delivery counted, its payload's hash checked and the guards run again
before anything is parsed; refusals are answers, only the host's failures are retried. See
docs/queue.md (Flow, Retries, Failures).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any

from celery import signals
from celery.exceptions import Ignore
from redis import RedisError

from bridge.knowledge.attachments import AttachmentRef, ExtractedAttachment, extraction_outcome
from bridge.knowledge.failures import PAYLOAD_UNAVAILABLE, REFUSED, Failure
from bridge.queue.claim_check import PayloadUnavailable, fetch_payload
from bridge.queue.envelope import answer_envelope
from bridge.queue.jobs import PAGE_TASK_NAME, TASK_NAME, ExtractionJob, Stage, job_from_wire
from sandbox import pages
from sandbox.errors import SplitRequired
from sandbox.runner import ProgressCallback
from worker import extraction, fanout, metrics
from worker.config import Settings
from worker.deliveries import delivery_key, record_delivery, superseded
from worker.metrics import TaskOutcome, TaskReport, count_ocr_page
from worker.publishing import Message, publish
from worker.retries import INFRASTRUCTURE_ERRORS, over_delivered, raise_if_retried
from worker.runtime import Runtime, deadline_of
from worker.withdrawals import WithdrawalMark

_MAX_RETRIES = 5
_RETRY_BACKOFF_MAX_SECONDS = 60

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Answered:
    """How one delivery ends: its answer; None when it was handed on to the OCR stage; the
    document's pages when it is spread over the OCR workers."""

    answer: ExtractedAttachment | Failure | pages.Plan | None
    outcome: TaskOutcome
    deliveries: int
    payload_bytes: int = 0


def _failed(failure: Failure, deliveries: int, payload_bytes: int = 0) -> _Answered:
    outcome = TaskOutcome.REJECTED if failure.refused else TaskOutcome.FAILED
    return _Answered(failure, outcome, deliveries, payload_bytes)


def _answer(
    task: Any, job: ExtractionJob, runtime: Runtime, withdrawal: WithdrawalMark
) -> _Answered:
    settings = runtime.settings
    key = delivery_key(task.request.id, job.stage.value, task.request.retries)
    deliveries = record_delivery(runtime.redis, key, runtime.delivery_ttl)
    if withdrawal.is_set():
        return _Answered(None, TaskOutcome.WITHDRAWN, deliveries)
    if deliveries > settings.max_deliveries:
        return _Answered(over_delivered(deliveries), TaskOutcome.OVER_DELIVERED, deliveries)
    refusal = settings.refused_ocr_language(job.ocr_language)
    if refusal is not None:
        return _failed(Failure(REFUSED, refusal), deliveries)
    try:
        payload = fetch_payload(runtime.redis, job)
    except PayloadUnavailable as exc:
        return _failed(Failure(PAYLOAD_UNAVAILABLE, str(exc)), deliveries)
    ref = AttachmentRef(job.label, job.kind, job.media_type, payload)
    extractor = extraction.extractor_for(
        settings,
        runtime.redis,
        job.stage,
        job.limits,
        payload_sha256=job.sha256 if job.use_cache else None,  # fetch_payload verified it
        ocr_language=job.ocr_language,
        deadline=deadline_of(task),
        on_progress=_progress_reporter(task, job.stage),
        withdrawn=withdrawal,
    )
    outcome = extraction_outcome(ref, extractor, job.limits)
    if isinstance(outcome, ExtractedAttachment):
        return _Answered(outcome, TaskOutcome.ADMITTED, deliveries, len(payload))
    failure = outcome.failure
    raise_if_retried(failure, task.request.retries, settings.max_deliveries)
    # Only a PDF is split into pages; a container whose scanned attachment needs OCR (which
    # answers the same) is handed on whole.
    if job.stage is Stage.LIGHT and failure.code == SplitRequired.reported_as and job.kind == "pdf":
        plan = fanout.split(runtime, job, payload, deadline_of(task), withdrawal)
        if plan is not None:
            return _Answered(plan, TaskOutcome.FANNED_OUT, deliveries, len(payload))
    if job.stage is Stage.LIGHT and failure.code in extraction.NEEDS_OCR:
        return _Answered(None, TaskOutcome.HANDED_ON, deliveries, len(payload))
    return _failed(failure, deliveries, len(payload))


def _report(task: Any, job: ExtractionJob, answered: _Answered, seconds: float) -> None:
    report = TaskReport(
        request_id=task.request.id,
        label=job.label,
        sha256=job.sha256,
        kind=job.kind,
        stage=job.stage.value,
        outcome=answered.outcome,
        seconds=seconds,
        deliveries=answered.deliveries,
        payload_bytes=answered.payload_bytes,
        failure=answered.answer if isinstance(answered.answer, Failure) else None,
    )
    metrics.account(report, _log)


def _progress_reporter(task: Any, stage: Stage) -> ProgressCallback:
    """Publish pages done / total as the task's PROGRESS state, and count OCR'd pages.

    An OCR job runs for minutes; a caller watching the task can tell it is moving. The sandbox
    passes progress on at most once a second, each time further along, so the pages are counted
    by how far ``done`` moved, not by call.
    """
    counted = 0

    def report(done: int, total: int) -> None:
        nonlocal counted
        # A job rerun on a fresh fork server reports from its first page again: count pages
        # only past the furthest seen (a counter cannot go down, and must not raise here).
        if stage is Stage.OCR and done > counted:
            count_ocr_page(done - counted)
        counted = max(counted, done)
        task.update_state(
            state="PROGRESS", meta={"stage": stage.value, "done": done, "total": total}
        )

    return report


def _fanned_out(
    task: Any, job: ExtractionJob, plan: pages.Plan, answered: _Answered, runtime: Runtime
) -> _Answered:
    """The document's pages published, or the document handed on to one OCR job when its
    request or the pages queue has no room for them.

    A delivery another one superseded (this worker was paused past the visibility timeout)
    publishes nothing: it re-created a finished document's pages that way.
    """
    key = delivery_key(task.request.id, job.stage.value, task.request.retries)
    if superseded(runtime.redis, key, answered.deliveries):
        return answered
    if fanout.fan_out(task, job, plan, runtime):
        return answered
    return _Answered(None, TaskOutcome.HANDED_ON, answered.deliveries, answered.payload_bytes)


def run_job(task: Any, untrusted_job: object, runtime: Runtime) -> dict[str, object]:
    """The body of the extract task; ``task`` is the bound Celery task."""
    started = time.monotonic()
    job = job_from_wire(untrusted_job)
    # An OCR job looks at once (one command against seconds of tesseract): a job handed on,
    # or published again, after its caller withdrew it is not started.
    withdrawal = runtime.withdrawal(task.request.id, look_now=job.stage is Stage.OCR)
    answered = _answer(task, job, runtime, withdrawal)
    if withdrawal.is_set_now():
        answered = dataclasses.replace(answered, outcome=TaskOutcome.WITHDRAWN)
    elif isinstance(answered.answer, pages.Plan) and not fanout.past(deadline_of(task)):
        answered = _fanned_out(task, job, answered.answer, answered, runtime)
    _report(task, job, answered, time.monotonic() - started)
    if fanout.past(deadline_of(task)) or answered.outcome is TaskOutcome.WITHDRAWN:
        # Its caller stopped waiting and deleted what it stored: an answer (or a hand-off) now
        # would only leave a result key for nobody, for an hour.
        raise Ignore()
    if isinstance(answered.answer, pages.Plan):
        # The pages answer under this task's id, where the bridge waits; this delivery
        # stores nothing of its own (an IGNORED task leaves no state to race with theirs).
        raise Ignore()
    if answered.answer is None:
        # Same task id, OCR queue: the bridge keeps waiting on the one id it published,
        # so the hand-off cannot lose or double-count the attachment. The caller's
        # deadline travels along, so a hand-off nobody waits for any more is not run. This
        # delivery stores nothing (as Celery's Task.replace): the OCR stage answers.
        handed_on = job.handed_on(Stage.OCR).to_wire()
        publish(task.app, [Message(TASK_NAME, handed_on, task.request.id, task.request.expires)])
        raise Ignore()
    return answer_envelope(answered.answer, job.label, job.sha256)


def _forget_revoked(sender: Any = None, request: Any = None, **_: object) -> None:
    """Delete what a job that expired or was withdrawn unrun leaves: the REVOKED state Celery
    stores for a document, a page's whole document's fan-out state and progress.

    Its caller gave up on it (that is why it expired or was revoked), so nobody reads that
    state: without this, a burst of stale jobs leaves one result key each for an hour, and a
    deadline passing mid fan-out left the document's plan and pages for as long.
    """
    name = getattr(sender, "name", None)
    if request is None or name not in (TASK_NAME, PAGE_TASK_NAME):
        return
    try:
        if name == TASK_NAME:
            sender.backend.forget(request.id)
        else:
            fanout.abandon_document_of(
                sender.backend, request.id, getattr(request, "root_id", None)
            )
    except RedisError as exc:
        _log.warning("could not delete the state of revoked job %s: %s", request.id, exc)


#: Both tasks are acknowledged only once done, and retried alike on the host's failures.
_TASK_OPTIONS: dict[str, Any] = {
    "bind": True,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": INFRASTRUCTURE_ERRORS,
    "retry_backoff": True,
    "retry_backoff_max": _RETRY_BACKOFF_MAX_SECONDS,
    "retry_jitter": True,
    "max_retries": _MAX_RETRIES,
}


def register(app: Any, settings: Settings) -> Any:
    """Register the extract task and the page task on ``app``; return the extract task."""
    runtime = Runtime(settings)
    signals.task_revoked.connect(_forget_revoked, weak=False)

    def extract(task: Any, untrusted_job: object) -> dict[str, object]:
        return run_job(task, untrusted_job, runtime)

    def extract_page(task: Any, untrusted_page_job: object) -> None:
        fanout.run_page(task, untrusted_page_job, runtime)

    def page_failed(  # noqa: PLR0917 - Celery's on_failure signature
        task: Any, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        if isinstance(args, list | tuple) and len(args) == 1:
            fanout.page_gave_up(task, exc, args[0], runtime)

    # A page's own result is never read: it answers into its document's state, a page that
    # failed for good too (Celery's on_failure, after its retries).
    app.task(name=PAGE_TASK_NAME, ignore_result=True, on_failure=page_failed, **_TASK_OPTIONS)(
        extract_page
    )
    return app.task(name=TASK_NAME, **_TASK_OPTIONS)(extract)
