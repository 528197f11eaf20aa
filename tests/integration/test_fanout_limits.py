"""What one request can make of fan-out, and fan-out's edge cases, through real workers.

Issue 20: a few KB of 20 tiny pages became 21 tasks and ~368 KiB held in Redis after the
answer; a request of many documents could fan out into hundreds of page tasks, past
``AIRLOCK_MAX_QUEUED``. Issue 19: a page task paused past the visibility timeout re-created a
finished document's state; a long scan was answered through the queue and failed on the
embedded path. Each test runs the attack or the fault itself, on a Redis of its own, and
compares with the single job or the embedded path byte for byte.
"""

from __future__ import annotations

import os
import re
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from redis import Redis

from bridge.knowledge.attachments import AttachmentRef, AttachmentSource, ExtractionLimits
from bridge.knowledge.contracts import IngestSelection
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.reconcile import HELD_SECONDS, UNACKED_KEY, held_key
from bridge.queue.source import gather
from sandbox.extractor import SandboxExtractor
from sandbox.limits import SandboxLimits
from tests.integration.conftest import FAST_RECOVERY, WorkerFactory, WorkerProcess
from tests.integration.load import wait_until
from tests.integration.refs import REQUEST, local_selection
from tests.pdf_builders import pdf_of_tiny_scans
from tests.redis_server import RedisServer
from tests.scanned_pdfs import scanned_pdf

pytestmark = [pytest.mark.integration, pytest.mark.redis]

LIMITS = ExtractionLimits(max_pages=30)
FAN_OUT = {"AIRLOCK_FAN_OUT_PAGES": "1"}
SINGLE = {"AIRLOCK_FAN_OUT_PAGES": "0"}
_FANNED_OUT = "extraction fanned_out"
_NOT_FANNED_OUT = "is read by one OCR job, not in"


def _received(worker: WorkerProcess, task: str) -> list[str]:
    """The ids of the tasks named ``task`` the worker received, once per delivery."""
    return re.findall(rf"Task {re.escape(task)}\[([^\]]+)\] received", worker.log())


def _pdf(label: str, payload: bytes) -> AttachmentRef:
    return AttachmentRef(label, "pdf", "application/pdf", payload)


def _read(url: str, refs: list[AttachmentRef], limits: ExtractionLimits) -> IngestSelection:
    with closing(CeleryQueue(url, url)) as client:
        return gather(refs, client, limits=limits, deadline=180, use_cache=False)


def _kind(key: bytes) -> str:
    """A key's kind: its name without the ids in it (``airlock:payload``, ``airlock:fanout``,
    ``celery-task-meta``)."""
    name = key.decode()
    if name.startswith("celery-task-meta-"):
        return "celery-task-meta"
    return ":".join(name.split(":")[:2])


@dataclass(frozen=True)
class Held:
    """What a request left in Redis once answered: keys by kind, and their MEMORY USAGE."""

    keys: dict[str, int]
    bytes: int


def _held(redis: Redis, before: set[bytes]) -> Held:
    """The keys made since ``before`` that are still there once every job is acknowledged and
    the workers' word that they hold it has lapsed (``airlock:held:*``, seconds)."""
    wait_until(lambda: redis.hlen(UNACKED_KEY) == 0, 30, "every job acknowledged")
    wait_until(
        lambda: not any(redis.scan_iter(held_key("*"))),
        HELD_SECONDS + 10,
        "the workers' word on the jobs they held to lapse",
    )
    made = [key for key in redis.scan_iter() if key not in before]
    usage = sum(redis.memory_usage(key) or 0 for key in made)
    return Held(dict(Counter(_kind(key) for key in made)), usage)


def _request_of_one(
    workers: WorkerFactory, redis: Redis, env: dict[str, str], ref: AttachmentRef
) -> tuple[IngestSelection, WorkerProcess, Held]:
    """``ref`` read by a worker started with ``env``, and what it left behind; the worker is
    stopped and what it left deleted, so the next run starts from the same Redis."""
    worker = workers(concurrency=2, env=env)
    before = {*redis.scan_iter()}
    selection = _read(workers.redis_url, [ref], LIMITS)
    held = _held(redis, before)
    worker.stop()
    left = [key for key in redis.scan_iter() if key not in before]
    if left:
        redis.delete(*left)
    return selection, worker, held


