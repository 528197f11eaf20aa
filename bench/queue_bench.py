"""What the queue costs, as figures and ratios measured side by side in one run (never a test).

    .venv/bin/python bench/queue_bench.py [--quick]

Starts its own ``redis-server`` (a free loopback port, a temporary directory, AOF everysec as
deployed: ``tests/redis_server.py``) and its own ``celery worker`` (2 pool processes, both
queues) against it, and stops both: it never touches a Redis it did not start.

1. Publishing N jobs from the client: one shared producer (what ``CeleryQueue`` does) vs a
   Celery ``group``. Client-side milliseconds per job.
2. Round trip of one small text attachment through ``gather`` (publish, worker, sandbox,
   answer, validation), cache bypassed and cache hit: p50 / p95. Target (issue 25): p50 <= 5 ms.
3. Throughput of small text attachments through the 2 worker processes (one ``gather`` of the
   whole batch, cache bypassed) vs the local ``SandboxExtractor`` called from 2 threads.
   Target (issue 25): >= 0.9x.
4. The floor under both: the same sandbox behind a bare Celery task (bench/bare_worker.py: the
   same pool, acknowledgement and prefetch, none of airlock's own work), its round trip and
   throughput, so that what Celery's prefork path costs is told from what airlock adds; and
   the same floor in Celery's threads pool, which dispatches without a pipe to a process.

Everything shares two cores with whatever else runs: read ratios, not absolutes, and rerun
when a figure looks off.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]  # the suite's RedisServer, from tests/

from celery import Celery, group  # noqa: E402
from redis import Redis  # noqa: E402
from workers import start_worker, stop_worker  # noqa: E402

from bridge.knowledge.attachments import AttachmentRef, extract_attachment  # noqa: E402
from bridge.queue.celery_queue import CeleryQueue  # noqa: E402
from bridge.queue.jobs import wire_settings  # noqa: E402
from bridge.queue.source import gather  # noqa: E402
from sandbox.extractor import SandboxExtractor  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

QUICK = "--quick" in sys.argv
SERVER = RedisServer(Path(tempfile.mkdtemp(prefix="airlock-bench-redis-")))
URL = SERVER.url()
ROUND_TRIPS = 50 if QUICK else 300
BATCH = 200 if QUICK else 1000
PUBLISHED = 200 if QUICK else 1000


def small_ref(n: int) -> AttachmentRef:
    payload = f"a small text attachment, number {n}, {uuid.uuid4().hex}".encode()
    return AttachmentRef(f"note-{n}.txt", "text", "text/plain", payload)


def publishing() -> tuple[float, float]:
    """Client-side ms per published job: shared producer vs group (nobody consumes them)."""
    app = Celery("bench-publish", broker=URL, set_as_current=False)
    app.conf.update(**wire_settings())
    job = {"scratch": "x" * 300}
    started = time.perf_counter()
    with app.producer_or_acquire() as producer:
        for _ in range(PUBLISHED):
            app.send_task("bench.noop", args=(job,), queue="bench.scratch", producer=producer)
    shared = (time.perf_counter() - started) / PUBLISHED * 1000
    started = time.perf_counter()
    group(
        app.signature("bench.noop", args=(job,), queue="bench.scratch") for _ in range(PUBLISHED)
    ).apply_async()
    grouped = (time.perf_counter() - started) / PUBLISHED * 1000
    Redis.from_url(URL).delete("bench.scratch")
    app.close()
    return shared, grouped


def round_trips(client: CeleryQueue, use_cache: bool) -> list[float]:
    ref = small_ref(0)
    timings = []
    for n in range(ROUND_TRIPS):
        one = ref if use_cache else small_ref(n)
        started = time.perf_counter()
        selection = gather([one], client, deadline=30, use_cache=use_cache)
        timings.append((time.perf_counter() - started) * 1000)
        assert selection.revision, selection.dropped
    return timings


def queued_throughput(client: CeleryQueue) -> float:
    refs = [small_ref(n) for n in range(BATCH)]
    started = time.perf_counter()
    selection = gather(refs, client, deadline=300, use_cache=False)
    elapsed = time.perf_counter() - started
    assert not selection.dropped, selection.dropped[:3]
    return BATCH / elapsed


def bare_floor(pool: str) -> tuple[list[float], float]:
    """Round trips and throughput of the bare Celery task (bench/bare_worker.py) in ``pool``."""
    worker = start_worker(URL, app_module="bare_worker", pool=pool)
    app = Celery("bench-bare", broker=URL, backend=URL, set_as_current=False)
    app.conf.update(task_serializer="json", result_serializer="json", accept_content=["json"])
    try:
        task = app.signature("bench.bare_extract")
        timings = []
        for n in range(2 * ROUND_TRIPS):  # the first half warms both pool processes
            ref = small_ref(n)
            started = time.perf_counter()
            text = task.clone(args=(ref.label, ref.payload.decode())).apply_async().get(30)
            timings.append((time.perf_counter() - started) * 1000)
            assert ref.payload.decode() in text
        refs = [small_ref(n) for n in range(BATCH)]
        started = time.perf_counter()
        texts = group(task.clone(args=(r.label, r.payload.decode())) for r in refs)().get(300)
        throughput = BATCH / (time.perf_counter() - started)
        assert len(texts) == BATCH
    finally:
        app.close()
        stop_worker(worker)
    return timings[ROUND_TRIPS:], throughput


def local_throughput() -> float:
    refs = [small_ref(n) for n in range(BATCH)]
    extractor = SandboxExtractor()
    extract_attachment(refs[0], extractor)  # start the fork server outside the timing
    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda ref: extract_attachment(ref, extractor), refs))
    return BATCH / (time.perf_counter() - started)


def percentile(values: list[float], fraction: float) -> float:
    return sorted(values)[min(len(values) - 1, int(fraction * len(values)))]


def main() -> None:
    SERVER.start()
    try:
        measure()
    finally:
        SERVER.stop()


def measure() -> None:
    shared, grouped = publishing()
    print(f"publish, shared producer: {shared:.2f} ms/job; group: {grouped:.2f} ms/job "
          f"(ratio {grouped / shared:.2f}x)")  # fmt: skip
    worker = start_worker(URL)
    client = CeleryQueue(URL, URL)
    try:
        round_trips(client, use_cache=False)  # warm both pool processes' sandboxes
        fresh = round_trips(client, use_cache=False)
        cached = round_trips(client, use_cache=True)
        print(f"round trip, small text, cache bypassed: p50 {statistics.median(fresh):.1f} ms, "
              f"p95 {percentile(fresh, 0.95):.1f} ms (target p50 <= 5 ms)")  # fmt: skip
        print(f"round trip, small text, cache hit:      p50 {statistics.median(cached):.1f} ms, "
              f"p95 {percentile(cached, 0.95):.1f} ms")  # fmt: skip
        queued = queued_throughput(client)
    finally:
        client.close()
        stop_worker(worker)
    Redis.from_url(URL).flushall()  # the bench's own server: payloads, counters, cache
    local = local_throughput()
    bare_timings, bare = bare_floor("prefork")
    threads_timings, threads = bare_floor("threads")
    print(f"throughput, {BATCH} small texts: queue (2 worker processes) {queued:.0f}/s, "
          f"local sandbox (2 threads) {local:.0f}/s, ratio {queued / local:.2f}x "
          "(target >= 0.9x)")  # fmt: skip
    print(f"the floor, a bare Celery task around the same sandbox: round trip p50 "
          f"{statistics.median(bare_timings):.1f} ms, p95 {percentile(bare_timings, 0.95):.1f}; "
          f"throughput {bare:.0f}/s, {bare / local:.2f}x the local sandbox; airlock's queue "
          f"{queued / bare:.2f}x the floor's throughput, its p50 "
          f"+{statistics.median(fresh) - statistics.median(bare_timings):.1f} ms")  # fmt: skip
    print(f"the same floor in Celery's threads pool: round trip p50 "
          f"{statistics.median(threads_timings):.1f} ms; throughput {threads:.0f}/s, "
          f"{threads / local:.2f}x the local sandbox")  # fmt: skip


if __name__ == "__main__":
    main()
