"""The extract task's body, run against real Redis with a fake bound task and a fake parser."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from celery.exceptions import Ignore
from prometheus_client import REGISTRY
from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from bridge.knowledge.attachments import ExtractionLimits
from bridge.queue.claim_check import sha256_hex, store_payloads
from bridge.queue.jobs import TASK_NAME, ExtractionJob, MalformedJob, Stage
from sandbox.errors import OcrRequired, ParserError, SandboxUnavailable
from sandbox.extractor import SandboxExtractor
from sandbox.runner import SandboxRunner
from tests.redis_server import SUITE_REDIS_URL as REDIS_URL
from tests.sandbox.probes import PROBE_MODULES
from worker import extraction
from worker.application import create_app
from worker.cache import CachedExtractor, cache_namespace
from worker.config import ConfigurationError, Settings
from worker.retries import SandboxChildLost
from worker.runtime import Runtime
from worker.tasks import run_job

#: The workers' cache secret in these tests (production: openssl rand -hex 32, workers only).
CACHE_KEY = "5e" * 32


def settings(**env: str) -> Settings:
    return Settings.from_env(
        {"AIRLOCK_BROKER_URL": REDIS_URL, "AIRLOCK_RESULT_CACHE_KEY": CACHE_KEY, **env}
    )


SETTINGS = settings(AIRLOCK_MAX_DELIVERIES="2")


@dataclass
class Request:
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    retries: int = 0
    expires: str | None = "2099-01-01T00:00:00+00:00"


class FakeApp:
    """What a task publishes with: each task sent, as (name, args, task id, expires)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, tuple[object, ...], str, Any]] = []

    @contextlib.contextmanager
    def producer_or_acquire(self) -> Iterator[object]:
        yield object()

    def send_task(self, name: str, *, args: Any, task_id: str, expires: Any, **_: Any) -> None:
        self.sent.append((name, args, task_id, expires))


class FakeTask:
    """What run_job uses of a bound Celery task."""

    def __init__(self) -> None:
        self.request = Request()
        self.states: list[tuple[str, dict[str, Any]]] = []
        self.app = FakeApp()

    def update_state(self, state: str, meta: dict[str, Any]) -> None:
        self.states.append((state, meta))


class Scripted:
    """A parser stand-in: returns text, or raises what it was given."""

    def __init__(self, result: str | BaseException) -> None:
        self.result = result
        self.calls = 0

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        self.calls += 1
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


@pytest.fixture
def parser(monkeypatch: pytest.MonkeyPatch) -> Scripted:
    scripted = Scripted("extracted\r\ntext")
    monkeypatch.setattr(
        extraction,
        "sandbox_extractor",
        lambda settings, stage, limits, on_progress=None, **_: scripted,
    )
    return scripted


def job_for(
    redis: Redis, payload: bytes, kind: str = "text", stage: Stage = Stage.LIGHT
) -> dict[str, object]:
    store_payloads(redis, {sha256_hex(payload): payload}, 60)
    return ExtractionJob(
        sha256_hex(payload), len(payload), "a.txt", kind, "text/plain",
        ExtractionLimits(), stage, use_cache=False,
    ).to_wire()  # fmt: skip


def unique() -> bytes:
    return uuid.uuid4().bytes


@pytest.mark.integration
@pytest.mark.redis
def test_a_job_is_answered_with_a_success_envelope(redis: Redis, parser: Scripted) -> None:
    payload = unique()
    envelope = run_job(FakeTask(), job_for(redis, payload), Runtime(SETTINGS))
    assert envelope == {
        "ok": True, "sha256": sha256_hex(payload), "label": "a.txt",
        "text": "extracted\ntext", "byte_size": 16,
    }  # fmt: skip


@pytest.mark.integration
@pytest.mark.redis
def test_a_parser_failure_travels_as_its_own_type_and_message(
    redis: Redis, parser: Scripted
) -> None:
    parser.result = ParserError("parser raised KeyError: '/Root'")
    envelope = run_job(FakeTask(), job_for(redis, unique()), Runtime(SETTINGS))
    assert (envelope["ok"], envelope["error"], envelope["type"]) == (
        False, "ExtractionFailed", "ParserError",
    )  # fmt: skip
    assert envelope["reason"] == "parser raised KeyError: '/Root'"