def test_a_pdf_of_20_tiny_pages_is_one_ocr_job_and_holds_what_the_single_job_holds(
    own_redis: RedisServer, own_workers: WorkerFactory
) -> None:
    """The attack of issue 20, item 5, against the default settings (fan-out past 8 pages):
    before, 21 tasks and 43,888 bytes held after the answer here (21 one-page PDFs, 21 delivery
    counts). Its pages are read in one OCR job (the light task hands it on), and it leaves what
    the single job leaves: its payload and its tasks' delivery counts."""
    attack = _pdf("tiny.pdf", pdf_of_tiny_scans(20))
    redis = own_redis.client()
    single, _, single_held = _request_of_one(own_workers, redis, SINGLE, attack)
    fanned, worker, held = _request_of_one(own_workers, redis, {}, attack)
    print(f"{len(attack.payload)} B of PDF: held {held} (single job: {single_held})")
    assert fanned == single == local_selection([attack], LIMITS)
    assert not fanned.dropped and fanned.text.count("PAGE") == 20
    assert len(_received(worker, "airlock.extract")) == 2  # the light task, the OCR job
    assert not _received(worker, "airlock.extract_page")
    assert held.keys == single_held.keys == {"airlock:payload": 1, "airlock:deliveries": 2}
    assert held.bytes <= single_held.bytes * 1.1


def test_a_request_of_many_tiny_page_documents_makes_no_page_task(
    own_redis: RedisServer, own_workers: WorkerFactory
) -> None:
    """Six such documents in one request: before, 99 page tasks (one per page); now one light
    task and one OCR job each, and nothing of fan-out left."""
    worker = own_workers(concurrency=2)
    refs = [_pdf(f"tiny{n}.pdf", pdf_of_tiny_scans(14 + n)) for n in range(6)]
    selection = _read(own_redis.url(), refs, LIMITS)
    assert selection == local_selection(refs, LIMITS) and not selection.dropped
    assert len(_received(worker, "airlock.extract")) == 12
    assert not _received(worker, "airlock.extract_page")
    redis = own_redis.client()
    assert not [*redis.scan_iter("airlock:fanout:*")]


def test_a_request_fans_out_at_most_its_page_ceiling_at_once(
    own_redis: RedisServer, own_workers: WorkerFactory, corpus_dir: Path
) -> None:
    """Three scans worth splitting in one request with a 4-page ceiling: the first to split
    publishes its pages (3 or 4); the others, finding the request's pages in flight, are read
    by one OCR job each. Every answer is the embedded path's."""
    limits = ExtractionLimits(max_pages=4)
    worker = own_workers(concurrency=2, env=FAN_OUT)
    text_page = "A page with a text layer of its own"
    refs = [
        _pdf("three.pdf", scanned_pdf(corpus_dir, 3)),
        _pdf("mixed.pdf", scanned_pdf(corpus_dir, 3, text_page=text_page)),
        _pdf("four.pdf", scanned_pdf(corpus_dir, 4)),
    ]
    selection = _read(own_redis.url(), refs, limits)
    assert selection == local_selection(refs, limits) and not selection.dropped
    log = worker.log()
    assert log.count(_FANNED_OUT) == 1
    assert log.count("its request has page tasks in flight up to its bound of 4") == 2
    assert 2 <= len(_received(worker, "airlock.extract_page")) <= limits.max_pages
    assert not [*own_redis.client().scan_iter("airlock:fanout:*")]


def test_page_tasks_wait_under_the_queue_bound_or_one_ocr_job_reads_the_document(
    own_redis: RedisServer, own_workers: WorkerFactory, corpus_dir: Path
) -> None:
    """Page tasks used to be published past ``AIRLOCK_MAX_QUEUED``; a document whose pages do
    not fit under it now is read by one OCR job."""
    worker = own_workers(env={**FAN_OUT, "AIRLOCK_MAX_QUEUED": "2"})
    refs = [_pdf("three.pdf", scanned_pdf(corpus_dir, 3))]
    selection = _read(own_redis.url(), refs, LIMITS)
    assert selection == local_selection(refs, LIMITS) and not selection.dropped
    assert _NOT_FANNED_OUT in worker.log() and "at its bound of 2 queued jobs" in worker.log()
    assert not _received(worker, "airlock.extract_page")


def test_the_same_scan_twice_in_one_request_is_read_twice_and_leaves_no_page_behind(
    own_redis: RedisServer, own_workers: WorkerFactory, corpus_dir: Path
) -> None:
    """The two documents share their one-page PDFs: the first answered must not delete what
    the second still reads, and the second answered deletes them."""
    worker = own_workers(concurrency=2, env=FAN_OUT)
    scan = scanned_pdf(corpus_dir, 3, text_page="A page with a text layer of its own")
    refs = [_pdf("first.pdf", scan), _pdf("again.pdf", scan)]
    redis = own_redis.client()
    before = {*redis.scan_iter()}
    selection = _read(own_redis.url(), refs, LIMITS)
    assert selection == local_selection(refs, LIMITS) and not selection.dropped
    assert worker.log().count(_FANNED_OUT) == 2
    assert len(_received(worker, "airlock.extract_page")) == 4
    held = _held(redis, before)
    print(f"two fanned-out documents held {held}")
    # The document's payload, stored once, and each light task's delivery count.
    assert held.keys == {"airlock:payload": 1, "airlock:deliveries": 2}


