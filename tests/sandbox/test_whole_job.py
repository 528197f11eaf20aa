"""A job's budget counts every process it created, however it is parented, in both modes.

Each attack is code in a real jailed child (``tests.sandbox.probes``), run by a ``JobHost`` as
root (each child a uid of its own, ``RLIMIT_NPROC`` per job) and as uid 10001 (the image's
mode: every child shares the worker's uid, and no kernel counter bounds a job's tasks). What
the job held is measured from here, as root, by reading all of /proc: everything beneath the
fork server (a subreaper, so nothing a job starts can get out from under it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandbox.limits import MIB, SandboxLimits
from tests.image_builders import ruled_pages
from tests.sandbox.job_host import IMAGE_UID, ROOT, Job, JobHost, Outcome, UnreachableCheckout

LIMITS = SandboxLimits(memory_bytes=1024 * MIB, cpu_seconds=30, wall_seconds=60.0, processes=8)
MODES = pytest.mark.parametrize("uid", [ROOT, IMAGE_UID], ids=["root", "uid-10001"])
NO_GUARD = frozenset({"process_guard"})
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Held:
    """What the fork server's descendants held together at one moment."""

    processes: tuple[int, ...]
    tasks: int
    resident_bytes: int


def beneath(server: int) -> Held:
    """Every process whose parent chain reaches ``server`` (not ``server`` itself), read from
    every /proc/PID/stat: the sandbox's own bookkeeping is what is under test, not the ruler."""
    children: dict[int, list[int]] = {}
    counts: dict[int, tuple[int, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        counts[pid] = (int(fields[17]), int(fields[21]))  # num_threads, rss in pages
    found: list[int] = []
    todo = list(children.get(server, ()))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return Held(
        tuple(found),
        sum(counts[pid][0] for pid in found),
        sum(counts[pid][1] for pid in found) * _PAGE_BYTES,
    )


class Peak:
    """The most tasks and resident memory beneath the fork server, sampled every 10 ms while
    in the block."""

    def __init__(self, server: int) -> None:
        self.server = server
        self.tasks = 0
        self.resident_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            held = beneath(self.server)
            self.tasks = max(self.tasks, held.tasks)
            self.resident_bytes = max(self.resident_bytes, held.resident_bytes)


def assert_nothing_beneath(host: JobHost) -> None:
    """No process of any job is left: the hosts keep no warm child, so the fork server must
    have nothing beneath it (orphans included: they are its children)."""
    deadline = time.monotonic() + 10
    while beneath(host.zygote).processes and time.monotonic() < deadline:
        time.sleep(0.05)
    assert beneath(host.zygote).processes == ()


def run_one(host: JobHost, job: Job) -> tuple[Outcome, Peak]:
    with Peak(host.zygote) as peak:
        (outcome,) = host.run(job)
    assert_nothing_beneath(host)
    return outcome, peak


def start(
    uid: int, limits: SandboxLimits, skip: frozenset[str] = frozenset(), **options: bool
) -> JobHost:
    """A job host as ``uid``; skipped, saying why, where that uid cannot run this checkout."""
    try:
        return JobHost(uid, limits, skip, **options)
    except UnreachableCheckout as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module", params=[ROOT, IMAGE_UID], ids=["root", "uid-10001"])
def host(request: pytest.FixtureRequest) -> Iterator[JobHost]:
    with start(request.param, LIMITS) as job_host:
        assert "process_guard" in job_host.mechanisms
        yield job_host


# --- orphans: two vfork-clones and an exit leave a grandchild the fork server adopts ----------

ORPHANS = 4
ORPHAN_IMAGE = ruled_pages(10000, 10)  # tesseract holds ~400 MB for it, for ~20 s


@pytest.mark.slow
@MODES
@pytest.mark.parametrize("skip", [frozenset(), NO_GUARD], ids=["all-layers", "no-guard"])
def test_orphaned_tesseracts_count_against_the_memory_budget(
    uid: int, skip: frozenset[str]
) -> None:
    """Four orphaned tesseracts, 0.15 s apart, each reading a page that makes it hold ~400 MB
    (1.6 GB together, under a 1 GiB budget; the job sleeps to be answered after 20 s). The
    sampler walks the fork server's children by process group, so the orphans count: the job
    is killed naming its memory budget, the fork server's tree never held much more than the
    budget, and nothing outlives the job. The process guard is not what stops it: the same
    holds with the guard skipped."""
    with start(uid, LIMITS, skip) as host:
        job = Job("probe-orphan-tesseracts", f"{ORPHANS} 0.15 20\n".encode() + ORPHAN_IMAGE)
        outcome, peak = run_one(host, job)
        assert outcome.error == "MemoryLimitExceeded", outcome
        held = re.search(r"held (\d+) MiB together, over its 1024 MiB memory limit", outcome.reason)
        assert held is not None, outcome.reason
        assert 1024 <= int(held.group(1)) < 1024 + 256
        assert peak.resident_bytes < (1024 + 256) * MIB
        assert peak.tasks <= LIMITS.processes
        # The fork server goes on serving the same runner.
        assert host.run(Job("probe-echo", b"next job")) == [Outcome(text="next job")]


@pytest.mark.slow
@MODES
def test_orphans_cpu_counts_after_they_are_reaped(uid: int) -> None:
    """Six orphaned tesseracts one after another, 2 s apart, each reading one ruled page
    (about 1.3 CPU seconds, so one is alive at a time): each orphan's CPU is charged to its
    job when the fork server reaps it, and the job is killed at its 4-second budget (it used
    to run all six, about 8 CPU seconds, and be answered)."""
    limits = SandboxLimits(memory_bytes=1024 * MIB, cpu_seconds=4, wall_seconds=60.0)
    with start(uid, limits) as host:
        job = Job("probe-orphan-tesseracts", b"6 2.0 1\n" + ruled_pages(10000, 1))
        outcome, _ = run_one(host, job)
    assert outcome.error == "CpuLimitExceeded", outcome
    assert "together, over its 4-second CPU limit" in outcome.reason


# --- processes and threads: the guard admits each one against the budget -----------------------


@pytest.mark.parametrize(
    ("kind", "argument"),
    [("probe-orphan-threads", "300 20"), ("probe-threads", "300 20")],
    ids=["an-orphan-s-threads", "the-job-s-own-threads"],
)
def test_tasks_past_the_budget_are_refused_and_the_job_is_killed(
    host: JobHost, kind: str, argument: str
) -> None:
    """An orphan starting 300 threads (or the job itself): the fork server admits each new
    task only while the job's tasks, orphans included, fit its budget of 8. The ninth is
    refused and the job killed, naming the budget; the tree never held more than 8 tasks,
    also as uid 10001, where no RLIMIT_NPROC would have stopped it."""
    outcome, peak = run_one(host, Job(kind, argument.encode()))
    assert outcome.error == "ProcessLimitExceeded", outcome
    assert "exceeded its limit of 8 at once (9 counted)" in outcome.reason
    assert peak.tasks <= LIMITS.processes


def test_tasks_within_the_budget_are_admitted(host: JobHost) -> None:
    """The guard counts; it does not forbid: an orphan with three threads is within 8."""
    outcome, peak = run_one(host, Job("probe-orphan-threads", b"3 0.5"))
    assert outcome == Outcome(text="an orphan holds 3 threads (refused: errno 0)")
    assert 4 <= peak.tasks <= LIMITS.processes


def test_the_budget_counts_tasks_at_once_not_in_all(host: JobHost) -> None:
    """Twelve tesseract runs one after another: never more than two tasks at once."""
    outcome, peak = run_one(host, Job("probe-tesseract-runs", b"12"))
    assert outcome == Outcome(text="ran 12, statuses [0]")
    assert peak.tasks <= 2


def test_without_the_guard_rlimit_nproc_refuses_an_orphans_threads_as_root() -> None:
    """As root each job has a uid of its own, so RLIMIT_NPROC bounds it without the guard:
    the job, the middle process and the orphan, then five threads; the sixth is EAGAIN."""
    with start(ROOT, LIMITS, NO_GUARD) as host:
        outcome, peak = run_one(host, Job("probe-orphan-threads", b"300 0.5"))
    assert outcome == Outcome(text="an orphan holds 5 threads (refused: errno 11)")
    assert peak.tasks <= LIMITS.processes


def test_without_the_guard_the_sampler_still_kills_an_orphans_threads_as_uid_10001() -> None:
    """The layer behind the guard: with no kernel counter for the job, the fork server's
    sample of every process in the job's group still kills it, naming the budget, and
    nothing of it is left. Between two samples (50 ms) it holds what it can start."""
    with start(IMAGE_UID, LIMITS, NO_GUARD) as host:
        outcome, _ = run_one(host, Job("probe-orphan-threads", b"300 20"))
    assert outcome.error == "ProcessLimitExceeded", outcome
    assert "exceeded its limit of 8 at once" in outcome.reason


@MODES
def test_where_the_runtime_holds_the_listener_the_guard_is_reported_missing(uid: int) -> None:
    """A process under a filter whose listener another holds (a container runtime's) cannot
    have one: the fork server reports the guard missing, so a deployment requiring it refuses
    to start, and jobs run as before (tesseract still starts: no clone waits for nobody)."""
    with start(uid, LIMITS, listener_taken=True) as host:
        assert "process_guard" not in host.mechanisms
        assert "seccomp" in host.mechanisms
        outcome, _ = run_one(host, Job("probe-tesseract-runs", b"2"))
    assert outcome == Outcome(text="ran 2, statuses [0]")


@contextlib.contextmanager
def pid_ceiling(limit: int) -> Iterator[Path]:
    """A pids cgroup of ``limit`` tasks, standing in for a container's pid limit."""
    v1 = Path("/sys/fs/cgroup/pids")
    v2 = Path("/sys/fs/cgroup")
    if (v1 / "cgroup.procs").exists():
        parent = v1
    elif "pids" in (v2 / "cgroup.controllers").read_text().split():
        parent = v2
        (v2 / "cgroup.subtree_control").write_text("+pids")
    else:
        pytest.skip("this host has no pids cgroup to stand in for a container's pid limit")
    group = parent / f"airlock-test-{os.getpid()}-{time.monotonic_ns()}"
    group.mkdir()
    try:
        (group / "pids.max").write_text(str(limit))
        yield group
    finally:
        deadline = time.monotonic() + 10
        while (group / "cgroup.procs").read_text().split() and time.monotonic() < deadline:
            time.sleep(0.05)
        group.rmdir()


def refused_forks(group: Path) -> int:
    """How many forks and clones the cgroup's limit refused (its pids.events "max" count)."""
    events = dict(line.split() for line in (group / "pids.events").read_text().splitlines())
    return int(events["max"])


@MODES
def test_an_orphans_threads_cannot_take_the_pids_another_job_needs(
    uid: int, corpus_dir: Path
) -> None:
    """A fork server under a 16-task ceiling (standing in for the container's pid limit): an
    orphan asking for 300 threads, and 0.3 s later an OCR job on the same fork server. The
    attacker is killed at its budget, the OCR job reads its page, and the ceiling never had
    to refuse a single fork (as uid 10001 the orphan used to take every pid, and the other
    job failed with EAGAIN)."""
    ocr = Job("image", (corpus_dir / "tesseract_phototest.tif").read_bytes(), "image/tiff", 0.3)
    with pid_ceiling(16) as group, start(uid, LIMITS) as host:
        (group / "cgroup.procs").write_text(str(host.zygote))
        attack, honest = host.run(Job("probe-orphan-threads", b"300 5"), ocr)
        assert_nothing_beneath(host)
        assert attack.error == "ProcessLimitExceeded", attack
        assert honest.text is not None, honest
        assert "This is a lot of 12 point text" in honest.text
        assert refused_forks(group) == 0


# --- what else a job may ask of the kernel ------------------------------------------------------


def test_raising_the_cpu_soft_limit_is_a_forbidden_call(host: JobHost) -> None:
    """Soft up to hard would take away the SIGXCPU that tells a CPU kill apart."""
    outcome, _ = run_one(host, Job("probe-cpu-limit", b"raise"))
    assert outcome.error == "ForbiddenOperation", outcome


def test_reading_the_limits_is_allowed(host: JobHost) -> None:
    outcome, _ = run_one(host, Job("probe-cpu-limit", b"read"))
    assert outcome == Outcome(text=f"soft {LIMITS.cpu_seconds} hard {LIMITS.cpu_seconds + 1}")


def test_growing_a_pipe_is_a_forbidden_call(host: JobHost) -> None:
    """F_SETPIPE_SZ to 1 MiB on every pipe the descriptors allow: kernel memory no RSS shows."""
    outcome, _ = run_one(host, Job("probe-pipes", str(MIB).encode()))
    assert outcome.error == "ForbiddenOperation", outcome


def test_pipes_at_their_default_size_hold_two_mib_at_most(host: JobHost) -> None:
    """As many pipes as 64 descriptors allow, each filled: 64 KiB each, under 2 MiB in all."""
    outcome, _ = run_one(host, Job("probe-pipes", b"0"))
    assert outcome.text is not None, outcome
    report = json.loads(outcome.text)
    assert report["held_bytes"] == report["pipes"] * 64 * 1024
    assert report["held_bytes"] <= 2 * MIB


def test_fionread_is_allowed(host: JobHost) -> None:
    """How many bytes a pipe holds: harmless, and a library sizing a read may ask."""
    outcome, _ = run_one(host, Job("probe-fionread", b"hello"))
    assert outcome == Outcome(text="5")
