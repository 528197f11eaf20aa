"""The sandbox policy as data: the files, system calls, environment and rlimits of a jailed job.

The mechanisms read it and define none of it: ``jail.py`` (paths, environment, rlimits),
``seccomp.py`` (system calls), ``fork_server.py`` and the OCR extractor (environment). Each
rule's why is beside it; docs/sandbox.md ("Layers", "System calls") gives the whole picture.
"""

from __future__ import annotations

import os
import resource
import sysconfig
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from sandbox import landlock
from sandbox.limits import SandboxLimits

# --- files (Landlock) -------------------------------------------------------------------------

#: The one program a job may execute. Its loader and the shared libraries it maps (as
#: ``ld.so --list`` resolves them) are granted with it, and nothing else of /usr/lib: the
#: loader runs any ELF it can read (``ld.so /usr/lib/git-core/git``), so what is readable is
#: what can run.
EXECUTABLE = "tesseract"


def allowed_paths() -> Iterator[tuple[str, int]]:
    """The files a parser legitimately touches besides ``EXECUTABLE``, with the rights on each.

    Python's own library directories (a forgotten lazy import should fail on DAC, not here) and
    tessdata. The parsers' own C libraries are mapped in the fork server before any child
    exists, so the child never opens them again.
    """
    paths = sysconfig.get_paths()
    for name in ("stdlib", "platstdlib", "purelib", "platlib"):
        yield paths[name], landlock.READ
    for path in ("/etc/ld.so.cache", "/usr/share/tesseract-ocr", "/dev/urandom"):
        yield path, landlock.READ
    # `tesseract --version` (run by the isolation tests to prove the binary may execute) makes
    # libldap resolve the host's own name: from /etc/hosts when these are readable, else by
    # DNS, a socket the seccomp filter kills. The OCR path itself never resolves a name.
    for path in ("/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf"):
        yield path, landlock.READ_FILE
    tessdata = tessdata_dir()
    if tessdata:
        yield tessdata, landlock.READ
    yield "/dev/null", landlock.READ_FILE | landlock.WRITE_FILE


# --- environment ------------------------------------------------------------------------------

#: One OpenMP thread per job: with OpenMP's default a 300-dpi page took 18 s of OCR instead of
#: 2.5 s on two shared cores. Set for the fork server, the child and every tesseract run.
THREAD_ENV: Mapping[str, str] = {"OMP_THREAD_LIMIT": "1"}
SEARCH_PATH = "/usr/local/bin:/usr/bin:/bin"
LANG = "C.UTF-8"


def tessdata_dir() -> str | None:
    """tesseract's own ``TESSDATA_PREFIX``, as the process that started the fork server had it.

    Not an airlock setting but tesseract's: passed through so a deployment's own models are
    found, and granted to Landlock so they can be read.
    """
    return os.environ.get("TESSDATA_PREFIX") or None


def child_env(scratch: str) -> dict[str, str]:
    """A jailed child's whole environment: nothing of the fork server's, scratch as its home."""
    env = {"PATH": SEARCH_PATH, "HOME": scratch, "TMPDIR": scratch, "LANG": LANG, **THREAD_ENV}
    tessdata = tessdata_dir()
    if tessdata:
        env["TESSDATA_PREFIX"] = tessdata
    return env


# --- rlimits ----------------------------------------------------------------------------------


