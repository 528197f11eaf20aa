"""The door's job table on its own: a job withdrawn while queued never reaches the runner, a
running one's answer is discarded, and one owner's jobs are invisible to another."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import pytest

from bridge.knowledge.attachments import AttachmentRef, ExtractionLimits
from worker.door.jobs import BytesFull, HttpFailure, Job, Jobs, JobState


class _Gated:
    """A runner that records each job it is handed and waits for the test to let it end."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.release = threading.Event()

    def __call__(
        self,
        refs: Sequence[AttachmentRef],
        limits: ExtractionLimits,
        file_done: Callable[[], None],
        pages: Callable[[int, int], None],
        withdrawn: threading.Event,
        *,
        ocr_language: str | None,
    ) -> str:
        self.ran.append(refs[0].label)
        assert self.release.wait(30)
        file_done()
        return '{"text": ""}'


def _ref(label: str) -> AttachmentRef:
    return AttachmentRef(label, "text", "text/plain", b"x")


def _table(runner: _Gated, ended: list[Job]) -> Jobs:
    return Jobs(
        runner,
        lambda exc: HttpFailure(500, "InternalError", str(exc)),
        workers=1,
        ttl=60,
        max_jobs=10,
        owner_max_jobs=10,
        max_held_bytes=1 << 20,
        on_end=ended.append,
    )


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def _submit(jobs: Jobs, owner: str, name: str) -> Job:
    """A job of one file, its bytes held as the door holds an upload's."""
    reservation = jobs.reservation()
    reservation.add(len(_ref(name).payload))
    return jobs.submit(
        owner,
        [_ref(name)],
        ExtractionLimits(),
        lambda i: i,
        ocr_language=None,
        reservation=reservation,
    )


def test_a_withdrawn_queued_job_never_runs_and_a_running_ones_answer_is_dropped() -> None:
    runner, ended = _Gated(), list[Job]()
    jobs = _table(runner, ended)
    try:
        first = _submit(jobs, "a", "first")
        _until(lambda: runner.ran == ["first"])
        second = _submit(jobs, "a", "second")
        assert second.state is JobState.QUEUED  # one worker, busy with the first
        assert jobs.withdraw("a", second.id) is second
        assert jobs.withdraw("a", first.id) is first  # running: its answer will be dropped
        runner.release.set()
        third = _submit(jobs, "a", "third")
        _until(lambda: third.state is JobState.DONE)
        assert runner.ran == ["first", "third"]  # the second was never handed over
        assert first.result is None and first.state is JobState.WITHDRAWN
        assert [job.id for job in ended] == [third.id]
    finally:
        runner.release.set()
        jobs.close()


def test_one_owner_cannot_see_or_withdraw_anothers_job() -> None:
    runner, ended = _Gated(), list[Job]()
    runner.release.set()
    jobs = _table(runner, ended)
    try:
        job = _submit(jobs, "a", "mine")
        assert jobs.find("b", job.id) is None
        assert jobs.withdraw("b", job.id) is None
        assert jobs.find("a", job.id) is job
    finally:
        jobs.close()


def test_upload_bytes_are_held_until_the_job_lets_them_go() -> None:
    """The bound counts bodies as they arrive and jobs until their runs end: a refused or
    withdrawn upload gives its bytes back, so the table never leaks room."""
    runner, ended = _Gated(), list[Job]()
    jobs = _table(runner, ended)  # a bound of 1 MiB
    try:
        arriving = jobs.reservation()
        arriving.add(600 * 1024)
        other = jobs.reservation()
        with pytest.raises(BytesFull) as refused:
            other.add(600 * 1024)  # no room while the first body arrives
        assert not refused.value.never and other.size == 0
        with pytest.raises(BytesFull) as never:
            other.add(2 << 20)
        assert never.value.never
        assert not jobs.full()
        other.add(350 * 1024)
        assert jobs.full()  # under a tenth of the bound left: not ready for an upload
        other.release()
        job = jobs.submit(
            "a",
            [_ref("big")],
            ExtractionLimits(),
            lambda i: i,
            ocr_language=None,
            reservation=arriving,
        )
        assert arriving.size == 0 and job.held == 600 * 1024
        arriving.release()  # a no-op: the job took the bytes
        queued = jobs.reservation()
        with pytest.raises(BytesFull):
            queued.add(600 * 1024)  # the running job still holds its bytes
        runner.release.set()
        _until(lambda: job.state is JobState.DONE)
        queued.add(600 * 1024)  # given back when its run ended
        queued.release()
        assert not jobs.full()
    finally:
        runner.release.set()
        jobs.close()
