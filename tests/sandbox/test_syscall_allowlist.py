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
        calls = trace(runner, corpus_jobs(corpus_dir) + hostile_jobs(), tmp_path / "strace.log")
    # The trace saw the jobs: reading the job, answering it, and executing tesseract.
    assert {"read", "write", "execve", "vfork"} <= set(calls)
    missing = {name: count for name, count in calls.items() if name not in ALLOWED}
    assert missing == {}, f"calls the seccomp allow list lacks (name: times made): {missing}"


def test_the_trace_reader_sees_calls_after_the_filter_and_in_vfork_children() -> None:
    log = "\n".join(
        [
            '10 openat(AT_FDCWD, "/x", O_RDONLY) = 3',  # the jail, before its filter
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
