"""Operating real workers: the metrics endpoint, the logs, the health probes, and SIGTERM.

Each test starts its own ``celery worker`` (real Redis, real sandbox) with the settings under
test; the integration fixtures stop every worker at teardown.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from redis import Redis

from bridge.knowledge.attachments import AttachmentRef, ExtractionLimits
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.jobs import LIGHT_QUEUE, OCR_QUEUE
from bridge.queue.source import gather
from tests.integration.conftest import WorkerFactory, wait_for_marker, worker_env
from tests.integration.load import wait_until
from tests.integration.processes import health
from tests.integration.refs import local, slow_ref
from tests.metrics_scrape import Samples, free_port, scrape

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_the_endpoint_counts_real_extractions_and_the_logs_hold_no_content(
    start_worker: WorkerFactory, client: CeleryQueue, tmp_path: Path
) -> None:
    port = free_port()
    secret = f"content-{uuid.uuid4().hex}"
    worker = start_worker(
        concurrency=2,  # two pool processes write their own files; the main process sums them
        env={
            "AIRLOCK_METRICS_PORT": str(port),
            "AIRLOCK_LOG_FORMAT": "json",
            "AIRLOCK_HEARTBEAT_FILE": str(tmp_path / "heartbeat"),
        },
    )
    before = scrape(port)
    admitted = [
        AttachmentRef(f"note{i}.txt", "text", "text/plain", f"{secret} {i}".encode())
        for i in range(3)
    ]
    broken = AttachmentRef("broken.pdf", "pdf", "application/pdf", f"%PDF-1.4 {secret}".encode())
    selection = gather([*admitted, broken], client, deadline=60, use_cache=False)
    assert selection == local([*admitted, broken])
    too_long = AttachmentRef("long.txt", "text", "text/plain", secret.encode() * 4)
    refused = gather(
        [too_long],
        client,
        limits=ExtractionLimits(max_text_chars=len(secret)),
        deadline=60,
        use_cache=False,
    )
    assert "IngestionRejected" in refused.dropped[0][1]
    after = scrape(port)

    assert moved(before, after, "airlock_tasks_total", kind="text", outcome="admitted") == 3
    assert moved(before, after, "airlock_tasks_total", kind="text", outcome="rejected") == 1
    assert moved(before, after, "airlock_tasks_total", kind="pdf", outcome="failed") == 1
    assert moved(before, after, "airlock_rejections_total", reason_class="IngestionRejected") == 1
    parser_failures = moved(
        before, after, "airlock_rejections_total", reason_class="ExtractionFailed:ParserError"
    )
    assert parser_failures == 1, selection.dropped
    assert moved(before, after, "airlock_extraction_seconds_count", kind="text") == 4
    assert moved(before, after, "airlock_extraction_seconds_count", kind="pdf") == 1
    sent = sum(len(ref.payload) for ref in [*admitted, too_long])
    assert moved(before, after, "airlock_payload_bytes_total", kind="text") == sent
    for queue in (LIGHT_QUEUE, OCR_QUEUE):
        assert ("airlock_queue_depth", frozenset({("queue", queue)})) in after
    assert after[("airlock_queue_depth_errors_total", frozenset())] == 0

    log = worker.log()
    assert secret not in log  # neither payload bytes nor extracted text, in any line
    task_lines = [
        line
        for line in (json.loads(raw) for raw in log.splitlines() if raw.startswith("{"))
        if line["logger"] == "worker.tasks"
    ]
    by_label = {line["label"]: line for line in task_lines}
    assert set(by_label) == {"note0.txt", "note1.txt", "note2.txt", "broken.pdf", "long.txt"}
    assert by_label["note0.txt"]["outcome"] == "admitted"
    assert by_label["long.txt"]["reason_class"] == "IngestionRejected"
    assert by_label["broken.pdf"]["reason_class"] == "ExtractionFailed:ParserError"
    for line in task_lines:
        assert len(line["request_id"]) == 32 and line["duration_seconds"] > 0


@pytest.mark.slow
def test_health_follows_the_worker_main_loop_and_its_broker(
    start_worker: WorkerFactory, redis_url: str, marker_dir: Path, tmp_path: Path
) -> None:
    overrides = {
        "AIRLOCK_HEARTBEAT_FILE": str(tmp_path / "heartbeat"),
        "AIRLOCK_HEARTBEAT_SECONDS": "0.5",
    }
    env = worker_env(redis_url, marker_dir, overrides)
    worker = start_worker(env=overrides)
    assert (tmp_path / "heartbeat").read_text().strip() == worker.nodename
    assert health("--live", env=env) == 0
    assert health("--ready", "--worker", "--timeout", "20", env=env) == 0

    # A main process that stops turning (here: stopped outright) fails both probes.
    os.kill(worker.process.pid, signal.SIGSTOP)
    try:
        time.sleep(2.5)  # past 3 missed beats of 0.5 s
        assert health("--live", env=env) == 1
        assert health("--ready", "--worker", "--timeout", "1", env=env) == 1
        assert health("--ready", env=env) == 0  # the broker alone is fine
    finally:
        os.kill(worker.process.pid, signal.SIGCONT)
    deadline = time.monotonic() + 10
    while health("--live", env=env) != 0:
        assert time.monotonic() < deadline, "the heartbeat did not resume"

    unreachable = worker_env("redis://127.0.0.1:1/0", marker_dir, overrides)
    assert health("--ready", env=unreachable) == 1
    worker.stop()
    assert health("--ready", "--worker", "--timeout", "1", env=env) == 1


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _runs_a_fork_server(pid: int) -> bool:
    for child in _children(pid):
        try:
            if b"sandbox.zygote" in Path(f"/proc/{child}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


@pytest.mark.slow
def test_each_pool_process_starts_its_sandbox_before_its_first_job(
    start_worker: WorkerFactory,
) -> None:
    """A pool process's first job does not pay for its fork server's start (an interpreter and
    every parser's imports) inside its time limit: every pool process runs one before any job
    was sent."""
    worker = start_worker(concurrency=2)
    wait_until(
        lambda: all(_runs_a_fork_server(pid) for pid in worker.pool_pids()),
        60,
        "a fork server under every pool process",
    )
    assert len(worker.pool_pids()) == 2


@pytest.mark.slow
def test_a_worker_whose_sandbox_cannot_run_a_job_is_live_but_not_ready(
    start_worker: WorkerFactory, redis_url: str, marker_dir: Path, tmp_path: Path
) -> None:
    """Its node consumes and answers pings, yet every job would end SandboxUnavailable: here a
    required layer the host cannot give (no uid is left above this uid base to drop to)."""
    overrides = {
        "AIRLOCK_HEARTBEAT_FILE": str(tmp_path / "heartbeat"),
        "AIRLOCK_HEARTBEAT_SECONDS": "0.5",
        "AIRLOCK_SANDBOX_UID_BASE": str(2**32 - 1),
        "AIRLOCK_SANDBOX_REQUIRE": "uid_drop,seccomp",
    }
    env = worker_env(redis_url, marker_dir, overrides)
    start_worker(env=overrides)
    assert health("--live", env=env) == 0
    assert health("--ready", env=env) == 0
    assert health("--ready", "--worker", "--timeout", "5", env=env) == 1


@pytest.mark.slow
def test_sigterm_mid_task_finishes_the_task_once_before_the_worker_exits(
    start_worker: WorkerFactory, client: CeleryQueue, marker_dir: Path
) -> None:
    worker = start_worker()
    ref = slow_ref("warm")
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(gather, [ref], client, deadline=60, use_cache=False)
        [pid] = wait_for_marker(marker_dir / "warm")
        # What a rollout does: SIGTERM to the main process only (tini and the kubelet signal
        # the container's main process, not its pool).
        os.kill(worker.process.pid, signal.SIGTERM)
        selection = pending.result()
    assert selection == local([ref])
    assert worker.process.wait(30) == 0
    assert wait_for_marker(marker_dir / "warm") == [pid]  # run once, by the same process


@pytest.mark.slow
def test_sigterm_after_the_hand_off_to_ocr_loses_nothing(
    start_worker: WorkerFactory, client: CeleryQueue, redis: Redis, corpus_dir: Path
) -> None:
    """The light worker stops right after replacing its job with the OCR one; the OCR job,
    published before the light one was acknowledged, waits for an OCR worker and completes."""
    light = start_worker(queues=[LIGHT_QUEUE])
    payload = (corpus_dir / "docling_ocr_test-scanned.pdf").read_bytes()
    scanned = AttachmentRef("scan.pdf", "pdf", "application/pdf", payload)
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(gather, [scanned], client, deadline=120, use_cache=False)
        deadline = time.monotonic() + 60
        while redis.llen(OCR_QUEUE) == 0:
            assert time.monotonic() < deadline, "the light worker did not hand the job on"
            time.sleep(0.02)
        os.kill(light.process.pid, signal.SIGTERM)
        assert light.process.wait(30) == 0
        assert redis.llen(OCR_QUEUE) == 1
        start_worker(queues=[OCR_QUEUE])
        selection = pending.result()
    assert selection == local([scanned])


def test_airlock_worker_logs_its_ready_line_and_one_json_line_per_task_by_default(
    start_worker: WorkerFactory, client: CeleryQueue
) -> None:
    """As compose and Kubernetes run it: ``airlock worker`` with no ``-l`` and no log format."""
    worker = start_worker(via_cli=True, log_level=None)  # returns once the ready line is logged
    refs = [AttachmentRef(f"default{i}.txt", "text", "text/plain", b"logged") for i in range(2)]
    assert gather(refs, client, deadline=60, use_cache=False) == local(refs)
    deadline = time.monotonic() + 10
    while True:
        lines = [json.loads(raw) for raw in worker.log().splitlines() if raw.startswith("{")]
        task_lines = [line for line in lines if line["logger"] == "worker.tasks"]
        if len(task_lines) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert sorted(line["label"] for line in task_lines) == ["default0.txt", "default1.txt"]
    assert all(line["level"] == "INFO" for line in task_lines)
    assert any(line["message"].endswith(f"{worker.nodename} ready.") for line in lines)
