"""What a job holds as a whole, read from /proc, and whether it may start one more task.

A job is not its leader's descendants: a process whose parent exits is adopted by the nearest
subreaper, the fork server, so two vfork-clones and an exit made a grandchild the fork
server's child, outside the tree the budget walked. A job is its process group (which the
seccomp filter forbids leaving) beneath the fork server. See docs/sandbox.md, "The job's
budget".
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")

#: How long a task the fork server admitted but has not seen in /proc counts as running. An
#: admitted clone happens after the answer, when its caller next gets a CPU (microseconds,
#: normally), so a count taken at once may not show it yet; one born and gone between two
#: looks is never seen and counts until this passes, so a job may start and end up to its
#: budget of short-lived tasks in this time (no parser here starts a thread at all).
IN_FLIGHT_SECONDS = 0.05


@dataclass(frozen=True)
class Usage:
    """One sample of some processes taken together: their tasks (thread ids), CPU seconds
    (reaped descendants included) and resident memory."""

    tids: frozenset[int] = frozenset()
    cpu_seconds: float = 0.0
    resident_bytes: int = 0

    @property
    def tasks(self) -> int:
        return len(self.tids)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.tids | other.tids,
            self.cpu_seconds + other.cpu_seconds,
            self.resident_bytes + other.resident_bytes,
        )


def _stat_fields(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as file:
        # The command name may hold spaces and parentheses; the fields start after the last ')'.
        return file.read().rpartition(")")[2].split()


def process_group(pid: int) -> int | None:
    """The process group of ``pid`` (a zombie has one too), or None when there is no such pid."""
    try:
        return int(_stat_fields(pid)[2])
    except (OSError, ValueError, IndexError):
        return None


def subtree(root: int) -> Usage:
    """What ``root`` and every process beneath it hold together."""
    tids: set[int] = set()
    ticks = 0
    pages = 0
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            fields = _stat_fields(pid)
            # Each thread lists the children it started; most jobs have one thread to read.
            # (proc(5) field 20, num_threads)
            threads = os.listdir(f"/proc/{pid}/task") if int(fields[17]) > 1 else [str(pid)]
            for thread in threads:
                with open(f"/proc/{pid}/task/{thread}/children") as file:
                    todo.extend(int(word) for word in file.read().split())
        except (OSError, ValueError):
            continue  # it exited between two reads: its time is in its parent's now
        tids.update(int(thread) for thread in threads)
        # utime, stime, cutime, cstime; rss (proc(5) fields 14-17, 24)
        ticks += sum(int(value) for value in fields[11:15])
        pages += int(fields[21])
    return Usage(frozenset(tids), ticks / _CLOCK_TICKS, pages * _PAGE_BYTES)


def _children(server: int) -> Iterator[tuple[int, int]]:
    """The fork server's children (it is single-threaded) with their process groups."""
    try:
        with open(f"/proc/{server}/task/{server}/children") as file:
            listed = [int(word) for word in file.read().split()]
    except OSError:
        return
    for pid in listed:
        group = process_group(pid)
        if group is not None:
            yield pid, group


def census(
    server: int, leaders: Collection[int], spare: Collection[int]
) -> tuple[dict[int, Usage], tuple[int, ...]]:
    """What each running job (by its leader's pid) holds, and the fork server's children that
    belong to no job.

    A child of the fork server is a job's leader, a process the fork server adopted from a job
    (in that job's group), a ``spare`` child still jailing itself, or a stray: a process that
    left its job's group (only possible without the seccomp filter) or outlived its job.
    """
    usage = dict.fromkeys(leaders, Usage())
    strays = []
    for pid, group in _children(server):
        if pid in spare:
            continue
        job = pid if pid in usage else group if group in usage else None
        if job is None:
            strays.append(pid)
        else:
            usage[job] += subtree(pid)
    return usage, tuple(strays)


@dataclass
class Admissions:
    """The tasks the fork server let one job start that /proc has not shown yet.

    Counted on top of what /proc shows, so a task admitted but not yet created is never
    missed. Each thread id the job shows for the first time accounts for one admission; one
    born and gone between two looks stays counted for ``IN_FLIGHT_SECONDS``, which only ever
    refuses early. A clone whose caller waits longer than that for a CPU would escape the
    count; each caller has at most one, so even then the job never holds twice its budget.
    """

    waiting: deque[float] = field(default_factory=deque)  # when each unseen one was admitted
    seen: set[int] = field(default_factory=set)

    def look(self, now: float, tids: frozenset[int]) -> None:
        """Account for the tasks the job shows now."""
        for _ in range(min(len(tids - self.seen), len(self.waiting))):
            self.waiting.popleft()
        self.seen |= tids
        while self.waiting and self.waiting[0] <= now - IN_FLIGHT_SECONDS:
            self.waiting.popleft()

    def admit(self, now: float, tids: frozenset[int], limit: int) -> int:
        """The number of tasks the job would hold with one more; recorded as admitted when it
        is within ``limit``."""
        self.look(now, tids)
        count = len(tids) + len(self.waiting) + 1
        if count <= limit:
            self.waiting.append(now)
        return count
