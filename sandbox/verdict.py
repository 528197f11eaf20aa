"""Turn what came back from a child (an answer, or only the way it died) into a typed outcome.

See docs/sandbox.md, "Outcomes" and "Notes by module" (what is distinguishable).
"""

from __future__ import annotations

import os
import signal

from sandbox.errors import (
    BY_CODE,
    ChildCrashed,
    CpuLimitExceeded,
    ForbiddenOperation,
    KilledFromOutside,
    MalformedAnswer,
    MemoryLimitExceeded,
    NoAnswer,
    ParserError,
    ProcessLimitExceeded,
    SandboxError,
)
from sandbox.fork_server import ExitNotice
from sandbox.limits import MIB, SandboxLimits
from sandbox.protocol import ErrorAnswer

# Resident memory this close to the address-space limit counts as evidence of exhaustion.
_MEMORY_EVIDENCE = 0.9
_CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT})


def from_error_answer(answer: ErrorAnswer, limits: SandboxLimits) -> SandboxError:
    if answer.code == MemoryLimitExceeded.code:
        return MemoryLimitExceeded(
            f"the parser ran out of memory under the {limits.memory_bytes // MIB} MiB "
            f"address-space limit ({answer.type_name}: {answer.reason})"
        )
    error = BY_CODE.get(answer.code, ParserError)
    if error is ParserError:
        return ParserError(f"parser raised {answer.type_name}: {answer.reason}")
    return error(answer.reason)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def from_exit(notice: ExitNotice, limits: SandboxLimits, answered_bytes: int) -> SandboxError:
    """Classify a child that died without a complete answer (``answered_bytes`` of one sent)."""
    near_memory_limit = notice.max_rss_bytes >= _MEMORY_EVIDENCE * limits.memory_bytes
    memory = (
        f"{notice.max_rss_bytes // MIB} MiB resident of the {limits.memory_bytes // MIB} MiB limit"
    )
    if notice.job_limit == "memory":
        return MemoryLimitExceeded(
            f"the job's processes held {notice.job_peak_bytes // MIB} MiB together, over its "
            f"{limits.memory_bytes // MIB} MiB memory limit, and were killed"
        )
    if notice.job_limit == "cpu":
        return CpuLimitExceeded(
            f"the job's processes used {notice.cpu_seconds:.1f} CPU seconds together, over its "
            f"{limits.cpu_seconds}-second CPU limit, and were killed"
        )
    if notice.job_limit == "processes":
        return ProcessLimitExceeded(
            f"the job's processes and threads exceeded its limit of {limits.processes} at once "
            f"({notice.job_peak_tasks} counted), and were killed"
        )
    if os.WIFSIGNALED(notice.status):
        number = os.WTERMSIG(notice.status)
        name = _signal_name(number)
        if number == signal.SIGSYS:
            return ForbiddenOperation(
                "the parser attempted a forbidden system call and was killed by the seccomp filter"
            )
        if number == signal.SIGXCPU:
            return CpuLimitExceeded(
                f"the parser used up its {limits.cpu_seconds}-second CPU limit (SIGXCPU)"
            )
        if number == signal.SIGKILL and notice.cpu_seconds >= limits.cpu_seconds:
            return CpuLimitExceeded(
                f"the parser was killed at the hard CPU limit after "
                f"{notice.cpu_seconds:.1f} CPU seconds (SIGKILL)"
            )
        if near_memory_limit and (number == signal.SIGKILL or number in _CRASH_SIGNALS):
            return MemoryLimitExceeded(f"the parser was killed by {name} with {memory}")
        if number == signal.SIGKILL:
            return KilledFromOutside(
                "the parser was killed by SIGKILL from outside the sandbox "
                "(not by its wall-clock or CPU limit)"
            )
        return ChildCrashed(f"the parser crashed with {name}")
    code = os.WEXITSTATUS(notice.status)
    if answered_bytes:
        return MalformedAnswer(
            f"the answer was cut off after {answered_bytes} bytes when the child exited "
            f"with status {code}"
        )
    return NoAnswer(f"the parser exited with status {code} without answering")