def rlimits(limits: SandboxLimits, own_uid: bool) -> tuple[tuple[int, int, int], ...]:
    """(resource, soft, hard) for a child and everything it starts.

    RLIMIT_NPROC counts every process and thread of the *uid*, system-wide: it bounds the job
    only when the job has a uid of its own. Under the worker's shared uid it would count the
    worker's own processes and starve tesseract, so it is left alone there (and the missing
    uid_drop layer is what the report shows).
    """
    cpu = limits.cpu_seconds
    table = (
        (resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes),
        # soft < hard: the soft limit delivers SIGXCPU, which the parent can tell apart from
        # every other SIGKILL; the hard limit still kills a child that ignores SIGXCPU.
        (resource.RLIMIT_CPU, cpu, cpu + 1),
        (resource.RLIMIT_FSIZE, limits.file_size_bytes, limits.file_size_bytes),
        (resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (resource.RLIMIT_CORE, 0, 0),
    )
    if own_uid:
        return (*table, (resource.RLIMIT_NPROC, limits.processes, limits.processes))
    return table


# --- system calls (seccomp) -------------------------------------------------------------------
# Derived from what the parsers and tesseract really call on the corpus, the suite's hostile
# files and OCR (``python -m tests.sandbox.syscall_trace``), plus the few calls any C library
# may make on a path the corpus did not take (``mremap`` for a large realloc, ``abort``'s
# ``tgkill``). What is absent is the point: see docs/sandbox.md, "System calls".

#: Calls allowed with any arguments, grouped by why a parser needs them.
ALLOWED_SYSCALLS: tuple[str, ...] = (
    # the job and answer pipes, and reading the interpreter, libraries and tessdata
    "read", "readv", "pread64", "write", "writev", "close", "close_range", "lseek",
    "fstat", "stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2",
    "readlink", "readlinkat", "getdents64", "getcwd", "dup", "dup2", "dup3", "pipe2",
    "poll", "ppoll", "select", "pselect6",
    # memory of the process itself (bounded by RLIMIT_AS)
    "brk", "mmap", "munmap", "mprotect", "mremap", "madvise",
    # threads share the process's memory and CPU limits
    "futex", "set_robust_list", "rseq", "set_tid_address", "sched_yield",
    "sched_getaffinity", "gettid",
    # starting and waiting for tesseract (what may be executed is Landlock's decision)
    "vfork", "execve", "wait4", "waitid", "exit", "exit_group",
    # identity, limits and clocks
    "getpid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
    "getresgid", "getgroups", "getpgrp", "getpgid", "getsid", "capget", "uname", "sysinfo",
    "getrusage", "times", "arch_prctl",
    "clock_gettime", "clock_getres", "gettimeofday", "time", "nanosleep",
    "clock_nanosleep", "getrandom",
    # signals: Python's handlers, abort() and crash reporting on itself
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "restart_syscall",
    "kill", "tgkill",
)  # fmt: skip

# openat(2) flags that create a file: a job writes nothing to disk, so it cannot fill it, leave
# anything behind, or build a tree the fork server would have to walk to remove.
O_CREAT = 0o100
O_TMPFILE = 0o20000000

# clone(2) flags. A thread shares its process's memory and CPU limits; a vfork child shares
# the memory until it execs (Python's subprocess and posix_spawn use it). A plain fork would
# be a second process with limits of its own, so it is not allowed.
CLONE_VM = 0x00000100
CLONE_VFORK = 0x00004000
CLONE_PARENT = 0x00008000
CLONE_THREAD = 0x00010000
#: The two namespaces the zygote enters (jail.py) and no child may create again.
CLONE_NEWIPC = 0x08000000
CLONE_NEWNET = 0x40000000
CLONE_NAMESPACES = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | CLONE_NEWNET
)
# CLONE_PARENT would make the new process a sibling of the job, outside the tree the fork
# server watches; namespaces reach kernel code the jail does not expect.
_CLONE_NEVER = CLONE_PARENT | CLONE_NAMESPACES

# The terminal ioctls Python and tesseract make (isatty, window size), the fd-flag ones, and
# FIONREAD (how many bytes a pipe holds: a library sizing its read may ask, and it reveals
# nothing but the job's own pipe).
ALLOWED_IOCTLS = (
    0x5401,  # TCGETS
    0x5413,  # TIOCGWINSZ
    0x541B,  # FIONREAD
    0x5421,  # FIONBIO
    0x5450,  # FIONCLEX
    0x5451,  # FIOCLEX
)

