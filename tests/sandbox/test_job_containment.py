"""A job is the unit of containment: what it may create, hold and leave, measured from the host.

Each attack is code inside a jailed child (``tests.sandbox.probes``). With every layer on, the
allow list kills it at the first call it needs; with the filter skipped, the layer behind it
(the fork server's job budget, the IPC namespace, Landlock, DAC) still holds. After every job
the host is checked: no process of the job left, no IPC object, no scratch directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.errors import (
    ChildCrashed,
    CpuLimitExceeded,
    ForbiddenOperation,
    MemoryLimitExceeded,
)
from sandbox.jail import remove_tree
from sandbox.limits import MIB, SandboxLimits
from sandbox.runner import SandboxRunner
from tests.sandbox.probes import PROBE_MODULES

LIMITS = SandboxLimits(
    memory_bytes=1024 * MIB, cpu_seconds=2, wall_seconds=20.0, processes=16, file_size_bytes=MIB
)
NO_FILTER = frozenset({"seccomp"})


def _job_processes(runner: SandboxRunner) -> list[str]:
    """Everything the fork server still has beneath it. The runners here keep no warm child,
    and the fork server is a subreaper, so anything a job left behind is listed here."""
    zygote = runner.fork_server_pid
    return Path(f"/proc/{zygote}/task/{zygote}/children").read_text().split()


def _assert_nothing_left(runner: SandboxRunner, scratch_root: Path | None = None) -> None:
    """No process of any job, and (given the fork server's root) no scratch directory left."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = [*_job_processes(runner), *(scratch_root.iterdir() if scratch_root else ())]
        if not left:
            return
        time.sleep(0.05)
    assert _job_processes(runner) == []
    assert scratch_root is None or list(scratch_root.iterdir()) == []


def _shm_segments() -> int:
    return len(Path("/proc/sysvipc/shm").read_text().splitlines()) - 1


@pytest.fixture
def runner() -> Iterator[SandboxRunner]:
    with SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES) as sandbox:
        yield sandbox
        _assert_nothing_left(sandbox)


def _run(sandbox: SandboxRunner, kind: str, argument: str) -> str:
    return sandbox.run(kind, "text/plain", argument.encode()).text


def _zygote_children_cpu(runner: SandboxRunner) -> float:
    """CPU seconds of every process the fork server has reaped: each job, and what it left."""
    with open(f"/proc/{runner.fork_server_pid}/stat") as file:
        fields = file.read().rpartition(")")[2].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


# --- IPC: memory that would outlive the job ----------------------------------------------------


@pytest.mark.parametrize("kind", ["probe-shm", "probe-msgqueue", "probe-posix-mq"])
def test_ipc_objects_are_forbidden_calls(runner: SandboxRunner, kind: str) -> None:
    before = _shm_segments()
    with pytest.raises(ForbiddenOperation):
        _run(runner, kind, f"4 {256 * MIB}")
    assert _shm_segments() == before


def test_without_the_filter_shared_memory_dies_with_the_fork_server() -> None:
    """The fork server's IPC namespace: segments a job leaves are never the host's."""
    before = _shm_segments()
    with SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES, skip=NO_FILTER) as sandbox:
        assert _run(sandbox, "probe-shm", f"2 {64 * MIB}") == "left 2 segments"
        assert _shm_segments() == before
        zygote = sandbox.fork_server_pid
        namespace = os.readlink(f"/proc/{zygote}/ns/ipc")
    assert namespace != os.readlink("/proc/self/ns/ipc")
    assert _shm_segments() == before


# --- code from memory, programs beyond tesseract ------------------------------------------------


def test_memfd_is_a_forbidden_call(runner: SandboxRunner) -> None:
    with pytest.raises(ForbiddenOperation):
        _run(runner, "probe-memfd", str(64 * MIB))


def test_executing_a_descriptor_is_a_forbidden_call(runner: SandboxRunner) -> None:
    """execveat on a descriptor, even of tesseract: the call that would run a memfd's ELF."""
    tesseract = shutil.which("tesseract")
    assert tesseract is not None
    with pytest.raises(ForbiddenOperation):
        _run(runner, "probe-execveat", os.path.realpath(tesseract))


def test_the_loader_cannot_run_a_program_beside_tesseracts_libraries(
    runner: SandboxRunner,
) -> None:
    """ld.so must be executable to start tesseract; only tesseract's own libraries are readable."""
    program = "/usr/lib/git-core/git"
    assert os.access(program, os.X_OK)
    report = json.loads(_run(runner, "probe-exec", f"/lib64/ld-linux-x86-64.so.2 {program}"))
    assert report["status"] != 0
    assert "Permission denied" in report["out"] or "cannot open" in report["out"]


# --- processes, memory and CPU of the job as a whole -------------------------------------------


def test_fork_is_a_forbidden_call_even_for_one_process(runner: SandboxRunner) -> None:
    with pytest.raises(ForbiddenOperation):
        _run(runner, "probe-fork-and-touch", f"1 {MIB}")


