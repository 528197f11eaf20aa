"""What the HTTP door costs over calling ``gather`` on the same workers, measured side by side.

    .venv/bin/python bench/http_bench.py [--quick]

Starts its own ``redis-server`` (a free loopback port, a temporary directory) and one
``celery worker`` (2 pool processes), then, in alternating rounds, sends the same number of
small text files from the same number of concurrent callers two ways:

- ``gather``: each caller thread calls ``gather`` with its own ``CeleryQueue``;
- ``airlock serve``: the door started with ``AIRLOCK_BROKER_URL`` on the same Redis, each
  caller thread POSTing ``/v1/extract`` with httpx.

Prints requests per second and p50/p99 latency of each, the throughput ratio (target >= 0.8x)
and the p50 overhead (target <= 5 ms), for one caller (an idle door: what a request costs)
and for BENCH_CALLERS (default 8: the machine's cores saturated, queueing included).
Everything shares the machine's cores: read the ratios, and rerun when a figure looks off.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "bench")]  # the suite's RedisServer, from tests/

import httpx  # noqa: E402
from workers import start_worker, stop_worker  # noqa: E402

from bridge.knowledge.attachments import AttachmentRef  # noqa: E402
from bridge.queue.celery_queue import CeleryQueue  # noqa: E402
from bridge.queue.source import gather  # noqa: E402
from tests.metrics_scrape import free_port  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

QUICK = "--quick" in sys.argv
CALLERS = int(os.environ.get("BENCH_CALLERS", "8"))
REQUESTS = 200 if QUICK else 800
ROUNDS = 2 if QUICK else 3


def _payload() -> bytes:
    return f"a small text for the door, {uuid.uuid4().hex}".encode()


def _run(
    callers: int, requests: int, one: Callable[[int], Callable[[], None]]
) -> tuple[float, list[float]]:
    """``requests`` calls spread over ``callers`` threads (``one(thread)`` makes a thread's
    caller): requests per second and each call's milliseconds."""
    timings: list[float] = []
    lock = threading.Lock()
    per_thread = requests // callers

    def work(thread: int) -> None:
        call = one(thread)
        mine = []
        for _ in range(per_thread):
            started = time.perf_counter()
            call()
            mine.append((time.perf_counter() - started) * 1000)
        with lock:
            timings.extend(mine)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(callers)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(timings) / (time.perf_counter() - started), timings


def _gathering(url: str) -> Callable[[int], Callable[[], None]]:
    def caller(_: int) -> Callable[[], None]:
        client = CeleryQueue(url, url)

        def call() -> None:
            ref = AttachmentRef("note.txt", "text", "text/plain", _payload())
            selection = gather([ref], client, deadline=60, use_cache=False)
            assert selection.revision, selection.dropped

        return call

    return caller


def _posting(base: str) -> Callable[[int], Callable[[], None]]:
    def caller(_: int) -> Callable[[], None]:
        client = httpx.Client(base_url=base, timeout=60)

        def call() -> None:
            answered = client.post(
                "/v1/extract", content=_payload(), headers={"X-Filename": "note.txt"}
            )
            assert answered.status_code == 200, answered.text

        return call

    return caller


def _door_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _door_peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _percentile(values: list[float], fraction: float) -> float:
    return sorted(values)[min(len(values) - 1, int(fraction * len(values)))]


def _serve(url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    env["AIRLOCK_BROKER_URL"] = url
    process = subprocess.Popen(
        [str(REPO / ".venv/bin/airlock"), "serve", "--port", str(port)],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return process, base
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit("airlock serve did not start")
        time.sleep(0.05)


def _compare(url: str, base: str, callers: int) -> None:
    direct: list[tuple[float, list[float]]] = []
    through: list[tuple[float, list[float]]] = []
    for _ in range(ROUNDS):
        direct.append(_run(callers, REQUESTS, _gathering(url)))
        through.append(_run(callers, REQUESTS, _posting(base)))
    rate_direct = statistics.median(rate for rate, _ in direct)
    rate_through = statistics.median(rate for rate, _ in through)
    direct_ms = [ms for _, timings in direct for ms in timings]
    through_ms = [ms for _, timings in through for ms in timings]
    p50_direct, p50_through = statistics.median(direct_ms), statistics.median(through_ms)
    print(f"{REQUESTS} small texts x {ROUNDS} rounds, {callers} callers, 2 worker processes:")
    print(f"  gather:        {rate_direct:6.1f}/s  p50 {p50_direct:6.1f} ms  "
          f"p99 {_percentile(direct_ms, 0.99):6.1f} ms")  # fmt: skip
    print(f"  airlock serve: {rate_through:6.1f}/s  p50 {p50_through:6.1f} ms  "
          f"p99 {_percentile(through_ms, 0.99):6.1f} ms")  # fmt: skip
    print(f"  throughput ratio {rate_through / rate_direct:.2f}x (target >= 0.8x); "
          f"p50 overhead {p50_through - p50_direct:+.1f} ms (target <= 5 ms)")  # fmt: skip


def main() -> None:
    server = RedisServer(Path(tempfile.mkdtemp(prefix="airlock-bench-redis-")))
    server.start()
    worker = start_worker(server.url())
    door, base = _serve(server.url())
    try:
        _run(CALLERS, CALLERS * 4, _gathering(server.url()))  # warm both pool processes
        _run(CALLERS, CALLERS * 4, _posting(base))
        # One caller: what a request costs on an idle door; many: what the door carries.
        before = _door_cpu(door.pid)
        _compare(server.url(), base, 1)
        _compare(server.url(), base, CALLERS)
        cpu = _door_cpu(door.pid) - before
        # Sizing (docs/sizing.md): the door's own CPU per request and its peak memory.
        print(f"door: {cpu / (ROUNDS * REQUESTS * 2) * 1000:.1f} ms CPU per request, peak RSS "
              f"{_door_peak_mib(door.pid):.0f} MiB")  # fmt: skip
    finally:
        door.terminate()
        door.wait()
        stop_worker(worker)
        server.stop()


if __name__ == "__main__":
    main()
