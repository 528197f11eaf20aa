"""The runner's contract: answers, typed failures, threads, restarts, shutdown and hygiene."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import sandbox.errors as errors
from sandbox import doctor
from sandbox.document import Document, Paragraph
from sandbox.errors import (
    CeilingExceeded,
    NoExtractor,
    ParserError,
    SandboxError,
    SandboxUnavailable,
    UnreadableInput,
    UnreadableText,
    WallClockExceeded,
    Withdrawn,
)
from sandbox.extractor import SandboxExtractor
from sandbox.jail import DEFAULT_UID_BASE, MECHANISMS
from sandbox.limits import MIB, ParseLimits, SandboxLimits
from sandbox.runner import ExtractionResult, SandboxRunner
from tests.helpers import running
from tests.pdf_builders import slow_text_pdf
from tests.sandbox.probes import PROBE_MODULES

LIMITS = SandboxLimits(memory_bytes=512 * MIB, cpu_seconds=5, wall_seconds=10.0)


@pytest.fixture(scope="module")
def runner() -> Iterator[SandboxRunner]:
    with SandboxRunner(LIMITS, modules=PROBE_MODULES) as sandbox:
        yield sandbox


# --- /proc helpers: the tests look at the real processes, not at the runner's bookkeeping -----


def _parents() -> dict[int, int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def _descendants(root: int) -> set[int]:
    parents = _parents()
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _zygotes() -> set[int]:
    found = set()
    for pid, parent in _parents().items():
        if parent == os.getpid():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"sandbox.zygote" in cmdline:
                found.add(pid)
    return found


def _started_zygote(start: Callable[[], object]) -> int:
    before = _zygotes()
    start()
    (zygote,) = _zygotes() - before
    return zygote


def _scratch_root(zygote: int) -> Path:
    argv = Path(f"/proc/{zygote}/cmdline").read_bytes().split(b"\0")
    (config,) = (arg for arg in argv if arg.startswith(b"{"))
    return Path(json.loads(config)["scratch_root"])


def _processes_working_in(root: Path) -> set[int]:
    """Every process whose cwd is under ``root``: a job and anything it started, even one that
    escaped its process group or outlived a deleted scratch directory."""
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/cwd").startswith(f"{root}/"):
                    found.add(int(entry))
            except OSError:
                continue
    return found


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _eventually(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


# --- answers ---------------------------------------------------------------------------------


def test_text_comes_back(runner: SandboxRunner) -> None:
    result = runner.run("probe-echo", "text/plain", "héllo wörld ✓".encode())
    document = Document([Paragraph("héllo wörld ✓")])
    assert result == ExtractionResult("héllo wörld ✓", None, document)


def test_a_lone_surrogate_is_replaced_not_fatal(runner: SandboxRunner) -> None:
    result = runner.run("probe-text", "text/plain", json.dumps("a\ud800b\U0001f600").encode())
    assert result.text == "a\ufffdb\U0001f600"


def test_a_large_payload_arrives_whole(runner: SandboxRunner) -> None:
    payload = os.urandom(8 * MIB)
    expected = f"{len(payload)} {zlib.crc32(payload)}"
    assert runner.run("probe-length", "x", payload).text == expected


def test_parse_limits_and_media_type_reach_the_parser(runner: SandboxRunner) -> None:
    limits = ParseLimits(max_pages=3, max_pixels=99, max_text_chars=7, ocr_language="eng+deu")
    report = json.loads(runner.run("probe-limits", "image/png", b"", limits).text)
    assert report == {
        "media_type": "image/png",
        "max_pages": 3,
        "max_pixels": 99,
        "max_text_chars": 7,
        "ocr_language": "eng+deu",
    }


def test_an_oversized_header_is_refused_before_any_child_is_used(runner: SandboxRunner) -> None:
    with pytest.raises(ValueError, match="64 KiB"):
        runner.run("probe-echo", "x" * 70_000, b"")


# --- typed failures from answers -------------------------------------------------------------


def test_a_parser_exception_is_named(runner: SandboxRunner) -> None:
    with pytest.raises(ParserError, match=r"^parser raised ValueError: boom$"):
        runner.run("probe-raise", "text/plain", b"boom")


def test_system_exit_from_a_parser_is_a_parser_error(runner: SandboxRunner) -> None:
    with pytest.raises(ParserError, match="parser raised SystemExit: 4"):
        runner.run("probe-exit-raise", "text/plain", b"4")


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("ceiling", CeilingExceeded),
        ("unreadable", UnreadableInput),
        ("unreadable_text", UnreadableText),
        ("odd", ParserError),
    ],
)
def test_refusals_map_to_their_types(
    runner: SandboxRunner, code: str, error: type[SandboxError]
) -> None:
    with pytest.raises(error, match="refused by probe"):
        runner.run("probe-refuse", "text/plain", code.encode())


def test_an_unknown_kind_has_no_extractor(runner: SandboxRunner) -> None:
    with pytest.raises(NoExtractor, match="no extractor is registered for kind 'nope'"):
        runner.run("nope", "text/plain", b"")


def test_every_failure_is_a_sandbox_error() -> None:
    classes = [value for value in vars(errors).values() if isinstance(value, type)]
    assert all(issubclass(cls, errors.SandboxError) for cls in classes)


# --- the extractor port ----------------------------------------------------------------------


def test_the_extractor_overrides_max_pages(runner: SandboxRunner) -> None:
    extractor = SandboxExtractor(parse_limits=ParseLimits(max_pixels=5), runner=runner)
    report = json.loads(extractor.extract("probe-limits", "application/pdf", b"", max_pages=2))
    assert report["max_pages"] == 2 and report["max_pixels"] == 5


def test_the_default_extractor_runs_the_real_parsers() -> None:
    extractor = SandboxExtractor()
    text = extractor.extract("text", "text/plain", b"plain words", max_pages=1)
    assert text == "plain words"


# --- threads, warm children, restarts, shutdown ----------------------------------------------


def test_concurrent_jobs_from_many_threads(runner: SandboxRunner) -> None:
    def job(index: int) -> str:
        return runner.run("probe-echo", "text/plain", f"job {index}".encode()).text

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(job, range(80)))
    assert results == [f"job {index}" for index in range(80)]


def test_fork_on_demand_without_warm_children() -> None:
    with SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES) as sandbox:
        assert [sandbox.run("probe-echo", "x", b"%d" % i).text for i in range(3)] == ["0", "1", "2"]


def test_warm_children_are_jailed_before_any_job() -> None:
    with SandboxRunner(LIMITS, warm_children=2, modules=PROBE_MODULES) as sandbox:
        zygote = _started_zygote(lambda: sandbox.mechanisms)

        def jailed(pid: int) -> bool:
            status = Path(f"/proc/{pid}/status").read_text()
            return (
                os.stat(f"/proc/{pid}").st_uid == DEFAULT_UID_BASE + pid
                and "NoNewPrivs:\t1" in status
                and "Seccomp:\t2" in status
            )

        # Both waiting children get there with no job sent: the jail is not on the job's path.
        assert _eventually(
            lambda: len(_descendants(zygote)) == 2 and all(map(jailed, _descendants(zygote)))
        )


@pytest.mark.parametrize("noticed", [True, False], ids=["noticed", "at-once"])
@pytest.mark.slow
def test_a_fork_server_killed_between_jobs_is_replaced_for_the_next_job(noticed: bool) -> None:
    """kill -9 of the zygote between jobs; the jobs after it run on the same runner. At once,
    the next job can find the dead server still looking alive, and a warm child that its
    death is about to kill: every job must succeed all the same."""
    others = _zygotes()
    with SandboxRunner(LIMITS, warm_children=2, modules=PROBE_MODULES) as sandbox:
        zygote = _started_zygote(lambda: sandbox.run("probe-echo", "x", b"first"))
        for _ in range(3):
            os.kill(zygote, signal.SIGKILL)
            if noticed:
                assert _eventually(lambda: not running(zygote))  # noqa: B023 - awaited here
            # Two jobs may still be answered by the dying server's warm children; the
            # third needs a child the dead server cannot fork.
            for text in ("next", "again", "third"):
                assert sandbox.run("probe-echo", "x", text.encode()).text == text
            assert _eventually(lambda: zygote not in _zygotes())  # noqa: B023 - awaited here
            (zygote,) = _zygotes() - others


class _KillForkServerOnProgress:
    """A progress callback that kill -9s the job's fork server at the first ``times`` pages it
    hears: the zygote dies while the job's child is running. Build it before the runner's
    first job, so that it knows which fork servers (other tests' runners) are not this job's."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.heard: list[int] = []
        self.others = _zygotes()

    def __call__(self, done: int, total: int) -> None:
        self.heard.append(done)
        if len(self.heard) <= self.times:
            for zygote in _zygotes() - self.others:
                os.kill(zygote, signal.SIGKILL)


def test_a_job_whose_fork_server_dies_mid_job_is_run_again_on_a_fresh_one() -> None:
    with SandboxRunner(LIMITS, modules=PROBE_MODULES) as sandbox:
        kill = _KillForkServerOnProgress(times=1)
        first = _started_zygote(lambda: sandbox.mechanisms)
        result = sandbox.run("probe-progress-then", "x", b"probe-sleep 0.5", on_progress=kill)
        assert result.text == "slept"
        assert kill.heard == [1, 1]  # two runs of the job, one page each
        assert first not in _zygotes() and len(_zygotes() - kill.others) == 1
        assert sandbox.run("probe-echo", "x", b"next").text == "next"


def test_a_fork_server_that_dies_twice_under_one_job_is_unavailable_not_hung() -> None:
    """One retry, not a loop. The probe sleeps past the wall clock, so a job that waited for
    its dead child instead of noticing the death would end WallClockExceeded."""
    with SandboxRunner(LIMITS, modules=PROBE_MODULES) as sandbox:
        kill = _KillForkServerOnProgress(times=2)
        with pytest.raises(SandboxUnavailable, match="fork server died"):
            sandbox.run("probe-progress-then", "x", b"probe-sleep 30", on_progress=kill)
        assert kill.heard == [1, 1]
        assert sandbox.run("probe-echo", "x", b"next").text == "next"


def test_a_child_that_answered_is_not_run_again_when_its_fork_server_dies() -> None:
    """The child's verdict is in the answer pipe before its fork server dies: it stands."""
    with SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES) as sandbox:
        zygote = _started_zygote(lambda: sandbox.mechanisms)
        heard: list[int] = []

        def answer_then_kill(done: int, total: int) -> None:
            heard.append(done)
            # No warm children: the job's is the only one. It answers, then exits.
            assert _eventually(lambda: not any(map(running, _descendants(zygote))))
            os.kill(zygote, signal.SIGKILL)

        with pytest.raises(ParserError, match="ValueError: own verdict"):
            sandbox.run(
                "probe-progress-then", "x", b"probe-raise own verdict", on_progress=answer_then_kill
            )
        assert heard == [1]
        assert sandbox.run("probe-echo", "x", b"next").text == "next"
        assert zygote not in _zygotes()


