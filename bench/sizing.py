"""The figures behind docs/sizing.md, measured on this code (a script, never a test).

    .venv/bin/python bench/sizing.py [--quick] [--repeats N] [--only ocr,parsers,...]

Sections (``--only`` takes their names): ``ocr``, ``parsers``, ``overhead``, ``worker``,
``queue``, ``redis``, ``probes``. Each prints the load average before and after it.

What is measured, and how:

- ``ocr``: one page at a time through ``SandboxRunner`` (one job at a time, warm children).
  CPU seconds per page and peak RSS come from the fork server's ``wait4`` of the job's child,
  which folds in tesseract (the child reaped it); the peak RSS of the child and tesseract
  *together* is sampled from /proc every 10 ms while the job runs. The bare ``tesseract`` CLI
  on the same decoded page (the PNG the extractor feeds it, ``OMP_THREAD_LIMIT=1``) is measured
  with its own ``wait4``. Pages: tesseract_phototest.tif (640x480, 200 dpi),
  tesseract_unlv_8087_054.3B.tif (a letter page at 300 dpi), the page of
  docling_ocr_test-scanned.pdf (one A4 image at 600 dpi, 4960x7016).
- ``parsers``: the 10-page text PDF of bench/sandbox_bench.py and docling_word_sample.docx,
  CPU of the job's child (``wait4``: the jail set-up before the job included) and the same
  parser's CPU in this process (``time.process_time``).
- ``overhead``: a tiny text job, CPU of the whole sandbox side (this process, the fork server
  and the children it reaped, from /proc) against the parser in-process; wall time with a warm
  child, as bench/sandbox_bench.py measures it (jobs 20 ms apart).
- ``worker``: a real ``airlock worker -Q airlock.light`` with ``-c 1`` and ``-c 2``, RSS and
  PSS (/proc/PID/smaps_rollup) of the main process, each pool process, each fork server and its
  warm children: idle after start (no fork server yet: a pool process starts it at its first
  job) and idle after each pool process ran one job.
- ``queue``: bench/queue_bench.py's round trip of a small text attachment (its worker, 2 pool
  processes, cache bypassed), p50/p95, plus CPU per round trip of the worker's process tree
  and this client.
- ``redis``: ``INFO memory`` ``used_memory`` before and after publishing N tasks nobody
  consumes, and after storing N payloads of a known size the way the client does (claim check,
  ``SET NX EX``); ``MEMORY USAGE`` of the keys as a cross-check (other databases of the same
  Redis move ``used_memory``, not the keys).
- ``probes``: ``airlock doctor``, ``airlock health --ready`` and ``airlock health --live``,
  CPU (user + system, the processes they reaped included) from ``wait4``.

Redis: queue_bench's own ``redis-server`` (started here, stopped at the end; never a Redis the
bench did not start), emptied at start and end of the sections that use it. CPU times, not
wall times, are the figures to plan with on a shared machine.
"""

from __future__ import annotations

import io
import logging
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]

import queue_bench  # noqa: E402
import sandbox_bench  # noqa: E402
from PIL import Image  # noqa: E402
from pypdf import PdfReader  # noqa: E402
from redis import Redis  # noqa: E402
from workers import children, start_worker, stop_worker, worker_tree, worker_tree_pids  # noqa: E402

from bridge.queue.celery_queue import CeleryQueue  # noqa: E402

URL = queue_bench.URL
from bridge.queue.claim_check import sha256_hex, store_payloads  # noqa: E402
from bridge.queue.source import DEFAULT_LIMITS, _job, gather  # noqa: E402
from sandbox.extractors.ocr import encode_for_tesseract  # noqa: E402
from sandbox.extractors.registry import lookup  # noqa: E402
from sandbox.fork_server import ExitNotice  # noqa: E402
from sandbox.limits import ParseLimits  # noqa: E402
from sandbox.runner import SandboxRunner  # noqa: E402

CORPUS = sandbox_bench.CORPUS
AIRLOCK = REPO / ".venv" / "bin" / "airlock"
QUICK = "--quick" in sys.argv
MIB = 1024 * 1024
LIMITS = ParseLimits()


