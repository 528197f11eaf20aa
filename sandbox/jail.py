"""What a child does to itself before it may read a single byte of payload.

The fork server builds a ``JailPlan`` once (paths opened, seccomp compiled); every child calls
``jail`` right after ``fork``. Each layer is attempted and recorded: a host without network
namespaces (an unprivileged container) still gets seccomp's socket ban and Landlock's TCP rules,
and the set of layers actually in force travels back to the runner, which refuses to run a
job when a layer the deployment requires is missing.
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import signal
import struct
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

from sandbox import landlock, seccomp
from sandbox.limits import SandboxLimits

NETNS = "netns"
RLIMITS = "rlimits"
NO_NEW_PRIVS = "no_new_privs"
UID_DROP = "uid_drop"
LANDLOCK = "landlock"
SECCOMP = "seccomp"
MECHANISMS = frozenset({NETNS, RLIMITS, NO_NEW_PRIVS, UID_DROP, LANDLOCK, SECCOMP})

# Where a jailed child finds its two pipes: the job on stdin, the answer on fd 3. Its stdout and
# stderr go to /dev/null, so nothing a parser prints can reach (or corrupt) the answer channel.
JOB_FD = 0
ANSWER_FD = 3

DEFAULT_UID_BASE = 2_000_000

_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_GET_NO_NEW_PRIVS = 39
_PT_INTERP = 3

_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.close_range.argtypes = (ctypes.c_uint, ctypes.c_uint, ctypes.c_int)


@dataclass(frozen=True)
class JailPlan:
    limits: SandboxLimits
    scratch_root: str
    uid_base: int
    skip: frozenset[str]
    netns: bool
    landlock_rules: landlock.Rules
    seccomp_program: bytes | None


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


def _allowed_paths() -> Iterator[tuple[str, int]]:
    """The files a parser legitimately touches, and nothing else.

    Python's own library directories (a forgotten lazy import should fail on DAC, not here),
    the shared libraries and tessdata tesseract maps, and exactly one executable: tesseract,
    plus the dynamic loader the kernel must open to start it. Loader caveat: with execute on
    ld.so a child can run any ELF it can *read* through it, which is why nothing but libraries
    and the scratch directory is readable.
    """
    paths = sysconfig.get_paths()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        yield paths[name], landlock.READ
    for path in (
        "/usr/lib",
        "/usr/lib64",
        "/lib",
        "/lib64",
        "/etc/ld.so.cache",
        "/usr/share/tesseract-ocr",
        "/dev/urandom",
    ):
        yield path, landlock.READ
    # `tesseract --version` (run by the isolation tests to prove the binary may execute) makes
    # libldap resolve the host's own name: from /etc/hosts when these are readable, else by
    # DNS, a socket the seccomp filter kills. The OCR path itself never resolves a name.
    for path in ("/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf"):
        yield path, landlock.READ_FILE
    tessdata = os.environ.get("TESSDATA_PREFIX")
    if tessdata:
        yield tessdata, landlock.READ
    yield "/dev/null", landlock.READ_FILE | landlock.WRITE_FILE
    tesseract = shutil.which("tesseract")
    if tesseract:
        tesseract = os.path.realpath(tesseract)
        yield tesseract, landlock.RUN
        interpreter = _elf_interpreter(tesseract)
        if interpreter:
            yield os.path.realpath(interpreter), landlock.RUN


def plan(limits: SandboxLimits, scratch_root: str, uid_base: int, skip: frozenset[str]) -> JailPlan:
    """Do once, in the fork server, everything a child would otherwise repeat.

    That includes the network namespace: the fork server moves itself into a new, empty one
    (no interface up, not even loopback), and every child inherits it. A namespace per child
    would cost each fork about a millisecond more, plus the kernel's asynchronous teardown, and
    would only separate children from one another, which the seccomp socket ban and Landlock's
    abstract-socket scope already do.
    """
    netns = NETNS not in skip and _LIBC.unshare(_CLONE_NEWNET) == 0
    rules = landlock.prepare(_allowed_paths()) if LANDLOCK not in skip else landlock.Rules(0, ())
    program = seccomp.compile_filter() if SECCOMP not in skip else None
    return JailPlan(limits, scratch_root, uid_base, skip, netns, rules, program)


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
    """Kernel ceilings for this process and everything it starts.

    RLIMIT_NPROC counts every process and thread of the *uid*, system-wide: it bounds the job
    only when the job has a uid of its own. Under the worker's shared uid it would count the
    worker's own processes and starve tesseract, so it is left alone there (and the missing
    uid_drop layer is what the report shows).
    """
    cpu = limits.cpu_seconds
    ceilings = [
        (resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes),
        # soft < hard: the soft limit delivers SIGXCPU, which the parent can tell apart from
        # every other SIGKILL; the hard limit still kills a child that ignores SIGXCPU.
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (resource.RLIMIT_CORE, 0, 0),
    ]
    if own_uid:
        ceilings.append((resource.RLIMIT_NPROC, limits.processes, limits.processes))
    for which, soft, hard in ceilings:
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


def _reset_process_state(scratch: str) -> None:
    """Forget what the fork server's Python set up: its signal wakeup, its temp dir, its env."""
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(
        {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": scratch,
            "TMPDIR": scratch,
            "LANG": "C.UTF-8",
            # One OpenMP thread per job: on few cores tesseract's threads thrash (2.5 s vs 18 s).
            "OMP_THREAD_LIMIT": "1",
        }
    )
    tempfile.tempdir = scratch  # tempfile caches the directory it saw in the fork server


def jail(jail_plan: JailPlan, zygote_pid: int, job_fd: int, answer_fd: int) -> frozenset[str]:
    """Jail the calling (freshly forked) child; return the layers now in force.

    Order matters: ownership needs root, so it comes first; Landlock after the
    uid drop and no_new_privs; seccomp last because it forbids the calls the earlier steps make.
    """
    active: set[str] = set()
    skip = jail_plan.skip
    os.setsid()  # its own process group, so the whole job dies with one killpg
    if jail_plan.netns:
        active.add(NETNS)  # inherited from the fork server
    pid = os.getpid()
    uid = jail_plan.uid_base + pid
    scratch = scratch_dir(jail_plan, pid)
    os.mkdir(scratch, 0o700)
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
    if is_root and UID_DROP not in skip and _drop_uid(uid):
        active.add(UID_DROP)
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


def remove_scratch(jail_plan: JailPlan, pid: int) -> None:
    """Delete a dead child's scratch directory once its whole process group is gone."""
    shutil.rmtree(scratch_dir(jail_plan, pid), ignore_errors=True)