@pytest.mark.slow
def test_close_removes_any_scratch_tree_and_tolerates_a_dead_fork_server() -> None:
    """close() never raises: not on a chain deeper than the recursion limit and PATH_MAX,
    not on a fork server that was kill -9ed first."""
    sandbox = SandboxRunner(LIMITS, warm_children=2, modules=PROBE_MODULES)
    zygote = _started_zygote(lambda: sandbox.run("probe-echo", "x", b"1"))
    scratch = _scratch_root(zygote)
    level = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(3000):  # "dd/" x 3000 is 9000 bytes: past PATH_MAX as one path
        os.mkdir("dd", dir_fd=level)
        Path(f"/proc/self/fd/{level}/file").write_bytes(b"x")
        below = os.open("dd", os.O_RDONLY | os.O_DIRECTORY, dir_fd=level)
        os.close(level)
        level = below
    os.close(level)
    os.kill(zygote, signal.SIGKILL)
    assert _eventually(lambda: not running(zygote))
    sandbox.close()
    sandbox.close()
    assert not scratch.exists()
    assert zygote not in _zygotes()


def test_a_child_that_cannot_jail_itself_is_unavailable_not_hung() -> None:
    with SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES) as sandbox:
        scratch = _scratch_root(_started_zygote(lambda: sandbox.mechanisms))
        scratch.rmdir()  # the next child cannot make its scratch directory
        with pytest.raises(SandboxUnavailable, match="could not be forked or jailed"):
            sandbox.run("probe-echo", "x", b"never")


