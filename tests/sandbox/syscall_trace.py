"""Which system calls jailed children really make, seen by strace attached to the fork server.

The seccomp allow list (``sandbox/policy.py``) is derived from this: the jobs below (every
corpus document, the hostile files of the suite, OCR) run in children of a fork server that
strace follows, and every call a child makes after its filter is installed, or that a process
it started makes, is collected. ``python -m tests.sandbox.syscall_trace`` prints the result;
the test in ``test_syscall_allowlist.py`` fails naming any call the list lacks.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from sandbox.errors import SandboxError
from sandbox.runner import SandboxRunner
from tests.conftest import CORPUS_DIR
from tests.sandbox.hostile_inputs import DOCX, HOSTILE, LIMITS

# Room for every corpus page to be OCR'd under strace, which slows each call.
TRACE_LIMITS = replace(LIMITS, cpu_seconds=120, wall_seconds=300.0)

# "PID name(" for a call, "PID <... name resumed>" for the second half of an interrupted one.
_CALL = re.compile(r"^(\d+) +(?:<\.\.\. (\w+) resumed>|(\w+)\()")
_NEW_PROCESS = re.compile(r"^(\d+) +(?:<\.\.\. )?(?:vfork|clone|clone3|fork)\b.*= (\d+)$")
_FILTER_LOADED = re.compile(r"^(\d+) +(?:prctl\(PR_SET_SECCOMP|seccomp\()")

Job = tuple[str, str, bytes]


def children_calls(strace_output: str) -> dict[str, int]:
    """Count each call made under a seccomp filter: after the filter, or by a filtered pid's
    descendants. The jail's own set-up calls (before the filter) are not the parsers'.

    A vfork child runs (and strace prints its calls) before its parent's vfork returns, so
    who is filtered from which line on is settled first and the calls are counted after.
    """
    lines = strace_output.splitlines()
    filtered_from: dict[int, int] = {}
    births: list[tuple[int, int, int]] = []  # (line, parent, child)
    for number, line in enumerate(lines):
        loaded = _FILTER_LOADED.match(line)
        if loaded:
            filtered_from.setdefault(int(loaded.group(1)), number)
        born = _NEW_PROCESS.match(line)
        if born:
            births.append((number, int(born.group(1)), int(born.group(2))))
    changed = True
    while changed:
        changed = False
        for number, parent, child in births:
            if filtered_from.get(parent, len(lines)) < number and child not in filtered_from:
                filtered_from[child] = -1
                changed = True
    counts: dict[str, int] = {}
    for number, line in enumerate(lines):
        call = _CALL.match(line)
        if call is None or call.group(3) is None:  # resumed halves were counted at the start
            continue
        if filtered_from.get(int(call.group(1)), len(lines)) < number:
            counts[call.group(3)] = counts.get(call.group(3), 0) + 1
    return counts


def trace(runner: SandboxRunner, jobs: Iterable[Job], output: Path) -> dict[str, int]:
    """Run ``jobs`` on ``runner`` (built with ``warm_children=0``, so every child is forked
    while strace follows the fork server) and return the children's calls."""
    zygote = runner.fork_server_pid
    command = ["strace", "-f", "-qq", "-e", "signal=none", "-s", "0", "-o", str(output)]
    tracer = subprocess.Popen([*command, "-p", str(zygote)], stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)  # strace attaches asynchronously; a job before that would go unseen
        for kind, media_type, payload in jobs:
            # Hostile files end in typed failures; their calls count all the same.
            with contextlib.suppress(SandboxError):
                runner.run(kind, media_type, payload)
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(30)
    return children_calls(output.read_text())


def corpus_jobs(corpus: Path) -> list[Job]:
    """Every corpus document as the kind the CLI would send it as."""
    kinds = {
        ".pdf": ("pdf", "application/pdf"),
        ".docx": ("docx", DOCX),
        ".png": ("image", "image/png"),
        ".tif": ("image", "image/tiff"),
        ".jpg": ("image", "image/jpeg"),
        ".txt": ("text", "text/plain"),
    }
    return [
        (*kinds[path.suffix], path.read_bytes())
        for path in sorted(corpus.iterdir())
        if path.suffix in kinds
    ]


def hostile_jobs() -> list[Job]:
    return [(kind, media_type, build()) for _, kind, media_type, build, _ in HOSTILE]


def main() -> int:
    with (
        SandboxRunner(TRACE_LIMITS, warm_children=0, seccomp_log=True) as runner,
        tempfile.TemporaryDirectory() as directory,
    ):
        jobs = corpus_jobs(CORPUS_DIR) + hostile_jobs()
        calls = trace(runner, jobs, Path(directory) / "strace.log")
    for name in sorted(calls):
        print(f"{name} {calls[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
