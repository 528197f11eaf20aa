"""Files in, one selection out: the one path ``airlock extract`` and ``airlock serve`` share.

Both the command line and the HTTP door answer with the same document for the same files
(``--json`` and a 200's body are byte for byte alike), whether the files are read in this
process's sandbox or through the queue: one function builds each, so they cannot drift.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from bridge.knowledge.attachments import (
    AttachmentRef,
    ExtractionLimits,
    Outcome,
    TextExtractor,
    assemble_selection,
    extraction_outcome,
)
from bridge.knowledge.contracts import IngestSelection
from bridge.knowledge.enclosures import Unpacking
from bridge.knowledge.kinds import guess_kind
from bridge.knowledge.pages import selection_pages
from bridge.queue.source import gather
from sandbox.extractor import SandboxExtractor
from sandbox.runner import ProgressCallback
from worker.config import Settings

if TYPE_CHECKING:
    from bridge.queue.celery_queue import CeleryQueue

#: How long a queued extraction may take by default: the slowest legitimate job (a sandbox
#: wall clock of OCR) plus queueing.
QUEUED_DEADLINE_SECONDS = 300.0

#: Called once per file as its outcome is folded in.
FileDone = Callable[[], None]


def upload_ref(
    label: str, payload: bytes, declared_kind: str | None, media_type: str = ""
) -> AttachmentRef:
    """A file given by a person (a path, an upload) as the ref to extract: its kind the one
    declared, else told from its name, the media type it came with and its bytes; the CLI and
    the door tell it alike."""
    kind, declared_type = guess_kind(label, payload, media_type)
    return AttachmentRef(label, declared_kind or kind, declared_type, payload)


def _outcomes(
    refs: Sequence[AttachmentRef],
    extractor: TextExtractor,
    limits: ExtractionLimits,
    concurrency: int,
    on_file: FileDone | None,
) -> Iterator[tuple[AttachmentRef, Outcome]]:
    one = functools.partial(extraction_outcome, extractor=extractor, limits=limits)
    # Files are extracted concurrently (the sandbox runs each in its own child) but folded in
    # input order, so the selection is the one AttachmentSource.select would build.
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        for ref, outcome in zip(refs, pool.map(one, refs), strict=True):
            if on_file is not None:
                on_file()
            yield ref, outcome


def extract_locally(
    refs: Sequence[AttachmentRef],
    limits: ExtractionLimits,
    settings: Settings,
    *,
    concurrency: int,
    ocr_language: str | None,
    on_file: FileDone | None = None,
    on_pages: ProgressCallback | None = None,
    withdrawn: threading.Event | None = None,
) -> IngestSelection:
    """``refs`` read in this process's sandbox, ``concurrency`` children at once at most (files
    at once, and a long scan's pages at once): each child is one busy core (tesseract runs
    single-threaded), so more would only wait inside their wall clocks. ``ocr_language``: the
    caller's, None for the deployment's."""
    extractor = Unpacking(
        SandboxExtractor(
            settings.sandbox,
            settings.parse_limits_for(limits, ocr_language=ocr_language),
            require=settings.sandbox_require,
            uid_base=settings.sandbox_uid_base,
            page_workers=concurrency,
            on_progress=on_pages,
            withdrawn=withdrawn,
        ),
        limits,
    )
    return assemble_selection(_outcomes(refs, extractor, limits, concurrency, on_file), limits)


def queue_client(
    settings: Settings,
    *,
    on_answer: Callable[[], None] | None = None,
    on_progress: ProgressCallback | None = None,
    withdrawn: Callable[[], bool] | None = None,
) -> CeleryQueue:
    """The queue client ``settings`` describe (the CLI, the bridge service, the door)."""
    # Imported here: Celery and redis cost half a second of start-up that a local extraction
    # never needs.
    from bridge.queue.celery_queue import CeleryQueue  # noqa: PLC0415

    return CeleryQueue(
        settings.broker_url,
        settings.result_backend,
        payload_ttl=settings.payload_ttl,
        max_queued=settings.max_queued,
        on_answer=on_answer,
        on_progress=on_progress,
        withdrawn=withdrawn,
    )


class QueueClients:
    """Queue clients for callers on many threads: one ``CeleryQueue`` per thread, kept.

    A client per request (a Celery app, its Redis connections and the cluster checks) cost
    the HTTP door about a quarter of its throughput on small files. A client's callbacks are
    fixed when it is made, so they call the ones its thread's current call set.
    """

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._local = threading.local()
        self._made: list[Any] = []
        self._lock = threading.Lock()

    def _client(self) -> Any:
        client = getattr(self._local, "client", None)
        if client is None:
            client = queue_client(
                self._settings,
                on_answer=self._answered,
                on_progress=self._paged,
                withdrawn=self._withdrawn,
            )
            self._local.client = client
            with self._lock:
                self._made.append(client)
        return client

    def _answered(self) -> None:
        on_file = getattr(self._local, "on_file", None)
        if on_file is not None:
            on_file()

    def _paged(self, done: int, total: int) -> None:
        on_pages = getattr(self._local, "on_pages", None)
        if on_pages is not None:
            on_pages(done, total)

    def _withdrawn(self) -> bool:
        withdrawn = getattr(self._local, "withdrawn", None)
        return withdrawn is not None and withdrawn.is_set()

    def extract(
        self,
        refs: Sequence[AttachmentRef],
        limits: ExtractionLimits,
        *,
        deadline: float,
        use_cache: bool,
        ocr_language: str | None,
        on_file: FileDone | None = None,
        on_pages: ProgressCallback | None = None,
        withdrawn: threading.Event | None = None,
    ) -> IngestSelection:
        """``refs`` read by the workers behind the broker within ``deadline`` seconds; pages
        done of total as a running job publishes them. Once ``withdrawn`` is set, the jobs
        still unanswered are withdrawn from the workers (see ``CeleryQueue``).

        Raises ``QueueUnavailable`` (``QueueFull`` among them) when the broker cannot take
        them.
        """
        client = self._client()
        local = self._local
        local.on_file, local.on_pages, local.withdrawn = on_file, on_pages, withdrawn
        try:
            return gather(
                refs,
                client,
                limits=limits,
                deadline=deadline,
                use_cache=use_cache,
                ocr_language=ocr_language,
            )
        finally:
            local.on_file = local.on_pages = local.withdrawn = None

    def close(self) -> None:
        with self._lock:
            made, self._made = self._made, []
        for client in made:
            client.close()


def extract_queued(
    refs: Sequence[AttachmentRef],
    limits: ExtractionLimits,
    settings: Settings,
    *,
    deadline: float,
    use_cache: bool,
    ocr_language: str | None,
    on_file: FileDone | None = None,
    on_pages: ProgressCallback | None = None,
) -> IngestSelection:
    """One caller's extraction through the queue, on a client of its own."""
    clients = QueueClients(settings)
    try:
        return clients.extract(
            refs,
            limits,
            deadline=deadline,
            use_cache=use_cache,
            ocr_language=ocr_language,
            on_file=on_file,
            on_pages=on_pages,
        )
    finally:
        clients.close()


def selection_json(selection: IngestSelection) -> str:
    """The selection as ``airlock extract --json`` prints it and ``airlock serve`` answers it.

    The page map rides beside the spec's fields: offsets into ``text`` of each page of each
    attachment block, for a caller that cites pages.
    """
    pages = [asdict(attachment) for attachment in selection_pages(selection.text)]
    return json.dumps({**asdict(selection), "pages": pages}, ensure_ascii=False, indent=2) + "\n"
