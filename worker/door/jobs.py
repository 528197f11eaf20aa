"""The door's jobs: each request's files run as one job, kept until its answer is read or old.

A job is run by a bounded pool of threads (the extraction itself blocks: a sandbox child, or
a wait on the queue), its progress and answer kept here for ``GET /v1/jobs/{id}``. A job is
visible only to the key that submitted it: another key's lookup finds nothing, the same
answer as for an id that never existed, so ids cannot be probed across tenants.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from bridge.knowledge.attachments import AttachmentRef, ExtractionLimits
from worker.door.callbacks import Delivery


class JobState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    WITHDRAWN = "withdrawn"


@dataclass(frozen=True)
class HttpFailure:
    """Why a job has no selection: an HTTP status and a typed reason (never a traceback)."""

    status: int
    type: str
    reason: str
    retry_after: int | None = None


@dataclass
class Job:
    """One request's files and what became of them; mutated only under :class:`Jobs`' lock."""

    id: str
    owner: str
    refs: Sequence[AttachmentRef] = field(repr=False)
    limits: ExtractionLimits
    #: The tesseract languages the request asked for; None for the service's own.
    ocr_language: str | None
    #: The files' labels, kept after their bytes are let go.
    labels: tuple[str, ...] = ()
    state: JobState = JobState.QUEUED
    files_done: int = 0
    pages_done: int = 0
    pages_total: int = 0
    #: The selection's JSON document, byte for byte ``airlock extract --json``'s.
    result: str | None = field(default=None, repr=False)
    failure: HttpFailure | None = None
    ended_at: float | None = None
    future: Future[None] | None = field(default=None, repr=False)
    #: Where the job is read (its URL), and how its callback fared, when it asked for one.
    url: str = ""
    callback: Delivery | None = None
    #: Set when the job is withdrawn: the sandbox kills the children still running for it.
    withdrawn: threading.Event = field(default_factory=threading.Event, repr=False)
    #: The payload bytes the job holds in memory until its run ends (or it is withdrawn
    #: before it runs).
    held: int = 0


class Runner(Protocol):
    """What runs a job: the job's refs, limits and OCR language in, the selection's JSON out;
    progress is reported through the two callbacks (a file done; pages done of total), and the
    event is set when the job is withdrawn."""

    def __call__(
        self,
        refs: Sequence[AttachmentRef],
        limits: ExtractionLimits,
        file_done: Callable[[], None],
        pages: Callable[[int, int], None],
        withdrawn: threading.Event,
        *,
        ocr_language: str | None,
    ) -> str: ...


#: Turns an exception a runner raised into the job's typed failure.
Classifier = Callable[[Exception], HttpFailure]


class JobsFull(Exception):
    """The table holds ``max_jobs`` jobs that are neither read nor old."""


class BytesFull(Exception):
    """The uploads being received and the jobs queued or running hold so many bytes that this
    request's would pass ``max_held_bytes``; ``never`` when it alone is larger than that."""

    def __init__(self, size: int, *, never: bool) -> None:
        super().__init__(size)
        self.size = size
        self.never = never


class OwnerBusy(Exception):
    """The key has as many jobs queued or running as it may."""


#: The room in ``max_held_bytes`` below which the door says it is not ready: a balancer
#: should send uploads to a replica that can take one.
_READY_ROOM_BYTES = 1024 * 1024


class Reservation:
    """Bytes one request holds of the door's ``max_held_bytes``, taken as its body arrives (a
    declared length at once, before any byte is read). They pass to the request's job when it
    is submitted; otherwise the request gives them back when it ends, however it ends."""

    def __init__(self, jobs: Jobs) -> None:
        self._jobs = jobs
        self.size = 0

    def add(self, size: int) -> None:
        """Take ``size`` more bytes, or raise ``BytesFull`` (taking none)."""
        self._jobs._reserve(size, self.size)
        self.size += size

    def release(self) -> None:
        """Give back what was not passed to a job."""
        if self.size:
            self._jobs._give_back(self.size)
            self.size = 0