def test_without_the_filter_forked_memory_counts_against_one_budget() -> None:
    """Eight processes each touching 600 MiB under a 1 GiB limit (4.7 GiB if each process had
    the limit to itself): the job is killed as a whole, and the host saw it take less than
    2.5 GiB at any time (the budget plus what processes touch between two samples)."""
    lowest = _LowestAvailable()
    with SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES, skip=NO_FILTER) as sandbox:
        with (
            lowest,
            pytest.raises(MemoryLimitExceeded, match=r"held .* MiB together, over its 1024 MiB"),
        ):
            _run(sandbox, "probe-fork-and-touch", f"8 {600 * MIB}")
        _assert_nothing_left(sandbox)
    assert lowest.drop_bytes < 2560 * MIB


def test_without_the_filter_processes_forked_from_a_thread_count_too() -> None:
    """A thread's children are listed under that thread: the budget reads every thread's."""
    with SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES, skip=NO_FILTER) as sandbox:
        with pytest.raises(MemoryLimitExceeded, match="together"):
            _run(sandbox, "probe-fork-from-thread", f"4 {400 * MIB}")
        _assert_nothing_left(sandbox)


class _LowestAvailable:
    """The host's MemAvailable sampled every 5 ms while in the block: how much a job took."""

    def __enter__(self) -> None:
        self.start = self.lowest = self._available()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample)
        self._thread.start()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def drop_bytes(self) -> int:
        return self.start - self.lowest

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.lowest = min(self.lowest, self._available())

    @staticmethod
    def _available() -> int:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no MemAvailable in /proc/meminfo")


@pytest.mark.slow
def test_without_the_filter_forked_cpu_counts_against_one_budget() -> None:
    """Eight spinning processes with a 2-second budget: 2 CPU seconds in all, not 8 x 2."""
    with SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES, skip=NO_FILTER) as sandbox:
        before = _zygote_children_cpu(sandbox)
        with pytest.raises(CpuLimitExceeded, match="together, over its 2-second CPU limit"):
            _run(sandbox, "probe-fork-and-spin", "7")
        _assert_nothing_left(sandbox)
        used = _zygote_children_cpu(sandbox) - before
    # One sampling interval per core of overshoot at most; the old per-process limits let the
    # same job burn ~30 CPU seconds.
    assert LIMITS.cpu_seconds <= used <= LIMITS.cpu_seconds + 0.5


# --- what the fork server must survive ----------------------------------------------------------


def test_a_deep_tree_is_a_forbidden_call(runner: SandboxRunner) -> None:
    with pytest.raises(ForbiddenOperation):
        _run(runner, "probe-deep-tree", "1200")
    assert _run(runner, "probe-echo", "next job") == "next job"


def test_a_deep_tree_left_in_scratch_is_removed_and_the_runner_goes_on() -> None:
    """Whatever a child leaves in its scratch directory (here 1,500 levels, built by root while
    the job sleeps, as a host without any write wall would let the job do; then the job is
    killed) is removed by the fork server, which goes on serving the same runner. The recursive
    removal used to raise RecursionError in the fork server and take every later job down."""
    limits = SandboxLimits(wall_seconds=60.0, cpu_seconds=2)
    with SandboxRunner(limits, warm_children=0, modules=PROBE_MODULES) as sandbox:
        zygote = sandbox.fork_server_pid
        outcome: list[BaseException] = []
        job = threading.Thread(target=_run_and_keep, args=(sandbox, outcome))
        job.start()
        child, scratch = _scratch_of_the_running_child(zygote)
        scratch_root = scratch.parent
        current = scratch
        for _ in range(1500):
            current = current / "d"
            current.mkdir()
        os.kill(child, signal.SIGKILL)  # ends the job now, however long building took
        job.join()
        assert isinstance(outcome[0], ChildCrashed)
        assert _run(sandbox, "probe-echo", "next job") == "next job"
        _assert_nothing_left(sandbox, scratch_root)


def _scratch_of_the_running_child(zygote: int) -> tuple[int, Path]:
    """The fork server's one child and its scratch directory, once it has jailed itself there."""
    children = Path(f"/proc/{zygote}/task/{zygote}/children")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for child in children.read_text().split():
            with contextlib.suppress(OSError):
                cwd = Path(os.readlink(f"/proc/{child}/cwd"))
                if cwd.parent.name.startswith("airlock-sandbox-"):
                    return int(child), cwd
        time.sleep(0.01)
    raise AssertionError("the child never entered its scratch directory")


def _run_and_keep(sandbox: SandboxRunner, outcome: list[BaseException]) -> None:
    try:
        _run(sandbox, "probe-sleep", "30")
    except BaseException as exc:
        outcome.append(exc)


def test_remove_tree_survives_depth_symlinks_and_a_small_descriptor_limit(tmp_path: Path) -> None:
    top = tmp_path / "scratch"
    current = top
    current.mkdir()
    for _ in range(1500):
        current = current / "d"
        current.mkdir()
    (current / "file").write_bytes(b"x")
    (current / "escape").symlink_to(tmp_path.parent)
    os.chmod(top, 0o500)
    outside = tmp_path / "outside"
    outside.write_bytes(b"kept")
    assert remove_tree(str(top))
    assert not top.exists()
    assert outside.read_bytes() == b"kept"
