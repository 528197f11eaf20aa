"""Which extractor a job runs on, per stage: the sandbox, behind the result cache.

Parsing happens only in the sandbox child: this module composes :class:`SandboxExtractor` and
never imports a parser. The light stage runs with OCR off. See docs/queue.md (Routing and the
OCR hand-off).
"""

from __future__ import annotations

from dataclasses import replace

from redis import Redis

from bridge.knowledge.attachments import ExtractionLimits, TextExtractor
from bridge.queue.jobs import ExtractionJob, Stage
from sandbox.extractor import SandboxExtractor
from sandbox.limits import ParseLimits
from sandbox.runner import ProgressCallback
from worker.cache import CachedExtractor, cache_namespace
from worker.config import Settings
from worker.metrics import MeteredExtractor, count_refused_cache_entry


def stage_parse_limits(settings: Settings, stage: Stage, limits: ExtractionLimits) -> ParseLimits:
    """The parse limits a stage runs a job with: the light stage never runs tesseract."""
    parse = settings.parse_limits_for(limits)
    return replace(parse, ocr=False) if stage is Stage.LIGHT else parse


def sandbox_extractor(
    settings: Settings,
    stage: Stage,
    limits: ExtractionLimits,
    on_progress: ProgressCallback | None = None,
    *,
    deadline: float | None = None,
) -> TextExtractor:
    """The isolated extractor of one stage; every stage of a process shares one fork server.
    ``deadline`` is the caller's (:func:`time.monotonic`)."""
    return SandboxExtractor(
        settings.sandbox,
        stage_parse_limits(settings, stage, limits),
        on_progress=on_progress,
        require=settings.sandbox_require,
        uid_base=settings.sandbox_uid_base,
        deadline=deadline,
    )


def extractor_for(
    settings: Settings,
    redis: Redis,
    stage: Stage,
    limits: ExtractionLimits,
    *,
    payload_sha256: str | None,
    on_progress: ProgressCallback | None = None,
    reader: TextExtractor | None = None,
) -> TextExtractor:
    """The extractor a job runs on: the sandbox, behind the result cache unless bypassed.

    ``payload_sha256`` is the verified digest of the job's payload, or None to bypass the
    cache; ``on_progress(done, total)`` hears how many pages or frames the sandbox has
    finished, at most once a second and always further along. ``reader`` replaces the
    stage's sandbox extractor behind the cache (the merge of a document read in pages, whose
    text the cache keeps as the single OCR job's).
    """
    extractor = reader or MeteredExtractor(sandbox_extractor(settings, stage, limits, on_progress))
    secret = settings.result_cache_key
    if not settings.result_cache or secret is None or payload_sha256 is None:
        # Without the workers' secret an entry cannot be told from one anybody planted.
        return extractor
    return CachedExtractor(
        extractor,
        redis,
        cache_namespace(stage_parse_limits(settings, stage, limits)),
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
    extractor = extractor_for(settings, redis, stage, job.limits, payload_sha256=job.sha256)
    if not isinstance(extractor, CachedExtractor):
        return None
    return extractor.cached(job.kind, job.media_type, job.limits.max_pages)
