"""The benches' celery workers: started against a bench's own Redis, and their process trees.

Shared by queue_bench.py, fanout_bench.py and sizing.py.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from celery import Celery

REPO = Path(__file__).resolve().parent.parent


def start_worker(
    url: str,
    concurrency: int = 2,
    env: Mapping[str, str] | None = None,
    app_module: str = "worker",
    pool: str = "prefork",
) -> subprocess.Popen[bytes]:
    """``celery -A worker worker`` on both queues of ``url``, answering a ping on return;
    ``app_module="bare_worker"`` runs the bench's bare Celery app instead (bench/), and
    ``pool`` another of Celery's pools."""
    nodename = f"bench{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
    environment = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
    # The cache's MAC secret: without one a worker caches nothing (docs/queue.md#result-cache).
    environment.update(
        AIRLOCK_BROKER_URL=url,
        BENCH_BROKER_URL=url,
        PYTHONPATH=os.pathsep.join([str(REPO), str(REPO / "bench")]),
        AIRLOCK_RESULT_CACHE_KEY="5e" * 32,
    )
    environment.update(env or {})
    command = [
        str(REPO / ".venv/bin/celery"), "-A", app_module, "worker", "--pool", pool,
        "-c", str(concurrency), "--without-gossip", "--without-mingle", "--without-heartbeat",
        "-n", nodename, "-l", "warning",
    ]  # fmt: skip
    process = subprocess.Popen(
        command,
        cwd=REPO,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    app = Celery("bench", broker=url, set_as_current=False)
    deadline = time.monotonic() + 60
    while not app.control.ping(destination=[nodename], timeout=0.5):
        if time.monotonic() > deadline or process.poll() is not None:
            stop_worker(process)
            raise SystemExit("the bench worker did not start")
    app.close()
    return process


def stop_worker(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    process.wait(30)


def children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def worker_tree(main: int) -> dict[str, list[int]]:
    pools = children(main)
    zygotes = [z for pool in pools for z in children(pool)]
    warm = [c for z in zygotes for c in children(z)]
    return {"main": [main], "pool": pools, "fork server": zygotes, "warm child": warm}


def worker_tree_pids(main: int) -> list[int]:
    """The worker's processes that live across jobs: each job's child and its tesseract count
    in their fork server's reaped-children time once they end."""
    tree = worker_tree(main)
    return tree["main"] + tree["pool"] + tree["fork server"]