class Jobs:
    def __init__(
        self,
        runner: Runner,
        classify: Classifier,
        *,
        workers: int,
        ttl: float,
        max_jobs: int,
        owner_max_jobs: int,
        max_held_bytes: int,
        on_end: Callable[[Job], None],
    ) -> None:
        """``max_held_bytes`` bounds the upload bytes held at once, by bodies arriving
        (:class:`Reservation`) and by queued and running jobs: ``max_jobs`` alone let a
        thousand 32-file forms hold 8 GB of memory waiting their turn, and a door killed for
        its memory loses every job it held."""
        self._runner = runner
        self._classify = classify
        self._ttl = ttl
        self._max_jobs = max_jobs
        self._owner_max_jobs = owner_max_jobs
        self._max_held_bytes = max_held_bytes
        self._held_bytes = 0
        self._on_end = on_end
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="airlock-job")

    def submit(
        self,
        owner: str,
        refs: Sequence[AttachmentRef],
        limits: ExtractionLimits,
        url: Callable[[str], str],
        callback: Delivery | None = None,
        *,
        ocr_language: str | None,
        reservation: Reservation,
    ) -> Job:
        """Queue ``refs`` as ``owner``'s job; ``url`` makes its URL from its id. The bytes
        ``reservation`` holds for the upload pass to the job, given back when its run ends."""
        with self._lock:
            if self._full():
                raise JobsFull
            if self._in_flight(owner) >= self._owner_max_jobs:
                raise OwnerBusy
            # 128 random bits: an id is a capability only together with its owner's key, but
            # it must not be guessable either.
            job = Job(
                secrets.token_urlsafe(16),
                owner,
                tuple(refs),
                limits,
                ocr_language,
                tuple(ref.label for ref in refs),
            )
            job.url, job.callback = url(job.id), callback
            job.held, reservation.size = reservation.size, 0
            self._jobs[job.id] = job
            job.future = self._pool.submit(self._run, job)
        return job

    def find(self, owner: str, job_id: str) -> Job | None:
        with self._lock:
            self._forget_old()
            job = self._jobs.get(job_id)
            return job if job is not None and job.owner == owner else None

    def withdraw(self, owner: str, job_id: str) -> Job | None:
        """Forget a job: a queued one never runs, a running one is stopped (its sandbox
        children killed; on the queue, its answer discarded), a finished one's answer is not
        kept for anyone after its owner let it go."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.owner != owner:
                return None
            if job.state in (JobState.QUEUED, JobState.RUNNING):
                if job.future is not None and job.future.cancel():
                    self._release(job)  # never to run; a running job's run releases its own
                job.withdrawn.set()
                job.state = JobState.WITHDRAWN
                job.ended_at = time.monotonic()
                job.refs = ()  # the payloads' memory goes now, not when the job ends
            del self._jobs[job_id]
            return job

    def reservation(self) -> Reservation:
        """What one request's upload holds of ``max_held_bytes`` while it is received."""
        return Reservation(self)

    def _reserve(self, size: int, already: int) -> None:
        with self._lock:
            if already + size > self._max_held_bytes:
                raise BytesFull(already + size, never=True)
            if self._held_bytes + size > self._max_held_bytes:
                raise BytesFull(already + size, never=False)
            self._held_bytes += size

    def _give_back(self, size: int) -> None:
        with self._lock:
            self._held_bytes -= size

    def full(self) -> bool:
        """Whether a job submitted now would be refused for want of room (``JobsFull``), or an
        upload of any size likely would (less than :data:`_READY_ROOM_BYTES`, or a tenth of
        the bound, left of ``max_held_bytes``)."""
        with self._lock:
            room = self._max_held_bytes - self._held_bytes
            return self._full() or room < min(_READY_ROOM_BYTES, self._max_held_bytes // 10)

    def _full(self) -> bool:
        self._forget_old()
        return len(self._jobs) >= self._max_jobs

    def _release(self, job: Job) -> None:
        self._held_bytes -= job.held
        job.held = 0

    def held(self) -> int:
        """Upload bytes held now: bodies arriving and jobs queued or running."""
        with self._lock:
            return self._held_bytes

    def in_flight(self) -> int:
        with self._lock:
            return self._in_flight(None)

    def _in_flight(self, owner: str | None) -> int:
        """Jobs queued or running, of ``owner`` or (None) of everyone."""
        return sum(
            job.state in (JobState.QUEUED, JobState.RUNNING)
            and (owner is None or job.owner == owner)
            for job in self._jobs.values()
        )

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _forget_old(self) -> None:
        cutoff = time.monotonic() - self._ttl
        for job_id in [
            job.id
            for job in self._jobs.values()
            if job.ended_at is not None and job.ended_at < cutoff
        ]:
            del self._jobs[job_id]

    def _run(self, job: Job) -> None:
        with self._lock:
            if job.state is not JobState.QUEUED:
                self._release(job)  # withdrawn as it was about to start
                return
            job.state = JobState.RUNNING
            refs, limits, ocr_language = job.refs, job.limits, job.ocr_language

        def file_done() -> None:
            with self._lock:
                job.files_done += 1

        def pages(done: int, total: int) -> None:
            with self._lock:
                job.pages_done, job.pages_total = done, total

        result: str | None = None
        failure: HttpFailure | None = None
        try:
            result = self._runner(
                refs, limits, file_done, pages, job.withdrawn, ocr_language=ocr_language
            )
        except Exception as exc:  # noqa: BLE001 - every failure becomes the job's typed answer
            failure = self._classify(exc)
        with self._lock:
            self._release(job)
            if job.state is JobState.WITHDRAWN:
                return
            job.result, job.failure = result, failure
            job.state = JobState.DONE if failure is None else JobState.FAILED
            job.ended_at = time.monotonic()
            job.refs = ()
        self._on_end(job)
