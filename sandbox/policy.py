"""The system calls a jailed job may make: an allow list, everything else kills the job.

Policy as data, apart from the mechanism that compiles it (``sandbox/seccomp.py``). Derived
from what the parsers and tesseract really call on the corpus, the suite's hostile files and
OCR (``python -m tests.sandbox.syscall_trace``), plus the few calls any C library may make on
a path the corpus did not take (``mremap`` for a large realloc, ``abort``'s ``tgkill``). What
is absent is the point: no ``fork`` (a job is its child plus the programs it execs), no file
creation (``openat`` only without ``O_CREAT``/``O_TMPFILE``; no ``mkdir``, ``rename``,
``unlink``), no ``memfd_create`` or ``execveat`` (code from memory), no SysV or POSIX IPC (memory
that outlives the job), no ``ptrace``, namespaces, mounts, keyrings, BPF or io_uring.
See docs/sandbox.md, "System calls".
"""

from __future__ import annotations

from dataclasses import dataclass

#: Calls allowed with any arguments, grouped by why a parser needs them.
ALLOWED_SYSCALLS: tuple[str, ...] = (
    # the job and answer pipes, and reading the interpreter, libraries and tessdata
    "read", "readv", "pread64", "write", "writev", "close", "close_range", "lseek",
    "fstat", "stat", "lstat", "newfstatat", "statx", "access", "faccessat", "faccessat2",
    "readlink", "readlinkat", "getdents64", "getcwd", "fcntl", "dup", "dup2", "dup3", "pipe2",
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
CLONE_NAMESPACES = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)
# CLONE_PARENT would make the new process a sibling of the job, outside the tree the fork
# server watches; namespaces reach kernel code the jail does not expect.
_CLONE_NEVER = CLONE_PARENT | CLONE_NAMESPACES

# The terminal ioctls Python and tesseract make (isatty, window size) and the fd-flag ones.
ALLOWED_IOCTLS = (
    0x5401,  # TCGETS
    0x5413,  # TIOCGWINSZ
    0x5421,  # FIONBIO
    0x5450,  # FIONCLEX
    0x5451,  # FIOCLEX
)

# prctl(2) options that only read or name the calling thread.
ALLOWED_PRCTLS = (
    3,  # PR_GET_DUMPABLE
    15,  # PR_SET_NAME
    16,  # PR_GET_NAME
    23,  # PR_CAPBSET_READ
    39,  # PR_GET_NO_NEW_PRIVS
)


@dataclass(frozen=True)
class ArgRule:
    """Allow ``syscall`` when ``argument & mask == value``; several rules for one call are
    alternatives."""

    syscall: str
    argument: int
    mask: int
    value: int


ARGUMENT_RULES: tuple[ArgRule, ...] = (
    ArgRule("openat", 2, O_CREAT | O_TMPFILE, 0),
    ArgRule("open", 1, O_CREAT | O_TMPFILE, 0),
    ArgRule("clone", 0, CLONE_THREAD | _CLONE_NEVER, CLONE_THREAD),
    ArgRule("clone", 0, CLONE_VM | CLONE_VFORK | _CLONE_NEVER, CLONE_VM | CLONE_VFORK),
    # prlimit64 on itself only (pid 0): reading a limit, or lowering one.
    ArgRule("prlimit64", 0, 0xFFFFFFFF, 0),
    *(ArgRule("ioctl", 1, 0xFFFFFFFF, request) for request in ALLOWED_IOCTLS),
    *(ArgRule("prctl", 0, 0xFFFFFFFF, option) for option in ALLOWED_PRCTLS),
)

#: Calls answered with an error instead of a kill, because a library probes them and copes.
#: glibc inside tesseract tries the nscd socket (AF_UNIX) at start-up and falls back to
#: /etc files; glibc tries clone3 first and falls back to clone, whose flags BPF can read.
ERRNO_RULES: tuple[tuple[ArgRule, str], ...] = (
    (ArgRule("socket", 0, 0xFFFFFFFF, 1), "EACCES"),  # AF_UNIX only: every other family kills
    (ArgRule("clone3", 0, 0, 0), "ENOSYS"),
)
