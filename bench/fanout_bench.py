"""Fan-out OCR: one 24-page scan through the queue with 1 OCR worker process and with 2.

Prints ratios measured side by side in one run (never asserted by a test; the figures are in
docs/operations.md, "Fan-out OCR"):

- latency of the one document with 1 and 2 worker processes, fan-out on, and the speedup
  (target >= 1.8x on two cores);
- the CPU spent on the document (the worker's process tree with its sandbox children and
  tesseract, Redis, the client), single task vs fan-out, both on one worker process: the
  split, claim checks, page tasks and merge (target <= 5 % more);
- the same document through the local ``SandboxExtractor`` with 1 and 2 page workers;
- the small-document path's p50 round trip with fan-out off and on (must not get slower).

Run: ``.venv/bin/python bench/fanout_bench.py`` (about five minutes here; ``--pages N`` for
another size). It starts its own redis-server and workers and stops them.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]  # tests/: RedisServer, the corpus scans


from sandbox_bench import _tree_cpu_seconds  # noqa: E402
from workers import start_worker, stop_worker, worker_tree  # noqa: E402

from bridge.knowledge.attachments import (  # noqa: E402
    AttachmentRef,
    ExtractionLimits,
    extract_attachment,
)
from bridge.queue.celery_queue import CeleryQueue  # noqa: E402
from bridge.queue.source import gather  # noqa: E402
from sandbox.extractor import SandboxExtractor  # noqa: E402
from sandbox.limits import ParseLimits  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402
from tests.scanned_pdfs import scanned_pdf  # noqa: E402

CORPUS = Path(os.environ.get("AIRLOCK_CORPUS_DIR", REPO.parent / "shared" / "corpus"))
PAGES = int(sys.argv[sys.argv.index("--pages") + 1]) if "--pages" in sys.argv else 24
LIMITS = ExtractionLimits(max_pages=PAGES, max_text_chars=200_000, max_total_chars=400_000)
SMALL_ROUND_TRIPS = 60
ROUNDS = 3
FAN_OUT_PAGES = 8
SERVER = RedisServer(Path(tempfile.mkdtemp(prefix="airlock-fanout-bench-")))


@contextmanager
def worker(concurrency: int, fan_out_pages: int) -> Iterator[subprocess.Popen[bytes]]:
    env = {"AIRLOCK_FAN_OUT_PAGES": str(fan_out_pages), "AIRLOCK_METRICS_PORT": "0"}
    process = start_worker(SERVER.url(), concurrency, env)
    try:
        yield process
    finally:
        stop_worker(process)


def cpu_seconds(worker_main: int) -> float:
    """CPU of this client, redis-server and every process of the worker, sandbox children
    included: a child that answered but is not reaped yet still counts as itself, and its
    tesseract runs in its reaped-children time."""
    assert SERVER.process is not None
    worker = [pid for role in worker_tree(worker_main).values() for pid in role]
    return _tree_cpu_seconds([*worker, SERVER.process.pid])


def warm(client: CeleryQueue, refs: list[AttachmentRef]) -> None:
    """One small scan first: every pool process starts its fork server outside the timing."""
    gather(refs, client, limits=LIMITS, deadline=120, use_cache=False)


def one_document(
    concurrency: int, fan_out_pages: int, ref: AttachmentRef, warm_refs: list[AttachmentRef]
) -> tuple[float, float]:
    """Seconds for the document, and the CPU-seconds spent on it by the worker's process tree
    (sandbox children and tesseract included), Redis and this client."""
    url = SERVER.url()
    with (
        worker(concurrency, fan_out_pages) as process,
        closing(CeleryQueue(url, url)) as client,
    ):
        warm(client, warm_refs)
        before = cpu_seconds(process.pid)
        started = time.perf_counter()
        selection = gather([ref], client, limits=LIMITS, deadline=600, use_cache=False)
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(process.pid) - before
    assert not selection.dropped, selection.dropped
    return elapsed, cpu


def local_document(page_workers: int, ref: AttachmentRef) -> tuple[float, str]:
    extractor = SandboxExtractor(
        parse_limits=ParseLimits(max_text_chars=LIMITS.max_text_chars, fan_out_pages=FAN_OUT_PAGES),
        page_workers=page_workers,
    )
    extract_attachment(AttachmentRef("w.txt", "text", "text/plain", b"warm"), extractor)
    started = time.perf_counter()
    text = extract_attachment(ref, extractor, LIMITS).text
    return time.perf_counter() - started, text


def small_p50(fan_out_pages: int) -> float:
    url = SERVER.url()
    timings = []
    with worker(2, fan_out_pages), closing(CeleryQueue(url, url)) as client:
        for n in range(SMALL_ROUND_TRIPS):
            ref = AttachmentRef(
                f"note-{n}.txt", "text", "text/plain", f"note {n} {uuid.uuid4().hex}".encode()
            )
            started = time.perf_counter()
            gather([ref], client, deadline=30, use_cache=False)
            timings.append((time.perf_counter() - started) * 1000)
    return statistics.median(timings[5:])


def main() -> None:
    SERVER.start()
    try:
        measure()
    finally:
        SERVER.stop()


def median_of(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(run[0] for run in runs), statistics.median(run[1] for run in runs)


def measure() -> None:
    payload = scanned_pdf(CORPUS, PAGES)
    ref = AttachmentRef("scan.pdf", "pdf", "application/pdf", payload)
    warm_refs = [
        AttachmentRef(f"warm-{n}.pdf", "pdf", "application/pdf", scanned_pdf(CORPUS, 1))
        for n in range(2)
    ]
    print(f"{PAGES}-page scanned PDF, {len(payload) / 1e6:.1f} MB, {os.cpu_count()} cores")
    print(f"load average before: {os.getloadavg()[0]:.2f}; medians of {ROUNDS} alternating runs")
    single_runs, one_runs, two_runs = [], [], []
    for _ in range(ROUNDS):
        single_runs.append(one_document(1, 0, ref, warm_refs))
        one_runs.append(one_document(1, FAN_OUT_PAGES, ref, warm_refs))
        two_runs.append(one_document(2, FAN_OUT_PAGES, ref, warm_refs))
    (single_s, single_cpu), (one_s, one_cpu), (two_s, two_cpu) = (
        median_of(single_runs),
        median_of(one_runs),
        median_of(two_runs),
    )
    print(f"queue, single task, 1 worker process:   {single_s:5.1f} s, {single_cpu:5.1f} CPU-s")
    print(f"queue, fan-out,     1 worker process:   {one_s:5.1f} s, {one_cpu:5.1f} CPU-s")
    print(f"queue, fan-out,     2 worker processes: {two_s:5.1f} s, {two_cpu:5.1f} CPU-s")
    print(f"speedup 1 -> 2 worker processes: {one_s / two_s:.2f}x (target >= 1.8x)")
    overhead = (one_cpu - single_cpu) / single_cpu
    print(
        f"fan-out CPU overhead (1 worker process; worker tree, Redis, client): {overhead:+.1%} "
        f"of the single task's CPU, {(one_cpu - single_cpu) / PAGES * 1000:+.0f} ms per page "
        "(target <= 5 %)"
    )
    local_one, text_one = local_document(1, ref)
    local_two, text_two = local_document(2, ref)
    assert text_one == text_two, "the local fan-out's text differs from one child's"
    print(
        f"local SandboxExtractor: 1 page worker {local_one:.1f} s, 2 page workers "
        f"{local_two:.1f} s: {local_one / local_two:.2f}x"
    )
    small = {0: [], FAN_OUT_PAGES: []}
    for _ in range(2):
        for fan_out_pages, p50s in small.items():
            p50s.append(small_p50(fan_out_pages))
    before, after = statistics.median(small[0]), statistics.median(small[FAN_OUT_PAGES])
    print(
        f"small text document p50 via the queue: fan-out off {before:.1f} ms, "
        f"on {after:.1f} ms ({after / before:.2f}x)"
    )


if __name__ == "__main__":
    main()
