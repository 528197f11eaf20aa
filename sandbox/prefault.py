"""Copy ahead, in a waiting child, the fork server's pages a job is going to write.

A forked child shares the fork server's memory until it writes a page, and every first write
costs a copy-on-write fault: a small PDF's job writes about 1,800 of the fork server's pages,
which cost it 5-6 ms of its 20 on a virtual machine (Python writes a page whenever it touches
an object's reference count). The fork server learns once, in a throwaway fork that runs its
sample jobs, which pages a job writes (``learn``); each warm child copies those pages while it
waits for its job and stops as soon as the job arrives (``copy_until_job``), so the copying
costs idle time, never a job's. See docs/sandbox.md, "Copying ahead".
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import select
import signal
import struct
import time
from collections.abc import Callable, Iterator

from sandbox import protocol

#: madvise(2) advice, Linux 5.14: populate the range writable, breaking copy-on-write.
MADV_POPULATE_WRITE = 23
_PAGE = os.sysconf("SC_PAGE_SIZE")
_PRESENT = 1 << 63
_EXCLUSIVE = 1 << 56  # pagemap: mapped by this process alone (since Linux 4.2)
_ENTRY = struct.Struct("<Q")
_RANGE = struct.Struct("<QQ")
#: The most pages copied between two looks at the job pipe: about half a millisecond, the
#: longest a job that arrives mid-copy waits.
CHUNK_PAGES = 256
#: The most ranges kept: a learner that saw more wrote in a way no job would repeat.
MAX_RANGES = 65_536
_LEARN_SECONDS = 60.0

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
_LIBC.madvise.restype = ctypes.c_int

Ranges = tuple[tuple[int, int], ...]


def learn(rehearse: Callable[[], object]) -> Ranges:
    """The page ranges ``rehearse`` writes, run in a fork of this process: (start, bytes).

    Nothing is learned (an empty tuple) when this kernel cannot populate a range writable
    (before 5.14), a pipe or the fork fails, the rehearsal raises or outlives
    ``_LEARN_SECONDS``, or the kernel hides pagemap: copying ahead is a saving, never a need,
    and a fork server that cannot learn must still start. The rehearsal runs in a process
    group of its own, killed whole, so nothing a sample's parse started outlives it.
    """
    if not _populates():
        return ()
    try:
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
    except OSError:
        return ()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return ()
    if pid == 0:
        os.close(read_end)
        status = 1
        try:
            os.setpgid(0, 0)
            rehearse()
            protocol.write_all(write_end, b"".join(_RANGE.pack(*span) for span in written_ranges()))
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    try:
        reported = _read_within(read_end, time.monotonic() + _LEARN_SECONDS)
    finally:
        os.close(read_end)
        # The group outlives its leader while a member lives; until reaped, the leader's
        # zombie keeps the group's id from being reused.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if reported is None or status != 0 or len(reported) % _RANGE.size:
        return ()
    spans = tuple(_RANGE.iter_unpack(reported))
    return spans if len(spans) <= MAX_RANGES else ()


def _populates() -> bool:
    """Whether this kernel takes ``MADV_POPULATE_WRITE``: asked once here, so that a child
    can read EINVAL as "this span is no longer writable" and go on to the next."""
    try:
        page = mmap.mmap(-1, _PAGE)
    except OSError:
        return False
    try:
        address = ctypes.addressof(ctypes.c_char.from_buffer(page))
        return bool(_LIBC.madvise(address, _PAGE, MADV_POPULATE_WRITE) == 0)
    finally:
        page.close()


def written_ranges() -> Iterator[tuple[int, int]]:
    """The writable private pages this process holds alone, as (start, bytes) runs.

    Right after a fork every page is shared with the parent; the ones held alone later are
    the ones this process wrote (or newly mapped) since.
    """
    with open("/proc/self/maps") as maps, open("/proc/self/pagemap", "rb") as pagemap:
        for line in maps:
            fields = line.split()
            low, high = (int(bound, 16) for bound in fields[0].split("-"))
            permissions, name = fields[1], fields[5] if len(fields) > 5 else ""
            if permissions[1] != "w" or permissions[3] != "p" or name.startswith("[v"):
                continue
            pagemap.seek(low // _PAGE * _ENTRY.size)
            entries = pagemap.read((high - low) // _PAGE * _ENTRY.size)
            yield from _runs(low, entries)


def _runs(low: int, entries: bytes) -> Iterator[tuple[int, int]]:
    start = None
    index = 0
    for index, (entry,) in enumerate(_ENTRY.iter_unpack(entries)):
        held_alone = entry & _PRESENT and entry & _EXCLUSIVE
        if held_alone and start is None:
            start = index
        elif not held_alone and start is not None:
            yield low + start * _PAGE, (index - start) * _PAGE
            start = None
    if start is not None:
        yield low + start * _PAGE, (index + 1 - start) * _PAGE


def copy_until_job(spans: Ranges, job_fd: int) -> int:
    """Copy ``spans`` of this process's memory until ``job_fd`` has something to read, looking
    at it before every ``CHUNK_PAGES`` pages; the number of pages copied.

    A span no longer mapped or writable as it was is skipped. A filter refusing the advice
    ends the copying, and so does a job pipe in any state but empty and open: the job then
    pays its own faults.
    """
    waiting = select.poll()
    waiting.register(job_fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    copied = 0
    since_look: int | None = None
    for start, length in _chunks(spans):
        pages = length // _PAGE
        if since_look is None or since_look + pages > CHUNK_PAGES:
            if waiting.poll(0):
                break
            since_look = 0
        since_look += pages
        if _LIBC.madvise(start, length, MADV_POPULATE_WRITE) == 0:
            copied += pages
        elif ctypes.get_errno() in (errno.EPERM, errno.ENOSYS):
            break
    return copied


def _chunks(spans: Ranges) -> Iterator[tuple[int, int]]:
    step = CHUNK_PAGES * _PAGE
    for start, length in spans:
        for offset in range(0, length, step):
            yield start + offset, min(step, length - offset)


def _read_within(fd: int, deadline: float) -> bytes | None:
    """Everything written to ``fd`` until its writer closes it, or None past ``deadline``."""
    chunks: list[bytes] = []
    waiting = select.poll()
    waiting.register(fd, select.POLLIN)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not waiting.poll(remaining * 1000):
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
