"""What a worker counts and logs, and its health checks, without a worker process
(tests/integration/test_operations.py runs real ones; the shared endpoint: tests/bridge)."""

from __future__ import annotations

import io
import logging
import os
import time
import uuid
from pathlib import Path

import pytest
from celery.exceptions import Ignore
from prometheus_client import REGISTRY
from redis import Redis

from bridge.knowledge.failures import Failure
from bridge.logs import JsonFormatter
from bridge.metrics import OTHER, bounded
from bridge.queue.jobs import Stage
from sandbox.errors import (
    CeilingExceeded,
    ChildCrashed,
    CpuLimitExceeded,
    ForbiddenOperation,
    KilledFromOutside,
    MemoryLimitExceeded,
    OcrRequired,
    OutputTooLarge,
    SandboxError,
    WallClockExceeded,
)
from tests.redis_server import SUITE_REDIS_URL as REDIS_URL
from worker import health, heartbeat
from worker.config import ConfigurationError, Settings
from worker.logs import _WITHHOLD
from worker.metrics import TaskOutcome, TaskReport
from worker.runtime import Runtime
from worker.tasks import _progress_reporter, run_job

from .test_tasks import SETTINGS, FakeTask, Scripted, job_for, parser, unique

__all__ = ["parser"]  # the fixture, shared with test_tasks

UNREACHABLE = "redis://127.0.0.1:1/0"  # nothing listens on port 1


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# --- what one delivery counts ----------------------------------------------------------------


def report(outcome: TaskOutcome, code: str | None = None) -> TaskReport:
    failure = None if code is None else Failure(code, "why")
    return TaskReport("id", "a.txt", "0" * 64, "text", "light", outcome, 0.1, 1, 0, failure)


@pytest.mark.parametrize(
    ("code", "reason_class"),
    [
        ("IngestionRejected", "IngestionRejected"),
        ("ExtractionFailed", "ExtractionFailed"),
        (CeilingExceeded.reported_as, "ExtractionFailed:CeilingExceeded"),
        (KilledFromOutside.reported_as, "ExtractionFailed:ChildCrashed"),
        ("PayloadUnavailable", "ExtractionFailed:PayloadUnavailable"),
        ("WorkerLost", "ExtractionFailed:WorkerLost"),
        ("ZeroDivisionError", f"ExtractionFailed:{OTHER}"),
        (None, None),
    ],
)
def test_reason_classes_are_the_error_and_a_known_code(
    code: str | None, reason_class: str | None
) -> None:
    assert report(TaskOutcome.FAILED, code).reason_class == reason_class


@pytest.mark.parametrize(
    ("failure", "cause"),
    [
        (WallClockExceeded, "wall_clock"),
        (CpuLimitExceeded, "cpu"),
        (MemoryLimitExceeded, "memory"),
        (ChildCrashed, "signal"),
        (KilledFromOutside, "signal"),
        (ForbiddenOperation, "forbidden_syscall"),
        (OutputTooLarge, "output_cap"),
        (CeilingExceeded, None),  # a refusal, not a kill
    ],
)
def test_kill_causes_come_from_the_sandbox_error_code(
    failure: type[SandboxError], cause: str | None
) -> None:
    assert report(TaskOutcome.FAILED, failure.reported_as).kill_cause == cause


def test_labels_stay_bounded() -> None:
    assert bounded("pdf", {"pdf", "text"}) == "pdf"
    assert bounded("x" * 1000, {"pdf", "text"}) == OTHER


def test_the_log_fields_carry_the_sanitised_label_and_never_content() -> None:
    fields = TaskReport(
        "req-1", "../../etc/\u202epasswd", "ab" * 32, "forged-kind", "ocr",
        TaskOutcome.ADMITTED, 1.5, 2,
    ).log_fields()  # fmt: skip
    assert fields == {
        "request_id": "req-1", "label": "passwd", "sha256": "ab" * 32, "kind": OTHER,
        "stage": "ocr", "outcome": "admitted", "reason_class": None, "duration_seconds": 1.5,
        "deliveries": 2,
    }  # fmt: skip


@pytest.mark.integration
@pytest.mark.redis
def test_a_delivery_is_counted_by_kind_and_outcome(redis: Redis, parser: Scripted) -> None:
    admitted = sample("airlock_tasks_total", kind="text", outcome="admitted")
    payload_bytes = sample("airlock_payload_bytes_total", kind="text")
    timed = sample("airlock_extraction_seconds_count", kind="text")
    payload = unique()
    run_job(FakeTask(), job_for(redis, payload), Runtime(SETTINGS))
    assert sample("airlock_tasks_total", kind="text", outcome="admitted") == admitted + 1
    assert sample("airlock_payload_bytes_total", kind="text") == payload_bytes + len(payload)
    assert sample("airlock_extraction_seconds_count", kind="text") == timed + 1


