"""Gathering attachments through the extraction queue into one ``IngestSelection``.

The queued path ends in the same ``assemble_selection`` as the local one, so both give
byte-identical text, revision and reasons; what only a queue can add (no answer in time, a
worker that died too often, a refused answer) it adds as reasons. See docs/queue.md.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from bridge.knowledge.attachments import (
    DEFAULT_LIMITS,
    AttachmentRef,
    ExtractionLimits,
    Outcome,
    assemble_selection,
    check_before_dispatch,
    check_on_rejection,
    extraction_failure,
)
from bridge.knowledge.contracts import ContextRead, ContextRequest, IngestSelection
from bridge.knowledge.errors import (
    BridgeContractError,
    ExtractionFailed,
    IngestionRejected,
    KnowledgeBridgeError,
)
from bridge.knowledge.failures import DEADLINE_EXCEEDED, DECLARATION_TOO_LONG, Failure
from bridge.knowledge.labels import safe_label
from bridge.queue.claim_check import sha256_hex
from bridge.queue.envelope import StoredAnswer, outcome_from_stored
from bridge.queue.jobs import ExtractionJob, first_stage
from bridge.wire import MAX_DECLARED_CHARS, ocr_language_problem

DEFAULT_DEADLINE_SECONDS = 30.0


class QueueUnavailable(KnowledgeBridgeError):
    """The broker or the payload store cannot be reached; nothing was extracted.

    Raised rather than dropped per attachment: it says nothing about any one file, and a
    caller may well fall back to extracting locally.
    """


class QueueFull(QueueUnavailable):
    """Redis refuses to store more (``maxmemory`` with ``noeviction``): nothing was queued.

    Not "unreachable": the operator's remedy differs (drain or grow Redis, not restart it),
    and a caller may retry later rather than fall back at once.
    """

    def __init__(self) -> None:
        super().__init__(
            "the extraction queue's Redis is full (it refuses writes at its maxmemory); "
            "nothing was queued, try again once it has drained"
        )


@dataclass(frozen=True)
class NotQueued:
    """A job answered at once instead of queued: no worker consumes its queue, or it is full.

    Its failure (``NoWorkers``, ``QueueFull``) becomes the attachment's reason as any other
    does; nothing of the job's content is in it.
    """

    failure: Failure


@dataclass(frozen=True)
class QueuedJob:
    """A job and the bytes its claim check stands for."""

    job: ExtractionJob
    payload: bytes = field(repr=False)


class ExtractionQueue(Protocol):
    """The port to the workers: publish jobs, collect their final answers until a deadline."""

    def extract(
        self, jobs: Sequence[QueuedJob], deadline: float
    ) -> Sequence[StoredAnswer | NotQueued | None]:
        """One answer per job, in order; ``None`` where none came by ``deadline``, and
        :class:`NotQueued` for a job that was answered at once instead of queued.

        ``deadline`` is a :func:`time.monotonic` value. Each call publishes under fresh task
        ids, and withdraws the jobs it stopped waiting for, so an answer that arrives late
        is never read by this call or any later one. Raises :class:`QueueUnavailable`.
        """
        ...


def _job(
    ref: AttachmentRef, limits: ExtractionLimits, use_cache: bool, ocr_language: str | None
) -> QueuedJob:
    job = ExtractionJob(
        sha256=sha256_hex(ref.payload),
        size=len(ref.payload),
        label=safe_label(ref.label),
        kind=ref.kind,
        media_type=ref.media_type,
        limits=limits,
        stage=first_stage(ref.kind),
        use_cache=use_cache,
        ocr_language=ocr_language,
    )
    return QueuedJob(job, ref.payload)


def _refused_before_dispatch(ref: AttachmentRef, limits: ExtractionLimits) -> Outcome | None:
    try:
        check_before_dispatch(ref, limits)
    except IngestionRejected as exc:
        return exc
    if len(ref.media_type) > MAX_DECLARED_CHARS:
        return extraction_failure(
            ref,
            Failure(
                DECLARATION_TOO_LONG,
                f"the declared media type is {len(ref.media_type)} characters; a job carries "
                f"at most {MAX_DECLARED_CHARS}",
            ),
        )
    return None


def _no_answer(ref: AttachmentRef, deadline_seconds: float) -> ExtractionFailed:
    return extraction_failure(
        ref,
        Failure(
            DEADLINE_EXCEEDED,
            f"no answer within the deadline of {deadline_seconds:g} seconds; the job was "
            "withdrawn and an answer arriving later is never read",
        ),
    )


def _check_arguments(on_rejection: str, deadline: float, ocr_language: str | None) -> None:
    check_on_rejection(on_rejection)
    if isinstance(deadline, bool) or not isinstance(deadline, int | float):
        raise BridgeContractError("deadline must be a number of seconds")
    if not (deadline > 0 and math.isfinite(deadline)):
        raise BridgeContractError("deadline must be a positive, finite number of seconds")
    # Refused here, where the caller wires, rather than by every worker it reaches.
    if ocr_language is not None and (problem := ocr_language_problem(ocr_language)):
        raise BridgeContractError(f"ocr_language: {problem}")


def gather(
    refs: Sequence[AttachmentRef],
    client: ExtractionQueue,
    *,
    limits: ExtractionLimits = DEFAULT_LIMITS,
    on_rejection: Literal["omit", "raise"] = "omit",
    deadline: float = DEFAULT_DEADLINE_SECONDS,
    use_cache: bool = True,
    ocr_language: str | None = None,
) -> IngestSelection:
    """Extract ``refs`` on the workers within ``deadline`` seconds; fold them as select does.

    Refs refused by the cheap guards are never enqueued. With ``'raise'``, nothing after the
    first such refusal is enqueued either: the local path would stop there, so its outcome
    could never be read. ``ocr_language`` reads their scans with those tesseract languages
    instead of the workers' ``AIRLOCK_OCR_LANGUAGE`` (None: the workers').
    """
    _check_arguments(on_rejection, deadline, ocr_language)
    deadline_at = time.monotonic() + deadline
    refs = list(refs)
    outcomes: list[Outcome | None] = [None] * len(refs)
    dispatched: list[tuple[int, QueuedJob]] = []
    for index, ref in enumerate(refs):
        refusal = _refused_before_dispatch(ref, limits)
        if refusal is None:
            dispatched.append((index, _job(ref, limits, use_cache, ocr_language)))
            continue
        outcomes[index] = refusal
        if on_rejection == "raise":
            break
    if dispatched:
        answers = client.extract([queued for _, queued in dispatched], deadline_at)
        if len(answers) != len(dispatched):
            raise QueueUnavailable("the queue client returned a different number of answers")
        for (index, queued), answer in zip(dispatched, answers, strict=True):
            ref = refs[index]
            if answer is None:
                outcomes[index] = _no_answer(ref, deadline)
            elif isinstance(answer, NotQueued):
                outcomes[index] = extraction_failure(ref, answer.failure)
            else:
                outcomes[index] = outcome_from_stored(ref, answer, limits, queued.job.sha256)

    def in_order() -> Iterator[tuple[AttachmentRef, Outcome]]:
        for ref, outcome in zip(refs, outcomes, strict=True):
            if outcome is None:  # only after a 'raise' refusal, which ends the fold first
                return
            yield ref, outcome

    return assemble_selection(in_order(), limits, on_rejection)


async def gather_async(
    refs: Sequence[AttachmentRef],
    client: ExtractionQueue,
    *,
    limits: ExtractionLimits = DEFAULT_LIMITS,
    on_rejection: Literal["omit", "raise"] = "omit",
    deadline: float = DEFAULT_DEADLINE_SECONDS,
    use_cache: bool = True,
    ocr_language: str | None = None,
) -> IngestSelection:
    """:func:`gather` for an event loop: the waiting happens on a worker thread.

    A web app or chat consumer awaits this without stalling its other requests for the
    seconds an extraction takes; the deadline bounds the thread's life as it bounds the call.
    """
    return await asyncio.to_thread(
        gather,
        list(refs),
        client,
        limits=limits,
        on_rejection=on_rejection,
        deadline=deadline,
        use_cache=use_cache,
        ocr_language=ocr_language,
    )


@dataclass(frozen=True)
class QueueAttachmentSource:
    """:class:`AttachmentSource`, extracted by the workers instead of in this process."""

    refs: Sequence[AttachmentRef]
    client: ExtractionQueue
    limits: ExtractionLimits = DEFAULT_LIMITS
    on_rejection: Literal["omit", "raise"] = "omit"
    deadline: float = DEFAULT_DEADLINE_SECONDS
    use_cache: bool = True
    scope_aware: bool = False
    # It needs the broker and the workers; an offline deployment cannot serve it.
    offline_safe: bool = False
    # Last: a caller that passes the fields above by position keeps them where they were.
    ocr_language: str | None = None

    def __post_init__(self) -> None:
        _check_arguments(self.on_rejection, self.deadline, self.ocr_language)

    def select(self, request: ContextRequest) -> IngestSelection:
        """As :meth:`AttachmentSource.select`, within ``deadline`` seconds."""
        return gather(
            self.refs,
            self.client,
            limits=self.limits,
            on_rejection=self.on_rejection,
            deadline=self.deadline,
            use_cache=self.use_cache,
            ocr_language=self.ocr_language,
        )

    def read(self, request: ContextRequest) -> ContextRead:
        return self.select(request).as_read()
