"""What a child does to itself before it may read a single byte of payload.

The mechanisms of the layers, each attempted and recorded; what they enforce is
``sandbox/policy.py``. See docs/sandbox.md, "Layers" and "Notes by module".
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import os
import resource
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from sandbox import landlock, policy, seccomp
from sandbox.limits import SandboxLimits

NETNS = "netns"
RLIMITS = "rlimits"
NO_NEW_PRIVS = "no_new_privs"
UID_DROP = "uid_drop"
LANDLOCK = "landlock"
SECCOMP = "seccomp"
PROCESS_GUARD = "process_guard"
MECHANISMS = frozenset({NETNS, RLIMITS, NO_NEW_PRIVS, UID_DROP, LANDLOCK, SECCOMP, PROCESS_GUARD})

# Where a jailed child finds its two pipes: the job on stdin, the answer on fd 3. Its stdout and
# stderr go to /dev/null, so nothing a parser prints can reach (or corrupt) the answer channel.
JOB_FD = 0
ANSWER_FD = 3

DEFAULT_UID_BASE = 2_000_000

_PR_SET_PDEATHSIG = 1
_PR_CAPBSET_DROP = 24
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAPABILITY_VERSION_3 = 0x20080522
_PR_SET_NO_NEW_PRIVS = 38
_PR_GET_NO_NEW_PRIVS = 39
_PT_INTERP = 3

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.close_range.argtypes = (ctypes.c_uint, ctypes.c_uint, ctypes.c_int)


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


@dataclass(frozen=True)
class JailPlan:
    limits: SandboxLimits
    scratch_root: str
    uid_base: int
    skip: frozenset[str]
    netns: bool
    landlock_rules: landlock.Rules
    seccomp_program: bytes | None
    guard_program: bytes | None


def _elf_interpreter(binary: str) -> str | None:
    """The dynamic loader an ELF binary names: the kernel opens it for execution too."""
    with open(binary, "rb") as file:
        head = file.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return None  # only 64-bit little-endian hosts are supported
        (phoff,) = struct.unpack_from("<Q", head, 0x20)
        entry_size, count = struct.unpack_from("<HH", head, 0x36)
        file.seek(phoff)
        table = file.read(entry_size * count)
    for index in range(count):
        kind, _, offset, _, _, size = struct.unpack_from("<IIQQQQ", table, index * entry_size)
        if kind == _PT_INTERP:
            with open(binary, "rb") as file:
                file.seek(offset)
                return file.read(size).rstrip(b"\0").decode()
    return None


def _shared_libraries(program: str, loader: str) -> list[str]:
    """The shared objects the loader maps for ``program``, as ``ld.so --list`` resolves them.

    Run once in the fork server on a trusted binary. Only these files (not /usr/lib whole) are
    readable in the jail: the loader, which must be executable to start tesseract, runs any
    ELF it can read (``ld.so /usr/lib/git-core/git``), so what is readable is what can run.
    """
    listing = subprocess.run(
        [loader, "--list", program], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    libraries = []
    for line in listing.splitlines():
        words = line.split()
        path = words[2] if len(words) >= 3 and words[1] == "=>" else words[0] if words else ""
        if path.startswith("/"):
            libraries.append(os.path.realpath(path))
    return libraries


def _program_paths(name: str) -> Iterator[tuple[str, int]]:
    """The program ``name`` resolves to and the dynamic loader the kernel opens to start it,
    both to run, and the shared libraries it maps, to read; nothing when it is not installed."""
    program = shutil.which(name)
    if not program:
        return
    program = os.path.realpath(program)
    yield program, landlock.RUN
    interpreter = _elf_interpreter(program)
    if interpreter:
        loader = os.path.realpath(interpreter)
        yield loader, landlock.RUN
        for library in _shared_libraries(program, loader):
            yield library, landlock.READ_FILE


def plan(
    limits: SandboxLimits,
    scratch_root: str,
    uid_base: int,
    skip: frozenset[str],
    seccomp_log: bool = False,
) -> JailPlan:
    """Do once, in the fork server, everything a child would otherwise repeat.

    That includes the network namespace: the fork server moves itself into a new, empty one
    (no interface up, not even loopback), and every child inherits it. A namespace per child
    would cost each fork about a millisecond more, plus the kernel's asynchronous teardown, and
    would only separate children from one another, which the seccomp socket ban and Landlock's
    abstract-socket scope already do. An IPC namespace too, where the host allows one: the
    seccomp allow list already denies every SysV and POSIX IPC call, and the namespace makes
    sure an object made without the filter dies with the fork server instead of the host.
    """
    netns = NETNS not in skip and _LIBC.unshare(policy.CLONE_NEWNET) == 0
    _LIBC.unshare(policy.CLONE_NEWIPC)  # best effort: needs CAP_SYS_ADMIN
    allowed = itertools.chain(policy.allowed_paths(), _program_paths(policy.EXECUTABLE))
    rules = landlock.prepare(allowed) if LANDLOCK not in skip else landlock.Rules(0, ())
    program = seccomp.compile_filter(seccomp_log) if SECCOMP not in skip else None
    guard = seccomp.compile_guard() if PROCESS_GUARD not in skip else None
    return JailPlan(limits, scratch_root, uid_base, skip, netns, rules, program, guard)


def scratch_dir(jail_plan: JailPlan, pid: int) -> str:
    return os.path.join(jail_plan.scratch_root, str(pid))


def _prctl(option: int, value: int) -> bool:
    return int(_LIBC.prctl(option, value, 0, 0, 0)) == 0


def _move_fds(job_fd: int, answer_fd: int) -> None:
    """Keep only the two pipes, at fixed numbers, so no inherited descriptor stays reachable.

    Anything the fork server held (its socket to the worker, sibling children's pipes, the
    Landlock path handles) is closed: a parser must not find a live descriptor to someone else.
    """
    high_job = os.dup(job_fd)
    high_answer = os.dup(answer_fd)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(high_job, JOB_FD)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.dup2(high_answer, ANSWER_FD, inheritable=False)  # tesseract must not get it
    if _LIBC.close_range(ANSWER_FD + 1, 0xFFFFFFFF, 0) != 0:
        raise OSError(ctypes.get_errno(), "close_range failed")


def _set_rlimits(limits: SandboxLimits, own_uid: bool) -> None:
    """Kernel ceilings for this process and everything it starts (``policy.rlimits``)."""
    for which, soft, hard in policy.rlimits(limits, own_uid):
        resource.setrlimit(which, (soft, hard))


def _drop_uid(uid: int) -> bool:
    """Become a uid of our own: RLIMIT_NPROC counts per uid system-wide and ignores root."""
    try:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    except OSError:
        return False  # e.g. a user namespace without that uid mapped: reported as missing
    return os.getuid() == uid and os.geteuid() == uid


def _drop_bounding_set() -> None:
    """Empty the capability bounding and ambient sets while we may (CAP_SETPCAP, as root).

    Without the privilege (an unprivileged container) the calls fail and that is fine: such a
    process holds no capability to pass on, and no_new_privs stops exec from granting any.
    """
    try:
        with open("/proc/sys/kernel/cap_last_cap") as file:
            last = int(file.read())
    except OSError:
        last = 63
    for capability in range(last + 1):
        _prctl(_PR_CAPBSET_DROP, capability)
    _LIBC.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


def _clear_capabilities() -> None:
    """Effective, permitted and inheritable sets to zero, whatever uid we run as.

    A child that kept a capability (root whose uid drop was skipped, a container started with
    added capabilities) could undo the jail; dropping is always allowed, so failure is fatal.
    """
    header = _CapHeader(_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if _LIBC.capset(ctypes.byref(header), data) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"capset failed: {os.strerror(error)}")


def _reset_process_state(scratch: str) -> None:
    """Forget what the fork server's Python set up: its signal wakeup, its temp dir, its env."""
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_DFL)
    env = policy.child_env(scratch)  # before clearing: it keeps tesseract's TESSDATA_PREFIX
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = scratch  # tempfile caches the directory it saw in the fork server