@pytest.mark.integration
@pytest.mark.redis
def test_a_kill_counts_a_failure_its_class_and_its_cause(redis: Redis, parser: Scripted) -> None:
    failed = sample("airlock_tasks_total", kind="text", outcome="failed")
    rejections = sample(
        "airlock_rejections_total", reason_class="ExtractionFailed:WallClockExceeded"
    )
    kills = sample("airlock_sandbox_kills_total", cause="wall_clock")
    parser.result = WallClockExceeded("killed after 120 s")
    run_job(FakeTask(), job_for(redis, unique()), Runtime(SETTINGS))
    assert sample("airlock_tasks_total", kind="text", outcome="failed") == failed + 1
    assert (
        sample("airlock_rejections_total", reason_class="ExtractionFailed:WallClockExceeded")
        == rejections + 1
    )
    assert sample("airlock_sandbox_kills_total", cause="wall_clock") == kills + 1


@pytest.mark.integration
@pytest.mark.redis
def test_a_guard_refusal_counts_as_rejected(redis: Redis, parser: Scripted) -> None:
    rejected = sample("airlock_tasks_total", kind="text", outcome="rejected")
    rejections = sample("airlock_rejections_total", reason_class="IngestionRejected")
    parser.result = "x" * 200_000  # over the default text ceiling
    run_job(FakeTask(), job_for(redis, unique()), Runtime(SETTINGS))
    assert sample("airlock_tasks_total", kind="text", outcome="rejected") == rejected + 1
    assert sample("airlock_rejections_total", reason_class="IngestionRejected") == rejections + 1


@pytest.mark.integration
@pytest.mark.redis
def test_hand_offs_and_redeliveries_are_counted(redis: Redis, parser: Scripted) -> None:
    handed_on = sample("airlock_tasks_total", kind="pdf", outcome="handed_on")
    over = sample("airlock_tasks_total", kind="text", outcome="over_delivered")
    parser.result = OcrRequired("page 1 has no text layer")
    with pytest.raises(Ignore):  # handed on: the OCR stage answers
        run_job(FakeTask(), job_for(redis, unique(), kind="pdf"), Runtime(SETTINGS))
    assert sample("airlock_tasks_total", kind="pdf", outcome="handed_on") == handed_on + 1

    parser.result = "text"
    task, job = FakeTask(), job_for(redis, unique())
    for _ in range(3):  # SETTINGS allows 2 deliveries
        run_job(task, job, Runtime(SETTINGS))
    assert sample("airlock_tasks_total", kind="text", outcome="over_delivered") == over + 1


@pytest.mark.integration
@pytest.mark.redis
def test_ocr_pages_are_counted_as_the_sandbox_finishes_them(redis: Redis, corpus_dir: Path) -> None:
    pages = sample("airlock_ocr_pages_total")
    scan = (corpus_dir / "docling_ocr_test-scanned.pdf").read_bytes()
    job = job_for(redis, scan, kind="pdf", stage=Stage.OCR)
    assert run_job(FakeTask(), job, Runtime(SETTINGS))["ok"] is True
    assert sample("airlock_ocr_pages_total") == pages + 1
    # The light stage reads text layers; it counts no OCR pages.
    text_pdf = (corpus_dir / "docling_multi_page.pdf").read_bytes()
    run_job(FakeTask(), job_for(redis, text_pdf, kind="pdf"), Runtime(SETTINGS))
    assert sample("airlock_ocr_pages_total") == pages + 1
    # On the OCR stage all five pages count, though the sandbox passes on fewer updates.
    run_job(FakeTask(), job_for(redis, text_pdf, kind="pdf", stage=Stage.OCR), Runtime(SETTINGS))
    assert sample("airlock_ocr_pages_total") == pages + 6


# --- the shared endpoint and the queue depth -------------------------------------------------


@pytest.mark.parametrize(
    "env",
    [
        {"AIRLOCK_METRICS_PORT": "65536"},
        {"AIRLOCK_METRICS_PORT": "-1"},
        {"AIRLOCK_METRICS_PORT": "http"},
        {"AIRLOCK_METRICS_HOST": "everywhere"},
        {"AIRLOCK_METRICS_HOST": "example.org"},
        {"AIRLOCK_LOG_FORMAT": "xml"},
    ],
)
def test_bad_settings_are_refused_at_start(env: dict[str, str]) -> None:
    with pytest.raises(ConfigurationError, match=next(iter(env))):
        Settings.from_env(env)