# fcntl(2) commands on the job's own descriptors: duplicate them, read and set their flags. Not
# F_SETPIPE_SZ (a pipe for every two of the 64 descriptors, grown to 1 MiB each, is kernel
# memory that no resident-memory count shows), F_SETOWN/F_SETSIG (SIGIO sent to another
# process), leases, locks, directory notifications or seals.
ALLOWED_FCNTLS = (
    0,  # F_DUPFD
    1,  # F_GETFD
    2,  # F_SETFD
    3,  # F_GETFL
    4,  # F_SETFL
    1030,  # F_DUPFD_CLOEXEC
)

# prctl(2) options that only read or name the calling thread.
ALLOWED_PRCTLS = (
    3,  # PR_GET_DUMPABLE
    15,  # PR_SET_NAME
    16,  # PR_GET_NAME
    23,  # PR_CAPBSET_READ
    39,  # PR_GET_NO_NEW_PRIVS
)

#: A whole 64-bit argument (a pointer) compared by ``Arg``; 32-bit ones (an fd, a command, a
#: pid) are compared on their low half, which is all the kernel reads of them.
WHOLE = 0xFFFFFFFFFFFFFFFF
LOW_HALF = 0xFFFFFFFF


@dataclass(frozen=True)
class Arg:
    """``argument number index & mask == value``."""

    index: int
    mask: int
    value: int


@dataclass(frozen=True)
class ArgRule:
    """Allow ``syscall`` when every check holds (none: always); several rules for one call are
    alternatives."""

    syscall: str
    checks: tuple[Arg, ...]


def _equals(syscall: str, index: int, value: int) -> ArgRule:
    return ArgRule(syscall, (Arg(index, LOW_HALF, value),))


ARGUMENT_RULES: tuple[ArgRule, ...] = (
    ArgRule("openat", (Arg(2, O_CREAT | O_TMPFILE, 0),)),
    ArgRule("open", (Arg(1, O_CREAT | O_TMPFILE, 0),)),
    ArgRule("clone", (Arg(0, CLONE_THREAD | _CLONE_NEVER, CLONE_THREAD),)),
    ArgRule("clone", (Arg(0, CLONE_VM | CLONE_VFORK | _CLONE_NEVER, CLONE_VM | CLONE_VFORK),)),
    # prlimit64 on itself (pid 0) and only to read (no new limit): raising the CPU soft limit
    # to the hard one would take away the SIGXCPU that tells a CPU kill apart.
    ArgRule("prlimit64", (Arg(0, LOW_HALF, 0), Arg(2, WHOLE, 0))),
    *(_equals("ioctl", 1, request) for request in ALLOWED_IOCTLS),
    *(_equals("fcntl", 1, command) for command in ALLOWED_FCNTLS),
    *(_equals("prctl", 0, option) for option in ALLOWED_PRCTLS),
)

#: Calls answered with an error instead of a kill, because a library probes them and copes.
#: glibc inside tesseract tries the nscd socket (AF_UNIX) at start-up and falls back to
#: /etc files; glibc tries clone3 first and falls back to clone, whose flags BPF can read.
ERRNO_RULES: tuple[tuple[ArgRule, str], ...] = (
    (_equals("socket", 0, 1), "EACCES"),  # AF_UNIX only: every other family kills
    (ArgRule("clone3", ()), "ENOSYS"),
)

#: Every call that makes a task (a process or a thread). The process guard (a second filter,
#: installed before the allow list) hands each one to the fork server, which lets it run only
#: while the job's tasks, however they are parented, stay within its ``processes`` budget:
#: without a uid of the job's own there is no kernel counter to do it (``RLIMIT_NPROC`` counts
#: the whole uid), and a sample every 50 ms lets a job start hundreds of threads in between.
#: The allow list still decides which of them may run at all (fork kills, clone3 is ENOSYS).
GUARDED_SYSCALLS: tuple[str, ...] = ("clone", "clone3", "fork", "vfork")