def test_close_ends_every_process_and_removes_scratch() -> None:
    sandbox = SandboxRunner(LIMITS, warm_children=2, modules=PROBE_MODULES)
    zygote = _started_zygote(lambda: sandbox.run("probe-echo", "x", b"1"))
    children = _descendants(zygote)
    scratch = _scratch_root(zygote)
    assert scratch.is_dir()
    sandbox.close()
    assert zygote not in _zygotes()
    assert not any(os.path.exists(f"/proc/{pid}") for pid in children)
    assert not scratch.exists()
    with pytest.raises(SandboxUnavailable, match="closed"):
        sandbox.run("probe-echo", "x", b"")


def test_a_forked_worker_gets_its_own_fork_server(runner: SandboxRunner) -> None:
    assert runner.run("probe-echo", "x", b"before").text == "before"
    pid = os.fork()
    if pid == 0:
        try:
            ok = runner.run("probe-echo", "x", b"child").text == "child"
            runner.close()
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert runner.run("probe-echo", "x", b"after").text == "after"


# --- hygiene ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_no_leaked_process_scratch_dir_or_memory_after_200_jobs() -> None:
    limits = SandboxLimits(
        memory_bytes=512 * MIB, cpu_seconds=5, wall_seconds=0.3, output_bytes=64 * 1024
    )
    jobs = [
        ("probe-echo", b"ok"),
        ("probe-raise", b"no"),
        ("probe-exit", b"3"),
        ("probe-signal", b"SIGSEGV"),
        ("probe-big-answer", b"200000"),  # killed by the runner at the output cap
        ("probe-fork", b"20"),  # leaves sleeping grandchildren for the group kill
        ("probe-raw-answer", b"\x00\x00\x00\x09garbage"),
        ("probe-write", b"scratch.bin 1000"),
        ("probe-unshare-user", b""),
    ]

    def one(index: int) -> None:
        kind, payload = ("probe-sleep", b"30") if index % 20 == 0 else jobs[index % len(jobs)]
        with contextlib.suppress(SandboxError):
            runner.run(kind, "x", payload)  # type: ignore[attr-defined]  # the with's runner

    with SandboxRunner(limits, warm_children=2, modules=PROBE_MODULES) as runner:
        zygote = _started_zygote(lambda: runner.mechanisms)
        scratch = _scratch_root(zygote)
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(one, range(1, 40)))
            baseline = _rss_bytes()
            list(pool.map(one, range(200)))

        def settled() -> bool:
            # A replacement warm child has its scratch directory before it has entered it, so
            # the working directories are part of what settles, not a check after it.
            children = _descendants(zygote)
            return (
                len(children) == 2
                and {int(p.name) for p in scratch.iterdir()} == children
                and _processes_working_in(scratch) == children
            )

        assert _eventually(settled), (
            _descendants(zygote),
            sorted(scratch.iterdir()),
            _processes_working_in(scratch),
        )
        assert _rss_bytes() - baseline < 10 * MIB
    assert not scratch.exists()
    assert zygote not in _zygotes()
    assert _processes_working_in(scratch) == set()


