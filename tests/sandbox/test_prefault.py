"""Copying ahead: the pages a rehearsal writes are learned, a waiting child copies them, and a
job that arrives stops the copying (``sandbox/prefault.py``)."""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sandbox import prefault
from sandbox.fork_server import ForkServer
from sandbox.limits import SandboxLimits
from tests.helpers import running

PAGE = mmap.PAGESIZE


def _address(buffer: bytearray) -> int:
    return ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))


def _whole_pages(buffer: bytearray) -> range:
    """The start of every page wholly inside ``buffer``."""
    low = -(-_address(buffer) // PAGE) * PAGE
    high = (_address(buffer) + len(buffer)) // PAGE * PAGE
    return range(low, high, PAGE)


def _covered(spans: prefault.Ranges, page: int) -> bool:
    return any(start <= page < start + length for start, length in spans)


def _touched(buffer: bytearray) -> None:
    for offset in range(0, len(buffer), PAGE):
        buffer[offset] = 1


def test_the_pages_a_rehearsal_writes_are_learned_and_the_ones_it_only_holds_are_not() -> None:
    written, kept = bytearray(64 * PAGE), bytearray(64 * PAGE)
    _touched(written)
    _touched(kept)  # both are resident here, so the fork shares every page of both

    spans = prefault.learn(lambda: _touched(written))

    assert all(_covered(spans, page) for page in _whole_pages(written))
    assert not any(_covered(spans, page) for page in _whole_pages(kept))


def test_a_kernel_without_the_advice_teaches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before Linux 5.14 the kernel answers EINVAL for every span: asked once, up front, so
    that no child spends its wait failing one call per span."""
    written = bytearray(16 * PAGE)
    monkeypatch.setattr(prefault, "MADV_POPULATE_WRITE", 0x7FFF)  # advice no kernel knows

    assert prefault.learn(lambda: _touched(written)) == ()


@pytest.mark.parametrize(
    "rehearsal",
    [
        pytest.param(lambda: 1 / 0, id="raises"),
        pytest.param(lambda: os.kill(os.getpid(), signal.SIGKILL), id="dies"),
        pytest.param(signal.pause, id="never-ends"),
    ],
)
def test_a_rehearsal_that_fails_teaches_nothing_and_leaves_no_process(
    rehearsal: Callable[[], object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prefault, "_LEARN_SECONDS", 1.0)
    before = _children()

    assert prefault.learn(rehearsal) == ()
    assert _children() == before


def _children() -> set[int]:
    pid = os.getpid()
    return {
        int(child)
        for task in os.listdir(f"/proc/{pid}/task")
        for child in open(f"/proc/{pid}/task/{task}/children").read().split()
    }


def _in_a_fork(work: Callable[[], bytes]) -> bytes:
    """What ``work`` returns, run in a fork of this process (which shares its pages)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            os.write(write_end, work())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    answer = os.read(read_end, 1 << 16)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    return answer


@pytest.fixture
def job_pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    yield read_end, write_end
    for fd in (read_end, write_end):
        with contextlib.suppress(OSError):
            os.close(fd)


def test_a_waiting_child_copies_the_pages_so_its_job_finds_them_its_own(
    job_pipe: tuple[int, int],
) -> None:
    shared = bytearray(64 * PAGE)
    _touched(shared)
    spans = ((_whole_pages(shared)[0], len(_whole_pages(shared)) * PAGE),)

    def copy_then_look() -> bytes:
        copied = prefault.copy_until_job(spans, job_pipe[0])
        held = all(_covered(tuple(prefault.written_ranges()), p) for p in _whole_pages(shared))
        return f"{copied} {held}".encode()

    assert _in_a_fork(copy_then_look) == f"{len(_whole_pages(shared))} True".encode()


@pytest.mark.parametrize("arrival", ["a job waiting", "the runner gone", "no pipe"])
def test_a_job_that_has_arrived_stops_the_copying_before_it_starts(
    arrival: str, job_pipe: tuple[int, int]
) -> None:
    read_end, write_end = job_pipe
    if arrival == "a job waiting":
        os.write(write_end, b"\0\0\0\x10")
    elif arrival == "the runner gone":
        os.close(write_end)  # the child must not copy for a job that will never come
    else:
        os.close(read_end)  # nothing to wait on: reading it fails the job at once anyway
    big = bytearray(8 * prefault.CHUNK_PAGES * PAGE)

    assert prefault.copy_until_job(((_address(big), len(big)),), read_end) == 0


def test_a_span_no_longer_mapped_is_skipped_and_the_rest_is_copied(
    job_pipe: tuple[int, int],
) -> None:
    gone = mmap.mmap(-1, 16 * PAGE)
    gone_address = ctypes.addressof(ctypes.c_char.from_buffer(gone))
    gone.close()
    kept = bytearray(32 * PAGE)
    spans = ((gone_address, 16 * PAGE), (_whole_pages(kept)[0], len(_whole_pages(kept)) * PAGE))

    assert prefault.copy_until_job(spans, job_pipe[0]) == len(_whole_pages(kept))


def test_a_jailed_warm_child_copies_ahead_under_its_filter_and_lives() -> None:
    """The fork server learns from the parsers' samples, and its jailed children copy those
    pages while they wait: their private memory grows with no job, and seccomp lets them."""
    server = ForkServer(SandboxLimits(), ("sandbox.extractors.all",), 2_500_000, frozenset(), 120.0)
    try:
        server.prefill(1)
        child = server.take(30.0)
        try:
            deadline = time.monotonic() + 30.0
            while _private_dirty(child.pid) < 8 << 20:
                assert time.monotonic() < deadline, "the waiting child copied nothing ahead"
                time.sleep(0.01)
            assert running(child.pid)  # not killed by its filter
        finally:
            child.kill()
            for fd in (child.job_fd, child.answer_fd, child.pidfd):
                os.close(fd)
    finally:
        server.close()


def _private_dirty(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup") as rollup:
        for line in rollup:
            if line.startswith("Private_Dirty:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no Private_Dirty line")


def _sealed_mapping(pages: int, protection: int) -> tuple[int, Callable[[], None]]:
    """A private anonymous mapping of ``pages`` with ``protection``, and what unmaps it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    )
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    address = libc.mmap(None, pages * PAGE, protection, flags, -1, 0)
    assert address not in (None, ctypes.c_void_p(-1).value)
    return address, lambda: libc.munmap(address, pages * PAGE)


@pytest.mark.parametrize("protection", [mmap.PROT_READ, 0], ids=["read-only", "reserved"])
def test_a_span_no_longer_writable_is_skipped_and_the_rest_is_copied(
    protection: int, job_pipe: tuple[int, int]
) -> None:
    """The kernel answers EINVAL for a span that is not writable (memory the learner saw grow
    inside what is only a reservation here); taken for a kernel without the advice, it had
    ended the copying of every span after it."""
    sealed, unmap = _sealed_mapping(16, protection)
    try:
        kept = bytearray(33 * PAGE)
        spans = ((sealed, 16 * PAGE), (_whole_pages(kept)[0], len(_whole_pages(kept)) * PAGE))

        assert prefault.copy_until_job(spans, job_pipe[0]) == len(_whole_pages(kept))
    finally:
        unmap()


class _ArrivingAdvice:
    """Stands in for libc's madvise: the job arrives during the first copy; counts the pages
    copied from then on, which the job waits for."""

    def __init__(self, write_end: int) -> None:
        self.write_end = write_end
        self.pages_waited = 0

    def madvise(self, _start: int, length: int, _advice: int) -> int:
        if not self.pages_waited:
            os.write(self.write_end, b"\0\0\0\x10")
        self.pages_waited += length // PAGE
        return 0


def test_a_job_arriving_mid_copy_waits_at_most_one_batch(
    job_pipe: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Looked at only once the pages since the last look reached a batch, counted after each
    span, the pipe could be looked at one page short of a batch and the next span of a whole
    batch copied before the next look: a job waited up to two batches."""
    advice = _ArrivingAdvice(job_pipe[1])
    monkeypatch.setattr(prefault, "_LIBC", advice)
    batch = prefault.CHUNK_PAGES * PAGE
    spans = ((1 << 30, batch - PAGE), (2 << 30, batch), (3 << 30, batch))

    prefault.copy_until_job(spans, job_pipe[0])

    assert advice.pages_waited <= prefault.CHUNK_PAGES


def test_a_rehearsal_that_never_ends_leaves_no_process_it_started(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A learner killed alone left what its sample's parse had started (a tesseract for an
    image sample, say) running, adopted by the fork server and unjailed."""
    monkeypatch.setattr(prefault, "_LEARN_SECONDS", 1.0)
    told = tmp_path / "helper"

    def rehearsal() -> None:
        helper = subprocess.Popen(["sleep", "60"])
        told.write_text(str(helper.pid))
        signal.pause()

    assert prefault.learn(rehearsal) == ()
    helper = int(told.read_text())
    try:
        deadline = time.monotonic() + 10.0
        while running(helper):
            assert time.monotonic() < deadline, "the helper of a killed rehearsal still runs"
            time.sleep(0.01)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(helper, signal.SIGKILL)
