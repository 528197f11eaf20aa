"""The job message: what the bridge publishes for one attachment and what a worker accepts.

A claim check (payload key, size, SHA-256) and plain JSON values, read by the worker as
untrusted through the shared decoder (bridge.wire). See docs/queue.md, The trust boundaries.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Annotated

import msgspec
from kombu.entity import Exchange, Queue
from msgspec import UNSET, UnsetType

from bridge.knowledge.attachments import ExtractionLimits
from bridge.knowledge.errors import BridgeContractError
from bridge.wire import (
    Declared,
    Label,
    OcrLanguage,
    Sha256Hex,
    WireError,
    decode,
    limits_struct,
)

#: The one task name both sides agree on; a rename is a protocol change.
TASK_NAME = "airlock.extract"
#: One page of a scanned PDF spread over the OCR workers (docs/queue.md, Fan-out OCR). Only
#: workers publish it; a caller waits on the document's own task id.
PAGE_TASK_NAME = "airlock.extract_page"
#: A page task's id is its document's id, this, and the page number: whoever holds a page of a
#: document holds the document (bridge.queue.reconcile reads it so).
PAGE_ID_SEPARATOR = ".page-"

#: Text, PDF and DOCX jobs take milliseconds to seconds; OCR takes seconds per page. Separate
#: queues keep a burst of scans from starving quick documents behind them, and let operators
#: give OCR its own machines.
LIGHT_QUEUE = "airlock.light"
OCR_QUEUE = "airlock.ocr"
#: The pages of scans spread over the OCR workers. A queue of their own, not the OCR queue:
#: a worker of a release without the page task never consumes it, where on the OCR queue one
#: discarded 129 page tasks as unregistered during a rolling upgrade. A new task name, or a
#: message a running release would refuse, gets a new queue.
PAGES_QUEUE = "airlock.pages"
QUEUES = (LIGHT_QUEUE, OCR_QUEUE, PAGES_QUEUE)
#: The queues of jobs that take seconds of a core each; a worker that also consumes the light
#: queue keeps a process for it (worker/lanes.py).
HEAVY_QUEUES = frozenset({OCR_QUEUE, PAGES_QUEUE})

#: Kinds whose every job needs OCR. A PDF starts on the light queue and is handed on to the
#: OCR queue only when one of its pages turns out to have no text layer.
_OCR_KINDS = frozenset({"image"})

_PAYLOAD_KEY_PREFIX = "airlock:payload:"
_WITHDRAWAL_KEY_PREFIX = "airlock:withdrawn:"


class Stage(StrEnum):
    """Which pass a job is in: the light pass (no OCR) or the OCR pass."""

    LIGHT = "light"
    OCR = "ocr"


def first_stage(kind: str) -> Stage:
    """The stage a new job of this kind starts in."""
    return Stage.OCR if kind in _OCR_KINDS else Stage.LIGHT


def queue_for(stage: Stage) -> str:
    return OCR_QUEUE if stage is Stage.OCR else LIGHT_QUEUE


def payload_key(sha256: str) -> str:
    """The Redis key of a payload: derived from its hash, never chosen by a message."""
    return _PAYLOAD_KEY_PREFIX + sha256


def withdrawal_key(task_id: str) -> str:
    """The Redis key a caller sets to withdraw a job it published (by its task id): a revoke
    reaches only a worker's main process, never the pool process already running the job."""
    return _WITHDRAWAL_KEY_PREFIX + task_id


def wire_settings() -> dict[str, object]:
    """The Celery settings both ends must share.

    JSON only, both ways: a pickled message is code execution for anyone who can publish to
    the broker, and a pickled result is the same for anyone who can write to the backend.
    """
    return {
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_accept_content": ["json"],
        "task_routes": (route,),
        # Declared alike on both ends, so publisher and consumer bind the same exchange.
        "task_queues": [
            Queue(name, Exchange(name, type="direct"), routing_key=name)  # type: ignore[no-untyped-call]
            for name in QUEUES
        ],
    }


def route(
    name: str, args: object, kwargs: object, options: object, task: object = None, **_: object
) -> dict[str, str] | None:
    """Celery router: a job goes to the queue of its stage (light, or OCR for images), a
    page of a document spread over the OCR workers to the pages queue."""
    if name == PAGE_TASK_NAME:
        return {"queue": PAGES_QUEUE}
    if name != TASK_NAME or not isinstance(args, list | tuple) or len(args) != 1:
        return None
    (untrusted_job,) = args
    is_ocr = isinstance(untrusted_job, dict) and untrusted_job.get("stage") == Stage.OCR.value
    return {"queue": queue_for(Stage.OCR if is_ocr else Stage.LIGHT)}


