"""The door's job table on its own: a job withdrawn while queued never reaches the runner, a
running one's answer is discarded, and one owner's jobs are invisible to another."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from bridge.knowledge.attachments import AttachmentRef, ExtractionLimits
from worker.door.jobs import HttpFailure, Job, Jobs, JobState


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


def test_a_withdrawn_queued_job_never_runs_and_a_running_ones_answer_is_dropped() -> None:
    runner, ended = _Gated(), list[Job]()
    jobs = _table(runner, ended)
    try:
        first = jobs.submit("a", [_ref("first")], ExtractionLimits(), lambda i: i)
        _until(lambda: runner.ran == ["first"])
        second = jobs.submit("a", [_ref("second")], ExtractionLimits(), lambda i: i)
        assert second.state is JobState.QUEUED  # one worker, busy with the first
        assert jobs.withdraw("a", second.id) is second
        assert jobs.withdraw("a", first.id) is first  # running: its answer will be dropped
        runner.release.set()
        third = jobs.submit("a", [_ref("third")], ExtractionLimits(), lambda i: i)
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
        job = jobs.submit("a", [_ref("mine")], ExtractionLimits(), lambda i: i)
        assert jobs.find("b", job.id) is None
        assert jobs.withdraw("b", job.id) is None
        assert jobs.find("a", job.id) is job
    finally:
        jobs.close()
