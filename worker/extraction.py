"""Which extractor a job runs on, per stage: the sandbox, behind the result cache.

Parsing happens only in the sandbox child: this module composes :class:`SandboxExtractor` and
never imports a parser. The light stage runs with OCR off. See docs/queue.md (Routing and the
OCR hand-off).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from celery.exceptions import SoftTimeLimitExceeded
from redis import Redis

from bridge.knowledge.attachments import ExtractionLimits, TextExtractor
from bridge.knowledge.enclosures import Unpacking
from bridge.queue.jobs import ExtractionJob, Stage
from sandbox.errors import OcrRequired, SandboxError, SplitRequired
from sandbox.extractor import SandboxExtractor, shared_runner
from sandbox.limits import ParseLimits
from sandbox.runner import ProgressCallback, Withdrawal
from worker.cache import CachedExtractor, cache_namespace
from worker.config import Settings
from worker.metrics import MeteredExtractor, count_refused_cache_entry
from worker.retries import TimeLimitReached

_log = logging.getLogger(__name__)

#: What the light stage answers for a document only OCR can read: it goes to the OCR queue,
#: and so does an e-mail or archive with such a file (its files are read with it).
NEEDS_OCR = frozenset({OcrRequired.reported_as, SplitRequired.reported_as})


def stage_parse_limits(
    settings: Settings, stage: Stage, limits: ExtractionLimits, *, ocr_language: str | None
) -> ParseLimits:
    """The parse limits a stage runs a job with: the light stage never runs tesseract.

    The light stage keeps the job's OCR language all the same: it is part of the result
    cache's key, and a text PDF read in the light stage is one request's answer like any."""
    parse = settings.parse_limits_for(limits, ocr_language=ocr_language)
    return replace(parse, ocr=False) if stage is Stage.LIGHT else parse


def sandbox_extractor(
    settings: Settings,
    stage: Stage,
    limits: ExtractionLimits,
    on_progress: ProgressCallback | None = None,
    *,
    ocr_language: str | None,
    deadline: float | None,
    withdrawn: Withdrawal | None = None,
) -> SandboxExtractor:
    """The isolated extractor of one stage; every stage of a process shares one fork server.

    ``deadline`` is the caller's (:func:`time.monotonic`, None: none): a child still running
    then is killed, since nobody reads its answer. It has no default so that no path forgets
    it: the single job once ran 18 s past its caller's deadline that way. A child still
    running when ``withdrawn`` is set is killed too (worker/withdrawals.py). ``ocr_language``
    is the job's (None: the deployment's), without a default for the same reason.
    """
    return SandboxExtractor(
        settings.sandbox,
        stage_parse_limits(settings, stage, limits, ocr_language=ocr_language),
        on_progress=on_progress,
        require=settings.sandbox_require,
        uid_base=settings.sandbox_uid_base,
        deadline=deadline,
        withdrawn=withdrawn,
    )


def start_sandbox(settings: Settings) -> None:
    """Start this pool process's fork server before the pool hands it a job.

    Started at a process's first job instead, its interpreter and parser imports (half a
    second on an idle machine, several on a loaded one with workers restarting) were spent
    inside that job's time limit. A host that cannot start it is logged here and answered
    typed by each job, which tries again.
    """
    runner = shared_runner(settings.sandbox, settings.sandbox_require, settings.sandbox_uid_base)
    try:
        _log.debug("sandbox fork server %d started", runner.fork_server_pid)
    except SandboxError as exc:
        _log.warning("the sandbox could not start ahead of this process's jobs: %s", exc)


@dataclass(frozen=True)
class _WithinTimeLimit:
    """An extractor whose run cut short by Celery's soft time limit is the host's failure.

    Every exception an extractor raises becomes the document's verdict; this one is not the
    document's (see :class:`TimeLimitReached`), so it is told apart before that happens.
    """

    inner: TextExtractor

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        try:
            return self.inner.extract(kind, media_type, payload, max_pages=max_pages)
        except SoftTimeLimitExceeded as exc:
            raise TimeLimitReached(
                "the task's soft time limit passed while the document was being read, "
                "with the sandbox's own wall clock not yet spent: the host was too slow"
            ) from exc


def extractor_for(
    settings: Settings,
    redis: Redis,
    stage: Stage,
    limits: ExtractionLimits,
    *,
    payload_sha256: str | None,
    ocr_language: str | None,
    deadline: float | None,
    on_progress: ProgressCallback | None = None,
    reader: TextExtractor | None = None,
    withdrawn: Withdrawal | None = None,
) -> TextExtractor:
    """The extractor a job runs on: the sandbox, behind the result cache unless bypassed.

    ``payload_sha256`` is the verified digest of the job's payload, or None to bypass the
    cache; ``on_progress(done, total)`` hears how many pages or frames the sandbox has
    finished, at most once a second and always further along; ``deadline`` is the caller's (see
    :func:`sandbox_extractor`), and so is ``withdrawn``. ``reader`` replaces the
    stage's sandbox extractor behind the cache (the merge of a document read in pages, whose
    text the cache keeps as the single OCR job's).
    """
    extractor = reader or MeteredExtractor(
        Unpacking(
            sandbox_extractor(
                settings,
                stage,
                limits,
                on_progress,
                ocr_language=ocr_language,
                deadline=deadline,
                withdrawn=withdrawn,
            ),
            limits,
            hand_on=NEEDS_OCR if stage is Stage.LIGHT else frozenset(),
        )
    )
    cached = _behind_cache(
        settings,
        redis,
        stage_parse_limits(settings, stage, limits, ocr_language=ocr_language),
        extractor,
        payload_sha256=payload_sha256,
    )
    return _WithinTimeLimit(cached)


def _behind_cache(
    settings: Settings,
    redis: Redis,
    parse_limits: ParseLimits,
    extractor: TextExtractor,
    *,
    payload_sha256: str | None,
) -> TextExtractor:
    secret = settings.result_cache_key
    if not settings.result_cache or secret is None or payload_sha256 is None:
        # Without the workers' secret an entry cannot be told from one anybody planted.
        return extractor
    return CachedExtractor(
        extractor,
        redis,
        cache_namespace(parse_limits),
        settings.result_cache_ttl,
        payload_sha256,
        secret,
        count_refused_cache_entry,
    )


def cached_text(settings: Settings, redis: Redis, stage: Stage, job: ExtractionJob) -> str | None:
    """The text ``stage`` cached for ``job``'s (verified) payload, if any: a job whose text is
    known is answered from it rather than read again, in one piece or in pages."""
    if not job.use_cache:
        return None
    # Only the cache is read: no child runs, so there is no deadline to give it.
    parse = stage_parse_limits(settings, stage, job.limits, ocr_language=job.ocr_language)
    unread = sandbox_extractor(
        settings, stage, job.limits, ocr_language=job.ocr_language, deadline=None
    )
    extractor = _behind_cache(settings, redis, parse, unread, payload_sha256=job.sha256)
    if not isinstance(extractor, CachedExtractor):
        return None
    return extractor.cached(job.kind, job.media_type, job.limits.max_pages)