@pytest.mark.integration
@pytest.mark.redis
def test_guards_run_again_on_the_worker(redis: Redis, parser: Scripted) -> None:
    job = job_for(redis, unique(), kind="executable")
    envelope = run_job(FakeTask(), job, Runtime(SETTINGS))
    assert envelope["error"] == "IngestionRejected" and "not extractable" in str(envelope["reason"])
    assert parser.calls == 0


@pytest.mark.integration
@pytest.mark.redis
def test_a_malformed_message_raises(redis: Redis, parser: Scripted) -> None:
    with pytest.raises(MalformedJob):
        run_job(FakeTask(), {"sha256": "x"}, Runtime(SETTINGS))


@pytest.mark.integration
@pytest.mark.redis
def test_a_missing_or_substituted_payload_is_refused(redis: Redis, parser: Scripted) -> None:
    job = job_for(redis, unique())
    job["sha256"] = sha256_hex(b"never stored" + unique())
    envelope = run_job(FakeTask(), job, Runtime(SETTINGS))
    assert envelope["type"] == "PayloadUnavailable" and "no longer in the store" in str(
        envelope["reason"]
    )
    other = unique()
    job = job_for(redis, other)
    redis.set(f"airlock:payload:{job['sha256']}", b"planted bytes!!!")  # same size, other bytes
    envelope = run_job(FakeTask(), job, Runtime(SETTINGS))
    assert "do not match" in str(envelope["reason"]) and parser.calls == 0


@pytest.mark.integration
@pytest.mark.redis
def test_deliveries_past_the_limit_are_answered_as_failures(redis: Redis, parser: Scripted) -> None:
    task = FakeTask()
    job = job_for(redis, unique())
    runtime = Runtime(SETTINGS)
    assert run_job(task, job, runtime)["ok"] is True
    assert run_job(task, job, runtime)["ok"] is True  # a redelivery, within the limit of 2
    envelope = run_job(task, job, runtime)
    assert envelope["type"] == "WorkerLost"
    assert str(envelope["reason"]).startswith("the worker failed 2 times on this job")
    assert parser.calls == 2
    task.request.retries = 1  # a deliberate retry is a new attempt, not a crash
    assert run_job(task, job, runtime)["ok"] is True


@pytest.mark.integration
@pytest.mark.redis
def test_an_unavailable_sandbox_is_raised_for_a_retry(redis: Redis, parser: Scripted) -> None:
    parser.result = SandboxUnavailable("the fork server died")
    with pytest.raises(SandboxUnavailable):
        run_job(FakeTask(), job_for(redis, unique()), Runtime(SETTINGS))


class SignalProbe:
    """The real sandbox, every job run as ``probe-signal``: the child dies of the signal named."""

    def __init__(self, runner: SandboxRunner, signal_name: str) -> None:
        self.inner = SandboxExtractor(runner=runner)
        self.signal_name = signal_name
        self.calls = 0

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        self.calls += 1
        return self.inner.extract(
            "probe-signal", "text/plain", self.signal_name.encode(), max_pages=max_pages
        )


@pytest.fixture(scope="module")
def probe_runner() -> Iterator[SandboxRunner]:
    with SandboxRunner(modules=PROBE_MODULES) as runner:
        yield runner


