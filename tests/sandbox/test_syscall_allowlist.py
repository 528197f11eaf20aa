"""The seccomp allow list covers every call the parsers make, and names the one it lacks.

strace follows a fork server whose filter only logs, while every corpus document, every hostile
file of the suite and OCR run in its children; a call the list does not allow would kill a real
job, so the test fails naming it (and how often it was made), for the list in
``sandbox/policy.py`` to be extended with a reason, or the parser change to be reconsidered.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sandbox import policy
from sandbox.runner import SandboxRunner
from tests.sandbox.syscall_trace import (
    TRACE_LIMITS,
    argument_breaches,
    children_calls,
    corpus_jobs,
    hostile_jobs,
    trace,
)

ALLOWED = (
    set(policy.ALLOWED_SYSCALLS)
    | {rule.syscall for rule in policy.ARGUMENT_RULES}
    | {rule.syscall for rule, _ in policy.ERRNO_RULES}
)


@pytest.mark.slow
def test_every_call_the_parsers_make_is_allowed(corpus_dir: Path, tmp_path: Path) -> None:
    assert shutil.which("strace"), "strace is installed by scripts/test"
    with SandboxRunner(TRACE_LIMITS, warm_children=0, seccomp_log=True) as runner:
        seen = trace(runner, corpus_jobs(corpus_dir) + hostile_jobs(), tmp_path / "strace.log")
    calls = children_calls(seen)
    # The trace saw the jobs: reading the job, answering it, and executing tesseract.
    assert {"read", "write", "execve", "vfork", "fcntl", "ioctl", "prlimit64"} <= set(calls)
    missing = {name: count for name, count in calls.items() if name not in ALLOWED}
    assert missing == {}, f"calls the seccomp allow list lacks (name: times made): {missing}"
    breaches = argument_breaches(seen)
    assert breaches == {}, f"calls whose arguments the allow list refuses: {breaches}"


def test_the_trace_reader_sees_calls_after_the_allow_list_and_in_vfork_children() -> None:
    log = "\n".join(
        [
            '10 openat(AT_FDCWD, "/x", O_RDONLY) = 3',  # the jail, before its filter
            "10 seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, {}) = 83",
            "10 sendmsg(4, {msg_name=NULL}, 0) = 5",  # the jail sends the guard's listener
            "10 prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, 0x1) = 0",
            "10 vfork( <unfinished ...>",
            '11 execve("/usr/bin/tesseract", [], 0x0 /* 4 vars */) = 0',  # before vfork returns
            "11 shmget(IPC_PRIVATE, 4096, IPC_CREAT|0666) = 7",
            "10 <... vfork resumed>) = 11",
            '10 read(0, "", 4) = 0',
            '12 mkdir("d", 0777) = 0',  # another process, never filtered
        ]
    )
    assert children_calls(log) == {"vfork": 1, "execve": 1, "shmget": 1, "read": 1}


def test_the_trace_reader_names_arguments_the_allow_list_refuses() -> None:
    log = "\n".join(
        [
            "10 fcntl(5, F_SETPIPE_SZ, 1048576) = 1048576",  # the jail, before its filter
            "10 prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, 0x1) = 0",
            "10 fcntl(3, F_GETFD) = 1",
            "10 fcntl(4, F_GETFD <unfinished ...>",
            "10 <... fcntl resumed>) = 1",
            "10 fcntl(5, F_SETPIPE_SZ, 1048576) = 1048576",
            "10 ioctl(0, TCGETS, 0x7ffd) = -1 ENOTTY",
            "10 ioctl(0, TIOCSTI, 0x7ffd) = 0",
            "10 prlimit64(0, RLIMIT_STACK, NULL, {rlim_cur=8192*1024}) = 0",
            "10 prlimit64(0, RLIMIT_CPU, {rlim_cur=31, rlim_max=31}, NULL) = 0",
        ]
    )
    assert argument_breaches(log) == {
        "fcntl F_SETPIPE_SZ": 1,
        "ioctl TIOCSTI": 1,
        "prlimit64 RLIMIT_CPU": 1,
    }