def page_task_id(document_id: str, page: int) -> str:
    """The task id of page ``page`` (from 1) of the document whose task id is ``document_id``."""
    return f"{document_id}{PAGE_ID_SEPARATOR}{page}"


class MalformedJob(ValueError):
    """A message that is not a job this version publishes: forged, corrupted or from a stranger."""


@dataclass(frozen=True)
class ExtractionJob:
    """One attachment to extract, as the message describes it.

    ``ocr_language``: the tesseract languages its caller asked for, None for the workers' own
    (``AIRLOCK_OCR_LANGUAGE``). A message carries the field only when it is set, so a job
    that names none is the message every earlier release reads (docs/queue.md, "OCR languages
    per request").
    """

    sha256: str
    size: int
    label: str
    kind: str
    media_type: str
    limits: ExtractionLimits
    stage: Stage
    use_cache: bool
    ocr_language: str | None = None

    def to_wire(self) -> dict[str, object]:
        wire = asdict(self)
        wire["stage"] = self.stage.value
        if self.ocr_language is None:
            del wire["ocr_language"]
        return wire

    def handed_on(self, stage: Stage) -> ExtractionJob:
        return replace(self, stage=stage)


_JobLimits = limits_struct("JobLimits", partial=False)


class _WireJob(msgspec.Struct, forbid_unknown_fields=True):
    """An :class:`ExtractionJob` as the message carries it, every field required but the OCR
    language."""

    sha256: Sha256Hex
    size: Annotated[int, msgspec.Meta(ge=1)]
    label: Label
    kind: Declared
    media_type: Declared
    limits: _JobLimits  # type: ignore[valid-type]
    stage: Stage
    use_cache: bool
    # Sent only when set: a message without it is the one earlier releases read.
    ocr_language: OcrLanguage | UnsetType = UNSET


def job_from_wire(untrusted_job: object) -> ExtractionJob:
    """Validate a message body into a job, or raise :class:`MalformedJob`."""
    try:
        job = decode(untrusted_job, _WireJob)
        # Rebuilt through its own checks too, so a rule added there binds messages at once.
        limits = ExtractionLimits(**msgspec.structs.asdict(job.limits))
    except (WireError, BridgeContractError) as exc:
        raise MalformedJob(f"the job was refused: {exc}") from None
    return ExtractionJob(
        sha256=job.sha256,
        size=job.size,
        label=job.label,
        kind=job.kind,
        media_type=job.media_type,
        limits=limits,
        stage=job.stage,
        use_cache=job.use_cache,
        ocr_language=None if job.ocr_language is UNSET else job.ocr_language,
    )


@dataclass(frozen=True)
class PageJob:
    """One scanned page of a document spread over the OCR workers: which document (its task
    id), which page, and the claim check of the one-page PDF the split made of it.

    ``publication`` names the fan-out that sent it: a document published again (a retried
    light task, a caller's republish) sends its unread pages again under the same ids, and
    each copy counts its own deliveries, so copies cannot add up to a false ``WorkerLost``.
    """

    document_id: str
    page: int
    pages: int
    sha256: str
    size: int
    publication: str

    def to_wire(self) -> dict[str, object]:
        return asdict(self)


#: Task ids are the bridge's UUIDs; a longer one is not an id this version makes.
_TaskId = Annotated[str, msgspec.Meta(min_length=1, max_length=200, pattern=r"^[0-9A-Za-z_.-]+$")]
_PageNumber = Annotated[int, msgspec.Meta(ge=1, le=1_000_000)]


class _WirePageJob(msgspec.Struct, forbid_unknown_fields=True):
    document_id: _TaskId
    page: _PageNumber
    pages: _PageNumber
    sha256: Sha256Hex
    size: Annotated[int, msgspec.Meta(ge=1)]
    publication: Annotated[str, msgspec.Meta(pattern=r"^[0-9a-f]{32}$")]


def page_job_from_wire(untrusted_job: object) -> PageJob:
    """Validate a page task's message into a :class:`PageJob`, or raise :class:`MalformedJob`."""
    try:
        job = decode(untrusted_job, _WirePageJob)
    except WireError as exc:
        raise MalformedJob(f"the page job was refused: {exc}") from None
    if job.page > job.pages:
        raise MalformedJob(f"the page job names page {job.page} of {job.pages}")
    return PageJob(job.document_id, job.page, job.pages, job.sha256, job.size, job.publication)
