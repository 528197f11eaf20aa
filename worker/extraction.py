"""Which extractor a job runs on, per stage, and when a light job must be handed to OCR.

Parsing happens only in the sandbox child: this module composes :class:`SandboxExtractor`
and never imports a parser. The light stage exists so that a PDF (seconds at most) does not
hold a light worker for the minutes its scanned pages take to OCR; such a PDF is handed on to
the OCR queue instead.

Seam: ``ParseLimits`` has no "OCR off" switch yet, so the light stage still OCRs a scanned PDF
itself (correct, only slower for its queue). When the sandbox gains the switch and an
``OcrRequired`` answer, :func:`stage_parse_limits` turns OCR off for the light stage and
:func:`needs_ocr` recognises the answer; the hand-off itself (``worker.tasks``) is in place.
"""

from __future__ import annotations

from redis import Redis

from bridge.attachments import TextExtractor
from bridge.jobs import Stage
from sandbox.extractor import SandboxExtractor
from sandbox.limits import ParseLimits
from worker.cache import CachedExtractor, cache_namespace
from worker.config import Settings

#: The name of the sandbox's "this document needs OCR" failure (see the module docstring).
OCR_REQUIRED = "OcrRequired"


def stage_parse_limits(settings: Settings, stage: Stage) -> ParseLimits:
    """The parse limits a stage runs with (the light stage will turn OCR off; see above)."""
    return settings.parse_limits


def needs_ocr(failure: BaseException | None) -> bool:
    """True when the light stage's failure means "run me again with OCR"."""
    return failure is not None and type(failure).__name__ == OCR_REQUIRED


def sandbox_extractor(settings: Settings, stage: Stage) -> TextExtractor:
    """The isolated extractor of one stage; every stage of a process shares one fork server."""
    return SandboxExtractor(settings.sandbox, stage_parse_limits(settings, stage))


def extractor_for(settings: Settings, redis: Redis, stage: Stage, use_cache: bool) -> TextExtractor:
    """The extractor a job runs on: the sandbox, behind the result cache unless bypassed."""
    extractor = sandbox_extractor(settings, stage)
    if not (settings.result_cache and use_cache):
        return extractor
    return CachedExtractor(
        extractor,
        redis,
        cache_namespace(stage_parse_limits(settings, stage)),
        settings.result_cache_ttl,
    )
