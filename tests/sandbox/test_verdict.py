"""The verdict on a child that died: typed, so the trusted side decides without reading words."""

from __future__ import annotations

import signal

from bridge.knowledge.failures import Failure
from sandbox.errors import (
    ALL_ERRORS,
    ChildCrashed,
    KilledFromOutside,
    SandboxError,
    SandboxUnavailable,
)
from sandbox.fork_server import ExitNotice
from sandbox.limits import SandboxLimits
from sandbox.verdict import from_exit

LIMITS = SandboxLimits()


def _killed_by(number: int, cpu_seconds: float = 0.1) -> SandboxError:
    return from_exit(ExitNotice(1, number, cpu_seconds, max_rss_bytes=0), LIMITS, 0)


def test_a_sigkill_none_of_our_limits_sent_is_the_hosts_failure_told_as_a_crash() -> None:
    verdict = _killed_by(signal.SIGKILL)
    assert type(verdict) is KilledFromOutside and isinstance(verdict, ChildCrashed)
    assert Failure.of(verdict) == Failure("ChildCrashed", str(verdict), transient=True)


def test_a_crash_of_the_parser_itself_is_a_verdict_on_the_document() -> None:
    verdict = _killed_by(signal.SIGSEGV)
    assert type(verdict) is ChildCrashed
    assert Failure.of(verdict) == Failure("ChildCrashed", "the parser crashed with SIGSEGV")


def test_the_cpu_hard_limit_is_not_mistaken_for_an_outside_kill() -> None:
    verdict = _killed_by(signal.SIGKILL, cpu_seconds=LIMITS.cpu_seconds)
    assert not verdict.transient and verdict.reported_as == "CpuLimitExceeded"


def test_every_verdict_is_named_by_its_class_but_the_outside_kill() -> None:
    renamed = {cls for cls in ALL_ERRORS if cls.reported_as != cls.__name__}
    assert renamed == {KilledFromOutside}
    assert {cls for cls in ALL_ERRORS if cls.transient} == {SandboxUnavailable, KilledFromOutside}


def test_an_unavailable_sandbox_is_a_transient_failure_the_worker_retries() -> None:
    failure = Failure.of(SandboxUnavailable("the fork server died"))
    assert failure == Failure("SandboxUnavailable", "the fork server died", transient=True)
