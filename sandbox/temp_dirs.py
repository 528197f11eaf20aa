"""Temporary directories named after the process that owns them, reclaimed once it is gone.

See docs/operations.md, "Temporary files".
"""

from __future__ import annotations

import os
import re
import tempfile

from sandbox.jail import remove_tree

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _boot_time() -> float:
    with open("/proc/stat") as file:
        for line in file:
            if line.startswith("btime "):
                return float(line.split()[1])
    raise OSError("no btime in /proc/stat")


def _started_at(pid: int, boot: float) -> float | None:
    """When ``pid`` started (seconds since the epoch), or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rpartition(")")[2].split()
    except OSError:
        return None
    return boot + int(fields[19]) / _CLOCK_TICKS  # proc(5) field 22, starttime


def _abandoned(path: str, pid: int, boot: float) -> bool:
    started = _started_at(pid, boot)
    if started is None:
        return True
    try:
        made = os.stat(path, follow_symlinks=False).st_mtime
    except OSError:
        return False
    # Made before its owner started: a dead process's directory, its pid reused since. The
    # second of slack covers the clock ticks' rounding of the start time.
    return made < started - 1


def reclaim(prefix: str, directory: str | None = None) -> int:
    """Remove ``PREFIX<pid>-*`` directories whose owner is dead; how many were removed."""
    directory = directory or tempfile.gettempdir()
    pattern = re.compile(re.escape(prefix) + r"(\d+)-")
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    boot = _boot_time()
    for entry in entries:
        match = pattern.match(entry.name)
        if match and entry.is_dir(follow_symlinks=False):
            owner = int(match.group(1))
            dead = owner != os.getpid() and _abandoned(entry.path, owner, boot)
            if dead and remove_tree(entry.path):
                removed += 1
    return removed


def claim(prefix: str, mode: int) -> str:
    """A fresh ``PREFIX<our pid>-…`` directory with ``mode``, after reclaiming the dead's."""
    reclaim(prefix)
    path = tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-")
    os.chmod(path, mode)
    return path