def _hand_over(listener: int, guard_fd: int) -> None:
    """Send the process guard's listener to the fork server over ``guard_fd``, and close ours.

    Closed at once: a job holding its own listener could admit its own calls. A failure to
    send ends the child (the caller's jail fails): with nobody holding the listener every
    clone would fail, and the fork server could not count the job's processes.
    """
    try:
        with socket.socket(fileno=os.dup(guard_fd)) as channel:
            socket.send_fds(channel, [b"guard"], [listener])
    finally:
        os.close(listener)


def jail(
    jail_plan: JailPlan, zygote_pid: int, job_fd: int, answer_fd: int, guard_fd: int
) -> frozenset[str]:
    """Jail the calling (freshly forked) child; return the layers now in force.

    Order matters: ownership needs root, so it comes first; Landlock after the uid drop and
    no_new_privs; the process guard before the descriptors are closed, since its listener
    leaves through ``guard_fd``; seccomp last because it forbids the calls the earlier steps
    make.
    """
    active: set[str] = set()
    skip = jail_plan.skip
    os.setsid()  # its own process group, so the whole job dies with one killpg
    if jail_plan.netns:
        active.add(NETNS)  # inherited from the fork server
    pid = os.getpid()
    uid = jail_plan.uid_base + pid
    scratch = scratch_dir(jail_plan, pid)
    # Read-only even to its owner: the job writes nothing (seccomp kills O_CREAT and mkdir,
    # Landlock grants no write here), and a host lacking both still gets DAC's refusal.
    os.mkdir(scratch, 0o500)
    is_root = os.geteuid() == 0
    if is_root and UID_DROP not in skip:
        try:
            os.chown(scratch, uid, uid)
        except (OSError, OverflowError):
            is_root = False  # uid not mapped in this user namespace: cannot drop to it
    scratch_fd = os.open(scratch, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    if (
        NO_NEW_PRIVS not in skip
        and _prctl(_PR_SET_NO_NEW_PRIVS, 1)
        and int(_LIBC.prctl(_PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)) == 1
    ):
        active.add(NO_NEW_PRIVS)
    _drop_bounding_set()
    if is_root and UID_DROP not in skip and _drop_uid(uid):
        active.add(UID_DROP)
    _clear_capabilities()
    # Armed after the uid drop, because the kernel clears it on every change of credentials.
    _prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() != zygote_pid:
        os._exit(1)  # the fork server died before the signal was armed
    if LANDLOCK not in skip and jail_plan.landlock_rules.abi > 0:
        try:
            landlock.restrict(jail_plan.landlock_rules, scratch_fd)
            active.add(LANDLOCK)
        except OSError:
            pass  # recorded as absent; the runner refuses the child if Landlock is required
    if jail_plan.guard_program is not None:
        try:
            listener = seccomp.install_guard(jail_plan.guard_program)
        except OSError:
            listener = -1  # recorded as absent: no listener here (the runtime holds one, say)
        if listener >= 0:
            _hand_over(listener, guard_fd)
            active.add(PROCESS_GUARD)
    _move_fds(job_fd, answer_fd)
    os.chdir(scratch)
    _reset_process_state(scratch)
    if RLIMITS not in skip:
        _set_rlimits(jail_plan.limits, UID_DROP in active)
        active.add(RLIMITS)
    if jail_plan.seccomp_program is not None:
        try:
            seccomp.install(jail_plan.seccomp_program)
            active.add(SECCOMP)
        except OSError:
            pass  # without no_new_privs (or CAP_SYS_ADMIN) the kernel refuses a filter
    return frozenset(active)


_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_DIRECTORY_PATH = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str) -> bool:
    """Delete ``path`` and everything beneath it; True when it is gone. Never raises.

    A tree a parser built 1,200 levels deep made the recursive ``shutil.rmtree`` raise
    RecursionError in the fork server and in ``close()``, and every later job failed. This
    walks one level at a time by descriptor (such paths are past PATH_MAX too), makes each
    directory writable to its owner first (scratch is 0500), removes symlinks without following
    them, and checks each ``..`` is the directory it came down from, so a tree moved under it
    cannot lead it outside ``path``.
    """
    with contextlib.suppress(OSError, ValueError):
        _remove_contents(path)
    with contextlib.suppress(OSError):
        os.rmdir(path)
    with contextlib.suppress(OSError):
        os.unlink(path)  # not a directory at all
    return not os.path.lexists(path)