@pytest.mark.integration
@pytest.mark.redis
def test_a_child_killed_from_outside_the_sandbox_is_retried_within_max_deliveries(
    redis: Redis, probe_runner: SandboxRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SIGKILL none of the sandbox's limits sent (the OOM killer, an operator) says nothing
    about the document: the task raises for a retry until AIRLOCK_MAX_DELIVERIES (2 here)
    attempts were made, and the last attempt answers the crash."""
    killed = SignalProbe(probe_runner, "SIGKILL")
    monkeypatch.setattr(
        extraction, "sandbox_extractor", lambda s, stage, limits, on_progress=None, **_: killed
    )
    task, job = FakeTask(), job_for(redis, unique())
    with pytest.raises(SandboxChildLost, match="SIGKILL from outside the sandbox"):
        run_job(task, job, Runtime(SETTINGS))
    task.request.retries = 1  # Celery's retry of the same task id
    envelope = run_job(task, job, Runtime(SETTINGS))
    assert (envelope["type"], killed.calls) == ("ChildCrashed", 2)
    assert "SIGKILL from outside the sandbox" in str(envelope["reason"])


@pytest.mark.integration
@pytest.mark.redis
def test_a_crash_of_the_parser_itself_is_answered_at_once(
    redis: Redis, probe_runner: SandboxRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    crashed = SignalProbe(probe_runner, "SIGSEGV")
    monkeypatch.setattr(
        extraction, "sandbox_extractor", lambda s, stage, limits, on_progress=None, **_: crashed
    )
    envelope = run_job(FakeTask(), job_for(redis, unique()), Runtime(SETTINGS))
    assert (envelope["type"], envelope["reason"]) == (
        "ChildCrashed", "the parser crashed with SIGSEGV",
    )  # fmt: skip
    assert crashed.calls == 1


@pytest.mark.integration
@pytest.mark.redis
def test_a_light_job_that_needs_ocr_is_replaced_by_an_ocr_job(
    redis: Redis, parser: Scripted
) -> None:
    parser.result = OcrRequired("page 2 has no text layer")
    task = FakeTask()
    job = job_for(redis, unique(), kind="pdf")
    with pytest.raises(Ignore):  # it stores nothing: the OCR stage answers under its id
        run_job(task, job, Runtime(SETTINGS))
    assert parser.calls == 1  # a document too short to split costs no split child
    [(name, (handed,), task_id, expires)] = task.app.sent
    assert (name, task_id, expires) == (TASK_NAME, task.request.id, task.request.expires)
    assert handed == {**job, "stage": "ocr"}
    # On the OCR stage the same failure is an answer.
    task = FakeTask()
    ocr_job = job_for(redis, unique(), kind="pdf", stage=Stage.OCR)
    envelope = run_job(task, ocr_job, Runtime(SETTINGS))
    assert envelope["type"] == "OcrRequired" and not task.app.sent


@pytest.mark.integration
@pytest.mark.redis
def test_the_result_cache_serves_a_repeated_file(redis: Redis, parser: Scripted) -> None:
    payload = unique()
    job = job_for(redis, payload)
    job["use_cache"] = True
    runtime = Runtime(SETTINGS)
    first = run_job(FakeTask(), job, runtime)
    second = run_job(FakeTask(), job, runtime)
    assert first == second and parser.calls == 1
    job["use_cache"] = False  # bypassed per call
    run_job(FakeTask(), job, runtime)
    assert parser.calls == 2
    uncached = Runtime(settings(AIRLOCK_RESULT_CACHE="0"))
    run_job(FakeTask(), {**job, "use_cache": True}, uncached)  # and by configuration
    assert parser.calls == 3


def cache_key_of(runtime: Runtime, payload: bytes) -> str:
    """Where the cache keeps a text file's text: computable by anyone from the file alone."""
    limits = extraction.stage_parse_limits(
        runtime.settings, Stage.LIGHT, ExtractionLimits(), ocr_language=None
    )
    return CachedExtractor(
        Scripted(""), runtime.redis, cache_namespace(limits), 60, sha256_hex(payload), b""
    )._key("text", "text/plain", ExtractionLimits().max_pages)


def refused_entries() -> float:
    return REGISTRY.get_sample_value("airlock_cache_entries_refused_total") or 0.0


@pytest.mark.integration
@pytest.mark.redis
def test_a_cache_entry_planted_by_another_redis_client_is_ignored_and_counted(
    redis: Redis, parser: Scripted
) -> None:
    """The attack: a stream client computes a document's cache key offline and plants its own
    text there (an IBAN in someone's invoice). Without the workers' MAC it is never served."""
    payload = unique()
    job = {**job_for(redis, payload), "use_cache": True}
    runtime = Runtime(SETTINGS)
    key = cache_key_of(runtime, payload)
    refused = refused_entries()
    for planted in (b"IBAN DE00 ATTACKER", b"\0" * 32 + b"IBAN DE00 ATTACKER"):
        redis.set(key, planted)
        envelope = run_job(FakeTask(), job, runtime)
        assert envelope["text"] == "extracted\ntext"  # parsed again, not the planted text
    assert parser.calls == 2 and refused_entries() == refused + 2
    # What the worker stored is served, under this key only.
    assert run_job(FakeTask(), job, runtime)["text"] == "extracted\ntext"
    assert parser.calls == 2
    genuine = redis.get(key)
    assert genuine is not None
    other = unique()
    other_job = {**job_for(redis, other), "use_cache": True}
    redis.set(cache_key_of(runtime, other), genuine)  # a genuine entry moved to another file
    run_job(FakeTask(), other_job, runtime)
    assert parser.calls == 3 and refused_entries() == refused + 3


@pytest.mark.integration
@pytest.mark.redis
def test_without_the_workers_secret_nothing_is_cached(redis: Redis, parser: Scripted) -> None:
    keyless = Runtime(settings(AIRLOCK_RESULT_CACHE_KEY=""))
    job = {**job_for(redis, unique()), "use_cache": True}
    run_job(FakeTask(), job, keyless)
    run_job(FakeTask(), job, keyless)
    assert parser.calls == 2


@pytest.mark.parametrize("key", ["not hex at all", "ab" * 8])
def test_a_weak_or_malformed_cache_secret_is_refused_at_start(key: str) -> None:
    with pytest.raises(ConfigurationError, match="AIRLOCK_RESULT_CACHE_KEY"):
        settings(AIRLOCK_RESULT_CACHE_KEY=key)


def test_the_registered_task_holds_the_delivery_guarantees() -> None:
    app = create_app(SETTINGS)
    task = app.tasks[TASK_NAME]
    assert task.acks_late and task.reject_on_worker_lost
    assert RedisConnectionError in task.autoretry_for and SandboxUnavailable in task.autoretry_for
    assert task.retry_backoff and task.max_retries
    conf = app.conf
    assert conf.worker_prefetch_multiplier == 1
    assert conf.accept_content == ["json"] and conf.task_serializer == "json"
    assert SETTINGS.sandbox.wall_seconds < conf.task_soft_time_limit < conf.task_time_limit
    assert conf.broker_transport_options["visibility_timeout"] > conf.task_time_limit
    assert conf.result_expires == SETTINGS.result_expires


def test_an_unreachable_redis_is_raised_for_a_retry(parser: Scripted) -> None:
    unreachable = Runtime(Settings.from_env({"AIRLOCK_BROKER_URL": "redis://127.0.0.1:1/0"}))
    job = ExtractionJob(
        "ab" * 32, 1, "a.txt", "text", "text/plain", ExtractionLimits(), Stage.LIGHT, False
    ).to_wire()
    with pytest.raises(RedisConnectionError):
        run_job(FakeTask(), job, unreachable)
    assert parser.calls == 0


@pytest.mark.integration
@pytest.mark.redis
def test_pages_done_and_total_are_published_as_progress(redis: Redis, corpus_dir: Path) -> None:
    """With the real sandbox: a PDF's first and last pages (and pages between, at most once a
    second), then an OCR'd frame, become PROGRESS states."""
    pdf = (corpus_dir / "docling_multi_page.pdf").read_bytes()
    task = FakeTask()
    envelope = run_job(task, job_for(redis, pdf, kind="pdf"), Runtime(SETTINGS))
    assert envelope["ok"] is True
    assert all(
        state == "PROGRESS" and meta["stage"] == "light" and meta["total"] == 5
        for state, meta in task.states
    )
    dones = [meta["done"] for _, meta in task.states]
    assert dones[0] == 1 and dones[-1] == 5 and dones == sorted(set(dones))
    image = (corpus_dir / "tesseract_phototest.tif").read_bytes()
    task = FakeTask()
    envelope = run_job(
        task, job_for(redis, image, kind="image", stage=Stage.OCR), Runtime(SETTINGS)
    )
    assert envelope["ok"] is True and "quick brown dog" in str(envelope["text"])
    assert task.states == [("PROGRESS", {"stage": "ocr", "done": 1, "total": 1})]


def test_the_workers_sandbox_holds_the_deployments_requirement_and_uid_base() -> None:
    """AIRLOCK_SANDBOX_REQUIRE and AIRLOCK_SANDBOX_UID_BASE reach the sandbox through Settings:
    a uid base this high leaves no uid to drop to, so a worker requiring the drop runs no job."""
    settings = Settings.from_env(
        {"AIRLOCK_SANDBOX_REQUIRE": "uid_drop", "AIRLOCK_SANDBOX_UID_BASE": str(2**32 - 1)}
    )
    extractor = extraction.sandbox_extractor(
        settings, Stage.LIGHT, ExtractionLimits(), ocr_language=None, deadline=None
    )
    with pytest.raises(SandboxUnavailable, match=r"required sandbox mechanisms .*: uid_drop"):
        extractor.extract("text", "text/plain", b"never parsed", max_pages=1)