# --- the doctor ------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_doctor_names_the_layer_that_blocks_tcp() -> None:
    report = doctor.probe()
    assert report.mechanisms == MECHANISMS and report.missing == frozenset()
    assert report.tcp_blocked and report.tcp_outcome.startswith("ForbiddenOperation")
    outcomes = {check.layer: check for check in report.layers}
    assert all(check.blocks_tcp for check in report.layers)
    assert outcomes["seccomp"].outcome.startswith("ForbiddenOperation")
    assert "PermissionError" in outcomes["landlock"].outcome
    assert "Network is unreachable" in outcomes["netns"].outcome
    summary = "TCP connect to 127.0.0.1 with all layers: blocked"
    assert any(line.startswith(summary) for line in report.lines())


_WORKER = """
import sys
from sandbox.runner import SandboxRunner
from tests.sandbox.probes import PROBE_MODULES
runner = SandboxRunner(modules=PROBE_MODULES)
runner.run("probe-echo", "x", b"warm")
print(flush=True)
runner.run("probe-sleep", "x", b"60")
"""


def test_nothing_outlives_a_killed_worker() -> None:
    """kill -9 of the worker: no atexit, no close(); the zygote sees its socket close."""
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER],
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert worker.stdout is not None
    worker.stdout.readline()
    zygotes = [pid for pid, parent in _parents().items() if parent == worker.pid]
    (zygote,) = zygotes
    scratch = _scratch_root(zygote)
    assert _eventually(lambda: len(_descendants(zygote)) >= 2)  # the sleeper, a warm child
    doomed = _descendants(zygote) | {zygote}
    worker.kill()
    worker.wait()
    assert _eventually(lambda: not any(running(pid) for pid in doomed))
    assert _eventually(lambda: not scratch.exists())


def test_a_child_still_running_at_the_callers_deadline_is_killed_then(
    runner: SandboxRunner,
) -> None:
    """A page nobody waits for any more is not read to its end (docs/queue.md, Fan-out OCR):
    the caller's deadline, earlier than the wall clock, ends the child and says whose it was."""
    started = time.monotonic()
    with pytest.raises(WallClockExceeded, match="caller's deadline passed"):
        runner.run("probe-sleep", "x", b"30", deadline=started + 0.5)
    assert time.monotonic() - started < LIMITS.wall_seconds / 2


def test_a_withdrawn_job_is_killed_while_it_runs(runner: SandboxRunner) -> None:
    """The caller withdraws the job mid-parse (the door's DELETE): its child is killed and
    the job ends as Withdrawn, with most of the parse's CPU never spent."""
    withdrawn = threading.Event()
    # The fault: a withdrawal half a second into a parse of about 6 CPU-s. Withdrawn (not the
    # page's text) says the child was still running when it was killed.
    setter = threading.Timer(0.5, withdrawn.set)
    setter.start()
    try:
        with pytest.raises(Withdrawn, match="withdrew the job while it ran"):
            runner.run("pdf", "application/pdf", slow_text_pdf(), withdrawn=withdrawn)
    finally:
        setter.cancel()