def _open_directory(name: str, dir_fd: int | None = None) -> int:
    """Open a directory (never a symlink) for listing, first making it its owner's to empty.

    The mode is changed through an O_PATH handle of the directory itself, so a name swapped
    for a symlink meanwhile cannot turn the chmod onto the link's target.
    """
    handle = os.open(name, _DIRECTORY_PATH, dir_fd=dir_fd)
    try:
        with contextlib.suppress(OSError):
            os.chmod(f"/proc/self/fd/{handle}", 0o700)
        return os.open(f"/proc/self/fd/{handle}", _DIRECTORY & ~os.O_NOFOLLOW)
    finally:
        os.close(handle)


def _remove_contents(path: str) -> None:
    fd = _open_directory(path)
    # Per level below ``path``: its name in its parent, the parent's identity (to check ``..``
    # against on the way up), and the parent's entries not yet removed.
    trail: list[tuple[str, tuple[int, int], list[str]]] = []
    try:
        names = os.listdir(fd)
        while names or trail:
            if not names:
                name, parent_identity, names = trail.pop()
                parent = os.open("..", _DIRECTORY, dir_fd=fd)
                os.close(fd)
                fd = parent
                seen = os.fstat(fd)
                if (seen.st_dev, seen.st_ino) != parent_identity:
                    raise OSError(f"{path} was moved while it was being removed")
                os.rmdir(name, dir_fd=fd)
                continue
            name = names.pop()
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                continue
            except IsADirectoryError:
                here = os.fstat(fd)
                below = _open_directory(name, fd)
                trail.append((name, (here.st_dev, here.st_ino), names))
                os.close(fd)
                fd = below
                names = os.listdir(fd)
    finally:
        os.close(fd)


def remove_scratch(jail_plan: JailPlan, pid: int) -> bool:
    """Delete a dead child's scratch directory; True when nothing of it is left."""
    return remove_tree(scratch_dir(jail_plan, pid))