def test_a_worker_and_the_bridge_on_one_host_serve_metrics_apart_on_loopback() -> None:
    """The README runs both on one host: both defaulted to 9808 once, and the second had none.
    One variable moves both; the address is loopback unless the operator opens it."""
    unset = Settings.from_env({})
    assert (unset.worker_metrics_port, unset.bridge_metrics_port) == (9808, 9809)
    assert unset.metrics_host == "127.0.0.1"
    given = Settings.from_env({"AIRLOCK_METRICS_PORT": "9100", "AIRLOCK_METRICS_HOST": "::"})
    assert (given.worker_metrics_port, given.bridge_metrics_port) == (9100, 9100)
    assert given.metrics_host == "::"


# --- logs ------------------------------------------------------------------------------------


def test_celerys_success_line_withholds_the_task_result() -> None:
    context = {"id": "r1", "name": "airlock.extract", "runtime": 0.1, "return_value": "TEXT"}
    record = logging.LogRecord(
        "celery.app.trace", logging.INFO, __file__, 1,
        "Task %(name)s[%(id)s] succeeded in %(runtime)ss: %(return_value)s", (context,), None,
    )  # fmt: skip
    record.data = context
    assert _WITHHOLD.filter(record)
    assert "TEXT" not in record.getMessage() and "TEXT" not in str(record.data)  # type: ignore[attr-defined]
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.emit(record)
    assert "TEXT" not in stream.getvalue()


# --- health ----------------------------------------------------------------------------------


def health_settings(
    tmp_path: Path, broker: str = REDIS_URL, sandbox_require: str = "", uid_base: str = ""
) -> Settings:
    return Settings.from_env(
        {
            "AIRLOCK_BROKER_URL": broker,
            "AIRLOCK_HEARTBEAT_FILE": str(tmp_path / "heartbeat"),
            "AIRLOCK_HEARTBEAT_SECONDS": "1",
            "AIRLOCK_SANDBOX_REQUIRE": sandbox_require,
            "AIRLOCK_SANDBOX_UID_BASE": uid_base,
        }
    )


def test_live_follows_the_heartbeat_file(tmp_path: Path) -> None:
    settings = health_settings(tmp_path)
    assert not health.live(settings).healthy  # no worker started here
    heartbeat.write(settings.heartbeat_file, "celery@node")
    verdict = health.live(settings)
    assert verdict.healthy and "celery@node" in verdict.detail
    stale = time.time() - heartbeat.STALE_AFTER_BEATS * settings.heartbeat_seconds - 1
    os.utime(settings.heartbeat_file, (stale, stale))
    assert not health.live(settings).healthy


@pytest.mark.integration
@pytest.mark.redis
def test_ready_needs_the_broker_and_for_a_worker_its_node(tmp_path: Path) -> None:
    assert health.ready(health_settings(tmp_path), worker=False, timeout=2).healthy
    unreachable = health.ready(health_settings(tmp_path, UNREACHABLE), worker=False, timeout=2)
    assert not unreachable.healthy and "unreachable" in unreachable.detail
    settings = health_settings(tmp_path)
    assert not health.ready(settings, worker=True, timeout=2).healthy  # no heartbeat file
    heartbeat.write(settings.heartbeat_file, f"nobody-{uuid.uuid4().hex}@nowhere")
    verdict = health.ready(settings, worker=True, timeout=0.5)
    assert not verdict.healthy and "did not answer" in verdict.detail


def test_the_sandbox_check_runs_a_real_job(tmp_path: Path) -> None:
    verdict = health.sandbox(health_settings(tmp_path, sandbox_require="seccomp,landlock"))
    assert verdict == health.Verdict(True, "the sandbox ran a job")


def test_a_sandbox_that_cannot_run_a_job_is_not_ready(tmp_path: Path) -> None:
    # A uid base this high leaves no uid to drop to: the uid drop really fails on this host,
    # and a worker that requires it answers every job SandboxUnavailable.
    settings = health_settings(tmp_path, sandbox_require="uid_drop", uid_base=str(2**32 - 1))
    verdict = health.sandbox(settings)
    assert not verdict.healthy
    assert verdict.detail == (
        "the sandbox cannot run a job: SandboxUnavailable: required sandbox mechanisms are "
        "unavailable on this host: uid_drop (active: landlock, netns, no_new_privs, "
        "process_guard, rlimits, seccomp)"
    )


def test_a_job_rerun_from_its_first_page_counts_no_page_twice_and_never_raises() -> None:
    """A runner reruns a job on a fresh fork server when its first one died: progress then
    starts again from page 1, which must neither lower the counter (prometheus raises) nor
    count the pages again."""
    pages = sample("airlock_ocr_pages_total")
    report = _progress_reporter(FakeTask(), Stage.OCR)
    for done in (1, 2, 3, 1, 2, 3, 4):
        report(done, 4)
    assert sample("airlock_ocr_pages_total") == pages + 4