def _option(name: str, default: str) -> str:
    if name in sys.argv:
        return sys.argv[sys.argv.index(name) + 1]
    return default


REPEATS = int(_option("--repeats", "2" if QUICK else "3"))
ONLY = set(filter(None, _option("--only", "").split(",")))


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def med(values: list[float]) -> float:
    return statistics.median(values)


def spread(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    """median [min-max] of ``values`` × ``scale``."""
    scaled = [value * scale for value in values]
    return f"{med(scaled):.{digits}f} [{min(scaled):.{digits}f}-{max(scaled):.{digits}f}]"


# --- the job's own exit notice ------------------------------------------------------------------


@dataclass
class JobRecord:
    notice: ExitNotice | None
    group_peak_rss: int  # bytes: the child and its descendants together, sampled
    group_peak_pss: int  # the same in PSS: pages shared with the fork server counted in part


class ExitTap:
    """Keeps each job's exit notice (CPU and peak RSS from the fork server's ``wait4``).

    The runner drops a successful job's notice unread (it kills the child once it answered);
    here ``forget`` first waits for the notice, and a sampler sums the resident memory of the
    job's process and its children (tesseract) from /proc while the job runs.
    """

    def __init__(self, runner: SandboxRunner, sample: bool = False) -> None:
        server = runner._fork_server()
        self._server = server
        self._local = threading.local()
        take, forget = server.take, server.forget

        def tapped_take(timeout: float):  # type: ignore[no-untyped-def]
            child = take(timeout)
            job = self._local.job = {"rss": 0, "pss": 0, "stop": threading.Event(), "sampler": None}
            if sample:
                sampler = threading.Thread(target=self._sampler, args=(child.pid, job))
                sampler.start()
                job["sampler"] = sampler
            return child

        def tapped_forget(pid: int) -> None:
            notice = server.wait_exit(pid, time.monotonic() + 10)
            job = self._local.job
            job["stop"].set()
            if job["sampler"] is not None:
                job["sampler"].join()
            self._local.record = JobRecord(notice, job["rss"], job["pss"])
            forget(pid)

        server.take = tapped_take  # type: ignore[method-assign]
        server.forget = tapped_forget  # type: ignore[method-assign]

    @staticmethod
    def _sampler(pid: int, job: dict) -> None:  # type: ignore[type-arg]
        while True:
            pids = [pid, *children(pid)]
            rss = sum(_status_kib(each, "VmRSS") for each in pids) * 1024
            pss = sum(_rollup_kib(each, "Pss") for each in pids) * 1024
            job["rss"], job["pss"] = max(job["rss"], rss), max(job["pss"], pss)
            if job["stop"].wait(0.01):
                return

    @property
    def last(self) -> JobRecord:
        return self._local.record


def _rollup_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _status_kib(pid: int, field: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


# --- 1, 2: OCR ----------------------------------------------------------------------------------


@dataclass
class Page:
    name: str
    kind: str
    media_type: str
    payload: bytes
    png: bytes  # what the extractor hands tesseract
    described: str


def ocr_pages() -> list[Page]:
    pages = []
    for name, dpi in (
        ("tesseract_phototest.tif", "200"),
        ("tesseract_unlv_8087_054.3B.tif", "300"),
    ):
        payload = (CORPUS / name).read_bytes()
        image = Image.open(io.BytesIO(payload))
        described = f"{image.size[0]}x{image.size[1]}, {dpi} dpi"
        pages.append(
            Page(name, "image", "image/tiff", payload, encode_for_tesseract(image), described)
        )
    name = "docling_ocr_test-scanned.pdf"
    payload = (CORPUS / name).read_bytes()
    image = PdfReader(io.BytesIO(payload)).pages[0].images[0].image
    assert image is not None
    described = f"1 page, {image.size[0]}x{image.size[1]}, 600 dpi"
    pages.append(
        Page(name, "pdf", "application/pdf", payload, encode_for_tesseract(image), described)
    )
    return pages


# ru_maxrss of an exec'd process includes the memory of the process it was forked from (the
# kernel records the old address space's high-water mark at exec): forked from this bench
# (~175 MiB), every tesseract run "peaked" at 175 MiB. A bare interpreter forks it instead.
_LAUNCHER = """
import os, sys
pid = os.posix_spawn(sys.argv[1], sys.argv[1:], dict(os.environ))
_, status, usage = os.wait4(pid, 0)
cpu = usage.ru_utime + usage.ru_stime
sys.stderr.write(f"\\nRUSAGE {os.waitstatus_to_exitcode(status)} {cpu} {usage.ru_maxrss}\\n")
"""


def bare_tesseract(png: bytes) -> tuple[float, int, float]:
    """CPU seconds, peak RSS bytes and wall seconds of ``tesseract stdin stdout`` on ``png``."""
    tesseract = shutil.which("tesseract")
    assert tesseract is not None
    started = time.perf_counter()
    completed = subprocess.run(
        [sys.executable, "-S", "-c", _LAUNCHER, tesseract, "stdin", "stdout", "-l", "eng",
         "--psm", "3"],
        input=png, capture_output=True, check=True,
        env={**os.environ, "OMP_THREAD_LIMIT": "1"},
    )  # fmt: skip
    wall = time.perf_counter() - started
    line = completed.stderr.decode().rsplit("RUSAGE ", 1)[1].split()
    assert line[0] == "0" and completed.stdout.strip(), "tesseract read nothing"
    return float(line[1]), int(line[2]) * 1024, wall


def bench_ocr() -> list[tuple[str, str]]:
    rows = []
    print("\n1-2. OCR, one job at a time (OMP_THREAD_LIMIT=1)")
    print(
        f"   {'page':34} {'sandbox CPU s':>18} {'wall s':>8} {'pages/s/core':>12} "
        f"{'child maxrss':>12} {'child+tess RSS/PSS':>18} {'bare CPU s':>11} {'bare maxrss':>11}"
    )
    with SandboxRunner() as runner:
        tap = ExitTap(runner, sample=True)
        for page in ocr_pages():
            runner.run(page.kind, page.media_type, page.payload)  # warm-up
            cpu, wall, maxrss, group, group_pss = [], [], [], [], []
            bare_cpu: list[float] = []
            bare_rss: list[float] = []
            for _ in range(REPEATS):
                started = time.perf_counter()
                result = runner.run(page.kind, page.media_type, page.payload)
                wall.append(time.perf_counter() - started)
                record = tap.last
                assert record.notice is not None and result.text
                cpu.append(record.notice.cpu_seconds)
                maxrss.append(record.notice.max_rss_bytes)
                group.append(record.group_peak_rss)
                group_pss.append(record.group_peak_pss)
                seconds, rss, _ = bare_tesseract(page.png)
                bare_cpu.append(seconds)
                bare_rss.append(rss)
            print(
                f"   {page.name[:34]:34} {spread(cpu):>18} {med(wall):8.2f} "
                f"{1 / med(cpu):12.2f} {med(maxrss) / MIB:9.0f} MiB "
                f"{med(group) / MIB:9.0f}/{med(group_pss) / MIB:4.0f} MiB "
                f"{med(bare_cpu):11.2f} {med(bare_rss) / MIB:7.0f} MiB"
            )
            rows.append(
                (
                    page.name,
                    f"{page.described}: {med(cpu):.2f} s CPU/page "
                    f"({1 / med(cpu):.2f} pages/s/core), wall {med(wall):.2f} s; "
                    f"bare tesseract {med(bare_cpu):.2f} s; peak RSS: job child "
                    f"{med(maxrss) / MIB:.0f} MiB (wait4), child+tesseract "
                    f"{med(group) / MIB:.0f} MiB RSS / {med(group_pss) / MIB:.0f} MiB PSS "
                    "(sampled), bare tesseract "
                    f"{med(bare_rss) / MIB:.0f} MiB",
                )
            )
    print(f"   ({load()})")
    return rows


# --- 3, 4: light parsers and the sandbox's own cost ---------------------------------------------


def inprocess_cpu(kind: str, media_type: str, payload: bytes) -> float:
    parse = lookup(kind)
    assert parse is not None
    started = time.process_time()
    parse(media_type, payload, LIMITS)
    return time.process_time() - started


def bench_parsers() -> list[tuple[str, str]]:
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    cases = [
        ("pdf, 10 text pages", "pdf", "application/pdf", sandbox_bench.ten_page_pdf()),
        ("docx, docling_word_sample", "docx",
         "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
         (CORPUS / "docling_word_sample.docx").read_bytes()),
    ]  # fmt: skip
    n = 5 if QUICK else 20
    rows = []
    print("\n3. light parsers, one job at a time: CPU ms per document, median [min-max] of runs")
    print(f"   {'document':28} {'sandbox child CPU':>22} {'wall ms':>8} {'in-process CPU':>22} "
          f"{'child maxrss':>12}")  # fmt: skip
    with SandboxRunner() as runner:
        tap = ExitTap(runner)
        for label, kind, media, payload in cases:
            runner.run(kind, media, payload)
            inprocess_cpu(kind, media, payload)
            run_cpu, run_inproc, run_wall, rss = [], [], [], []
            for _ in range(REPEATS):
                cpu, wall, inproc = [], [], []
                for _ in range(n):
                    time.sleep(0.02)  # a warm child is ready, as for a worker not saturated
                    started = time.perf_counter()
                    runner.run(kind, media, payload)
                    wall.append(time.perf_counter() - started)
                    notice = tap.last.notice
                    assert notice is not None
                    cpu.append(notice.cpu_seconds)
                    rss.append(notice.max_rss_bytes)
                    inproc.append(inprocess_cpu(kind, media, payload))
                run_cpu.append(med(cpu))
                run_inproc.append(med(inproc))
                run_wall.append(med(wall))
            print(f"   {label:28} {spread(run_cpu, 1000, 1):>22} {med(run_wall) * 1000:8.1f} "
                  f"{spread(run_inproc, 1000, 1):>22} {med(rss) / MIB:8.0f} MiB")  # fmt: skip
            rows.append(
                (
                    label,
                    f"{med(run_cpu) * 1000:.0f} ms CPU in the child "
                    f"({med(run_inproc) * 1000:.0f} ms in-process), "
                    f"wall {med(run_wall) * 1000:.0f} ms, child peak RSS "
                    f"{med(rss) / MIB:.0f} MiB",
                )
            )
    pdf_pages = len(PdfReader(io.BytesIO(cases[0][3])).pages)
    print(f"   (10-page PDF: {len(cases[0][3])} bytes, {pdf_pages} pages; {load()})")
    return rows


def bench_overhead() -> list[tuple[str, str]]:
    text = sandbox_bench.TEXT
    n = 50 if QUICK else 200
    parse = lookup("text")
    assert parse is not None
    cpu_sandbox, cpu_inproc, walls = [], [], []
    print("\n4. sandbox overhead per job: tiny text job")
    with SandboxRunner(warm_children=2) as runner:
        runner.run("text", "text/plain", text)
        zygotes = sandbox_bench._zygote_pids()
        for _ in range(REPEATS):

            def sandboxed(jobs: int) -> None:
                for _ in range(jobs):
                    time.sleep(0.02)
                    runner.run("text", "text/plain", text)

            def in_process(jobs: int) -> None:
                for _ in range(jobs):
                    time.sleep(0.02)
                    parse("text/plain", text, LIMITS)

            cpu_sandbox.append(sandbox_bench.cpu_ms_per_job(sandboxed, zygotes, n))
            cpu_inproc.append(sandbox_bench.cpu_ms_per_job(in_process, [], n))
            walls.append(
                sandbox_bench.interleaved_medians(
                    {
                        "inproc": lambda: parse("text/plain", text, LIMITS),
                        "warm": lambda: runner.run("text", "text/plain", text),
                    },
                    n // 4,
                    gap=0.02,
                )
            )
    cpu_over = [s - i for s, i in zip(cpu_sandbox, cpu_inproc, strict=True)]
    wall_over = [w["warm"] - w["inproc"] for w in walls]
    print(f"   CPU ms per job, this process + fork server + child: {spread(cpu_sandbox)}; "
          f"in-process {spread(cpu_inproc, 1, 3)}; overhead {spread(cpu_over)}")  # fmt: skip
    print(f"   wall ms, warm child: overhead {spread(wall_over)} "
          f"(jobs 20 ms apart, {n // 4} per run; {load()})")  # fmt: skip
    return [
        (
            "overhead",
            f"{med(cpu_over):.1f} ms CPU per job (fork + jail + pipes, all processes), "
            f"{med(wall_over):.1f} ms wall with a warm child",
        )
    ]


# --- 5: worker memory ---------------------------------------------------------------------------


def smaps(pid: int) -> tuple[int, int]:
    """RSS and PSS in KiB."""
    values = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, value = line.split(":", 1)
        values[key] = int(value.split()[0])
    return values["Rss"], values["Pss"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def airlock_worker(concurrency: int) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    directory = Path(tempfile.mkdtemp(prefix="sizing-"))
    nodename = f"sizing{uuid.uuid4().hex[:6]}@{socket.gethostname()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    env.update(
        AIRLOCK_BROKER_URL=URL,
        AIRLOCK_CONCURRENCY=str(concurrency),
        AIRLOCK_METRICS_PORT=str(free_port()),  # served, as in the deployments
        AIRLOCK_HEARTBEAT_FILE=str(directory / "heartbeat"),
    )
    log = directory / "worker.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(AIRLOCK), "worker", "-Q", "airlock.light", "-c", str(concurrency),
             "-n", nodename, "-l", "info"],
            cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while f"{nodename} ready." not in log.read_text(errors="replace"):
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit(f"the worker did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)
        yield process, str(directory / "heartbeat")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        shutil.rmtree(directory, ignore_errors=True)


def snapshot(main: int) -> dict[str, list[tuple[int, int]]]:
    return {role: [smaps(pid) for pid in pids] for role, pids in worker_tree(main).items()}


def median_snapshot(main: int) -> dict[str, tuple[int, float, float, float, float]]:
    """Per role: count, RSS and PSS MiB per process, RSS and PSS MiB summed (median of 3)."""
    shots = []
    for _ in range(3):
        shots.append(snapshot(main))
        time.sleep(1)
    result = {}
    for role in shots[0]:
        count = len(shots[0][role])
        if not count:
            continue
        rss = med([sum(r for r, _ in shot[role]) / 1024 for shot in shots])
        pss = med([sum(p for _, p in shot[role]) / 1024 for shot in shots])
        result[role] = (count, rss / count, pss / count, rss, pss)
    return result


def warm_every_pool(main: int, concurrency: int) -> None:
    """Small jobs until every pool process has started its fork server."""
    client = CeleryQueue(URL, URL)
    try:
        for _ in range(20):
            refs = [queue_bench.small_ref(n) for n in range(4 * concurrency)]
            gather(refs, client, deadline=30, use_cache=False)
            if all(children(pool) for pool in children(main)):
                return
        raise SystemExit("a pool process never started its fork server")
    finally:
        client.close()


def bench_worker() -> list[tuple[str, str]]:
    rows = []
    print("\n5. worker memory, airlock worker -Q airlock.light, idle (MiB per process; total)")
    for concurrency in (1, 2):
        Redis.from_url(URL).flushdb()
        runs: dict[str, list[dict[str, tuple[int, float, float, float, float]]]] = {
            "idle after start": [], "idle after one job per pool process": []}  # fmt: skip
        for _ in range(REPEATS):
            with airlock_worker(concurrency) as (process, _):
                time.sleep(5)
                runs["idle after start"].append(median_snapshot(process.pid))
                warm_every_pool(process.pid, concurrency)
                time.sleep(3)
                runs["idle after one job per pool process"].append(median_snapshot(process.pid))
        for stage, shots in runs.items():
            print(f"   -c {concurrency}, {stage} ({load()}):")
            summary = []
            total_rss = med([sum(s[3] for s in shot.values()) for shot in shots])
            total_pss = med([sum(s[4] for s in shot.values()) for shot in shots])
            for role in shots[0]:
                count = shots[0][role][0]
                rss = med([shot[role][1] for shot in shots])
                pss = med([shot[role][2] for shot in shots])
                print(f"     {role:12} x{count}: RSS {rss:6.1f}, PSS {pss:6.1f} each")
                summary.append(f"{role} ×{count} {pss:.0f}")
            print(f"     total: RSS {total_rss:.0f}, PSS {total_pss:.0f}")
            rows.append(
                (f"-c {concurrency}, {stage}",
                 f"PSS {total_pss:.0f} MiB in all (RSS {total_rss:.0f}): " + ", ".join(summary))
            )  # fmt: skip
    Redis.from_url(URL).flushdb()
    return rows


# --- 6: queue round trip ------------------------------------------------------------------------


def bench_queue() -> list[tuple[str, str]]:
    Redis.from_url(URL).flushdb()
    worker = start_worker(URL)
    client = CeleryQueue(URL, URL)
    p50s, p95s, cpus = [], [], []
    try:
        queue_bench.round_trips(client, use_cache=False)  # both pool processes' sandboxes
        for _ in range(REPEATS):
            pids = worker_tree_pids(worker.pid)
            before = sandbox_bench._tree_cpu_seconds(pids)
            timings = queue_bench.round_trips(client, use_cache=False)
            cpus.append((sandbox_bench._tree_cpu_seconds(pids) - before) / len(timings) * 1000)
            p50s.append(med(timings))
            p95s.append(queue_bench.percentile(timings, 0.95))
    finally:
        client.close()
        stop_worker(worker)
    Redis.from_url(URL).flushdb()
    print(f"\n6. queue round trip, small text, cache bypassed, {queue_bench.ROUND_TRIPS} per run "
          f"(worker: celery -c 2)")  # fmt: skip
    print(f"   p50 {spread(p50s, 1, 1)} ms, p95 {spread(p95s, 1, 1)} ms; CPU per round trip "
          f"(worker tree + client) {spread(cpus, 1, 1)} ms ({load()})")  # fmt: skip
    return [
        (
            "round trip",
            f"p50 {med(p50s):.1f} ms / p95 {med(p95s):.1f} ms, {med(cpus):.1f} ms CPU per round "
            "trip (worker and client)",
        )
    ]


# --- 7: Redis memory ----------------------------------------------------------------------------


def used_memory(redis: Redis) -> int:
    return int(redis.info("memory")["used_memory"])


def key_bytes(redis: Redis, pattern: str) -> int:
    return sum(int(redis.memory_usage(key, samples=0) or 0) for key in redis.scan_iter(pattern))


def bench_redis() -> list[tuple[str, str]]:
    redis = Redis.from_url(URL)
    tasks = 200 if QUICK else 2000
    per_task, per_task_keys = [], []
    payload_rows: dict[int, tuple[list[float], list[float]]] = {}
    # Not powers of two: jemalloc rounds an allocation just over 2^n up by a quarter.
    sizes = (1_000, 100_000, 1_000_000)
    for _ in range(REPEATS):
        redis.flushdb()
        client = CeleryQueue(URL, URL)
        try:
            jobs = [_job(queue_bench.small_ref(n), DEFAULT_LIMITS, False) for n in range(10)]
            client._publish(jobs, [uuid.uuid4().hex for _ in jobs], time.monotonic() + 3600)
            redis.delete("airlock.light")  # connection and binding keys exist from here on
            jobs = [_job(queue_bench.small_ref(n), DEFAULT_LIMITS, False) for n in range(tasks)]
            before = used_memory(redis)
            client._publish(jobs, [uuid.uuid4().hex for _ in jobs], time.monotonic() + 3600)
            per_task.append((used_memory(redis) - before) / tasks)
            assert redis.llen("airlock.light") == tasks
            per_task_keys.append(key_bytes(redis, "airlock.light") / tasks)
        finally:
            client.close()
        for size in sizes:
            count = max(10, min(500, (64 * MIB) // size // (4 if QUICK else 1)))
            payloads = {}
            for _ in range(count):
                payload = os.urandom(size)
                payloads[sha256_hex(payload)] = payload
            before = used_memory(redis)
            store_payloads(redis, payloads, 3600)
            delta = used_memory(redis) - before
            stored = key_bytes(redis, "airlock:payload:*")
            redis.delete(*[f"airlock:payload:{digest}" for digest in payloads])
            ratios, keys = payload_rows.setdefault(size, ([], []))
            ratios.append(delta / (count * size))
            keys.append(stored / (count * size))
    redis.flushdb()
    redis.close()
    print("\n7. Redis memory (used_memory deltas; MEMORY USAGE of the keys in brackets)")
    print(f"   per queued task (small text job, {tasks} tasks, nobody consuming): "
          f"{med(per_task):.0f} B [{med(per_task_keys):.0f} B]")  # fmt: skip
    for size, (ratios, keys) in payload_rows.items():
        print(f"   per payload byte, payloads of {size:,} B: {spread(ratios, 1, 3)} "
              f"[{med(keys):.3f}]")  # fmt: skip
    print(f"   ({load()})")
    ratios = ", ".join(f"{med(r):.2f} at {s:,} B" for s, (r, _) in payload_rows.items())
    return [
        (
            "redis",
            f"{med(per_task):.0f} B per queued task; payload bytes × {ratios} (bytes in Redis "
            "per payload byte)",
        )
    ]


# --- 8: probes ----------------------------------------------------------------------------------


def probe_cost(args: list[str], env: dict[str, str]) -> tuple[float, int, float]:
    started = time.perf_counter()
    process = subprocess.Popen(
        [str(AIRLOCK), *args], env=env, cwd=REPO,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, process.returncode, time.perf_counter() - started


def bench_probes() -> list[tuple[str, str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    env.update(AIRLOCK_BROKER_URL=URL)
    n = 3 if QUICK else 5
    rows = []
    print("\n8. probe cost: CPU s (user+system, its children included) per call")
    for args in (["doctor"], ["health", "--ready"], ["health", "--live"]):
        probe_cost(args, env)
        results = [probe_cost(args, env) for _ in range(n)]
        cpu = [r[0] for r in results]
        wall = [r[2] for r in results]
        codes = sorted({r[1] for r in results})
        name = "airlock " + " ".join(args)
        print(f"   {name:24} CPU {spread(cpu)} s, wall {med(wall):.2f} s, exit {codes}")
        rows.append((name, f"{med(cpu):.2f} s CPU (wall {med(wall):.2f} s)"))
    print(f"   ({load()})")
    return rows


SECTIONS: dict[str, Callable[[], list[tuple[str, str]]]] = {
    "ocr": bench_ocr,
    "parsers": bench_parsers,
    "overhead": bench_overhead,
    "worker": bench_worker,
    "queue": bench_queue,
    "redis": bench_redis,
    "probes": bench_probes,
}


def main() -> None:
    unknown = ONLY - set(SECTIONS)
    if unknown:
        raise SystemExit(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    print(
        f"{time.strftime('%Y-%m-%d')}, python {platform.python_version()}, {os.cpu_count()} cores, "
        f"kernel {platform.release()}, {load()}, {REPEATS} runs per figure (medians), "
        f"Redis {URL}"
    )
    summary = []
    queue_bench.SERVER.start()
    try:
        for name, section in SECTIONS.items():
            if not ONLY or name in ONLY:
                print(f"\n[{name}] {load()}")
                summary += section()
    finally:
        queue_bench.SERVER.stop()
    print("\nsummary")
    for label, figure in summary:
        print(f"   {label}: {figure}")


if __name__ == "__main__":
    main()