@contextmanager
def _paused(pids: list[int]) -> Iterator[Callable[[int], None]]:
    """``pids`` stopped (SIGSTOP, as a frozen VM is) until resumed one by one, each at the
    latest on leaving."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    stopped = set(pids)

    def resume(pid: int) -> None:
        os.kill(pid, signal.SIGCONT)
        stopped.discard(pid)

    try:
        yield resume
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)


@pytest.mark.slow
def test_a_page_resumed_after_another_worker_answered_its_document_writes_nothing(
    own_redis: RedisServer, own_workers: WorkerFactory, corpus_dir: Path
) -> None:
    """Issue 19, item 7: a worker SIGSTOPped mid-page past the visibility timeout re-created a
    finished document's fan-out keys and wrote a "page 1 of 12" progress after the answer.
    Here its page is restored to the queue, the other worker reads it and merges, the caller
    reads and deletes the answer; then the paused pool process resumes and finishes its read.
    It records nothing: no fan-out key and no result key reappear."""
    env = {**FAN_OUT, **FAST_RECOVERY}
    paused = own_workers(queues=("airlock.pages",), env=env)
    other = own_workers(env=env)
    ref = _pdf("scan.pdf", scanned_pdf(corpus_dir, 4))
    redis = own_redis.client()
    with ThreadPoolExecutor(1) as caller:
        pending = caller.submit(_read, own_redis.url(), [ref], LIMITS)
        wait_until(lambda: bool(_received(paused, "airlock.extract_page")), 60, "no page taken")
        [page_id] = _received(paused, "airlock.extract_page")
        document_id, _, page = page_id.rpartition(".page-")
        counts = f"airlock:fanout:{document_id}:deliveries"
        # Mid-page: its delivery is counted, its child reads it.
        wait_until(
            lambda: any(redis.hscan_iter(counts, match=f"{page}.*")),
            30,
            "the page's delivery was not counted",
        )
        [pool] = paused.pool_pids()
        with _paused([paused.process.pid, pool]) as resume:
            selection = pending.result()
            assert selection == local_selection([ref], LIMITS) and not selection.dropped
            assert page_id in _received(other, "airlock.extract_page")  # read again there
            assert not [*redis.scan_iter("airlock:fanout:*")]
            assert not [*redis.scan_iter("celery-task-meta-*")]
            resume(pool)  # the pool process first, alone: its main process would kill it
            wait_until(lambda: "nothing recorded" in paused.log(), 30, "the page did not resume")
            assert not [*redis.scan_iter("airlock:fanout:*")], "fan-out state re-created"
            assert not [*redis.scan_iter("celery-task-meta-*")], "a state written after the answer"
    assert paused.process.poll() is None, paused.log()[-3000:]


@pytest.mark.slow
def test_a_scan_over_one_childs_budget_is_answered_alike_by_the_queue_and_the_embedded_path(
    own_redis: RedisServer, own_workers: WorkerFactory, corpus_dir: Path
) -> None:
    """Issue 19, item 7: a 60-page scan was answered through the queue (page tasks, a budget
    each) and failed ``MemoryLimitExceeded`` on the embedded path (one child). Here a 10-page
    scan under a 3 CPU-second budget, about 6 CPU-seconds of OCR, none of its pages over one:
    one child for the whole document fails it; the embedded path, the queue's fan-out, and the
    queue's single OCR job (no worker takes pages) read it in pages, to the same selection."""
    tight = {"AIRLOCK_SANDBOX_CPU_SECONDS": "3"}
    ref = _pdf("long.pdf", scanned_pdf(corpus_dir, 10))
    url = own_redis.url()
    embedded = AttachmentSource(
        [ref], SandboxExtractor(SandboxLimits(cpu_seconds=3)), LIMITS
    ).select(REQUEST)
    assert not embedded.dropped

    no_pages = own_workers(queues=("airlock.light", "airlock.ocr"), env=tight)
    in_turn = _read(url, [ref], LIMITS)
    no_pages.stop()
    whole_worker = own_workers(queues=("airlock.light", "airlock.ocr"), env={**tight, **SINGLE})
    whole = _read(url, [ref], LIMITS)
    whole_worker.stop()
    fanning = own_workers(concurrency=2, env=tight)
    fanned = _read(url, [ref], LIMITS)

    [(_, reason)] = whole.dropped
    assert "CpuLimitExceeded" in reason  # the scan is over one child's budget
    assert in_turn == fanned == embedded
    assert _FANNED_OUT not in no_pages.log() and fanning.log().count(_FANNED_OUT) == 1
