"""Run one parser on untrusted bytes in a pre-jailed child and return its text or a typed failure.

The runner owns one fork server (started on first use, restarted if it dies). A job takes a
warm child, writes the job to its pipe, and reads at most ``output_bytes`` of answer before the
wall clock runs out; nothing read back is trusted until ``protocol.decode_answer`` has checked
it. Thread-safe: jobs from several threads share the fork server, each on its own child.
"""

from __future__ import annotations

import atexit
import math
import os
import select
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from sandbox import protocol, verdict
from sandbox.errors import (
    MalformedAnswer,
    OutputTooLarge,
    SandboxUnavailable,
    WallClockExceeded,
)
from sandbox.fork_server import ForkServer, WarmChild
from sandbox.jail import DEFAULT_UID_BASE, MECHANISMS
from sandbox.limits import ParseLimits, SandboxLimits

DEFAULT_MODULES = ("sandbox.extractors.all",)
# Importing and warming every parser can take seconds on a cold disk; a child, milliseconds.
_START_SECONDS = 120.0
_CHILD_READY_SECONDS = 30.0
_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class ExtractionResult:
    text: str
    pages: int | None  # None when the extractor does not report a page count


def mechanism_names(value: str, source: str) -> frozenset[str]:
    """Parse a comma-separated list of mechanism names, refusing unknown ones.

    A typo in a requirement ("seccom") must stop the deployment, not silently require nothing.
    """
    names = frozenset(name.strip() for name in value.split(",") if name.strip())
    unknown = names - MECHANISMS
    if unknown:
        raise ValueError(
            f"{source} names unknown sandbox mechanisms {sorted(unknown)}; "
            f"known: {sorted(MECHANISMS)}"
        )
    return names


def required_by_env() -> frozenset[str]:
    """The mechanisms ``AIRLOCK_SANDBOX_REQUIRE`` says a deployment may not run without."""
    return mechanism_names(os.environ.get("AIRLOCK_SANDBOX_REQUIRE", ""), "AIRLOCK_SANDBOX_REQUIRE")


@dataclass(frozen=True)
class _Exchange:
    """What the job's pipe conversation produced (before anything is trusted)."""

    untrusted_body: bytes | None = None
    received: int = 0
    timed_out: bool = False
    untrusted_length: int | None = None  # set when the announced length is over the cap


def _feed(fd: int, pending: deque[memoryview]) -> bool:
    """Write what the pipe takes now; True once everything is written or the reader is gone."""
    while pending:
        try:
            written = os.write(fd, pending[0][:_CHUNK_BYTES])
        except BlockingIOError:
            return False
        except BrokenPipeError:
            return True  # the child died; its exit status will say how
        if written == len(pending[0]):
            pending.popleft()
        else:
            pending[0] = pending[0][written:]
    return True


ProgressCallback = Callable[[int, int], None]

# What a progress frame starts with; anything else is the answer.
_PROGRESS_PREFIX = b'{"progress"'


def _exchange(
    child: WarmChild,
    job: list[bytes],
    deadline: float,
    cap: int,
    on_progress: ProgressCallback | None,
) -> _Exchange:
    """Send the job while reading the answer, until a full answer, EOF, the cap or the deadline.

    Progress frames ahead of the answer are validated and handed to ``on_progress``. At most
    ``cap`` bytes of frame bodies (plus their 4-byte lengths) are ever read, progress frames
    included: a child announcing more is cut off at the length.
    """
    os.set_blocking(child.job_fd, False)
    pending = deque(memoryview(part) for part in job if part)
    poller = select.poll()
    poller.register(child.job_fd, select.POLLOUT)
    poller.register(child.answer_fd, select.POLLIN)
    job_open = True
    untrusted_bytes = bytearray()
    untrusted_length: int | None = None
    header = protocol.LENGTH.size
    budget = cap
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return _Exchange(received=len(untrusted_bytes), timed_out=True)
            for fd, events in poller.poll(math.ceil(remaining * 1000)):
                if fd == child.job_fd:
                    if _feed(fd, pending) or events & (select.POLLERR | select.POLLHUP):
                        poller.unregister(fd)
                        os.close(fd)  # EOF tells the child the job is complete
                        job_open = False
                    continue
                wanted = header + (untrusted_length or 0) - len(untrusted_bytes)
                chunk = os.read(fd, min(wanted, _CHUNK_BYTES))
                if not chunk:
                    return _Exchange(received=len(untrusted_bytes))
                untrusted_bytes += chunk
                if untrusted_length is None and len(untrusted_bytes) >= header:
                    (untrusted_length,) = protocol.LENGTH.unpack_from(untrusted_bytes)
                    if untrusted_length > budget:
                        return _Exchange(None, len(untrusted_bytes), False, untrusted_length)
                if (
                    untrusted_length is not None
                    and len(untrusted_bytes) == header + untrusted_length
                ):
                    untrusted_body = bytes(untrusted_bytes[header:])
                    if not untrusted_body.startswith(_PROGRESS_PREFIX):
                        return _Exchange(untrusted_body, len(untrusted_bytes))
                    progress = protocol.decode_answer(untrusted_body)
                    if on_progress is not None and isinstance(progress, protocol.Progress):
                        on_progress(progress.done, progress.total)
                    budget -= untrusted_length
                    untrusted_bytes.clear()
                    untrusted_length = None
    finally:
        if job_open:
            os.close(child.job_fd)


_RUNNERS: weakref.WeakSet[SandboxRunner] = weakref.WeakSet()


class SandboxRunner:
    """Jobs in isolated children of one fork server that imported ``modules`` once.

    ``require`` names mechanisms without which the runner refuses to run anything: by default
    the ones ``AIRLOCK_SANDBOX_REQUIRE`` names; a set given here replaces that list, so the
    doctor can probe one layer alone on a host whose deployment requires them all. ``skip``
    turns mechanisms off on purpose, so a test can show that each remaining layer holds on its
    own; naming one in both is an error.
    """

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),  # noqa: B008 - frozen value
        *,
        warm_children: int = 2,
        modules: tuple[str, ...] = DEFAULT_MODULES,
        require: frozenset[str] | None = None,
        skip: frozenset[str] = frozenset(),
    ) -> None:
        if warm_children < 0:
            raise ValueError("warm_children must be zero or more")
        self.limits = limits
        self._warm_children = warm_children
        self._modules = tuple(modules)
        self._require = (
            required_by_env() if require is None else mechanism_names(",".join(require), "require")
        )
        self._skip = mechanism_names(",".join(skip), "skip")
        if self._require & self._skip:
            both = sorted(self._require & self._skip)
            raise ValueError(f"mechanisms both required and skipped: {both}")
        self._uid_base = int(os.environ.get("AIRLOCK_SANDBOX_UID_BASE", DEFAULT_UID_BASE))
        self._lock = threading.Lock()
        self._server: ForkServer | None = None
        self._closed = False
        _RUNNERS.add(self)

    def _fork_server(self) -> ForkServer:
        with self._lock:
            if self._closed:
                raise SandboxUnavailable("the sandbox runner is closed")
            if self._server is not None and self._server.alive:
                return self._server
            dead, self._server = self._server, None
            if dead is not None:
                dead.close()  # reap it and remove its scratch root (never raises)
            server = ForkServer(
                self.limits, self._modules, self._uid_base, self._skip, _START_SECONDS
            )
            missing = self._require - server.mechanisms
            if missing:
                server.close()
                raise SandboxUnavailable(
                    f"required sandbox mechanisms are unavailable on this host: "
                    f"{', '.join(sorted(missing))} (active: {', '.join(sorted(server.mechanisms))})"
                )
            server.prefill(self._warm_children)
            self._server = server
            return server

    @property
    def mechanisms(self) -> frozenset[str]:
        """The isolation layers a jailed child actually holds on this host."""
        return self._fork_server().mechanisms

    def run(
        self,
        kind: str,
        media_type: str,
        payload: bytes,
        parse_limits: ParseLimits = ParseLimits(),  # noqa: B008 - frozen value
        on_progress: ProgressCallback | None = None,
    ) -> ExtractionResult:
        """Run one job in a fresh jailed child; ``on_progress(done, total)`` hears its pages.

        A job whose fork server dies under it (while it takes a child, or while the child
        runs and before the child's answer or exit notice arrived) never got a verdict on its
        document: it runs once more, from its first page and with a full wall clock, on a
        fresh fork server. Only once: a second death is an infrastructure failure to report.
        A job whose child answered, or whose exit the fork server reported, has its verdict
        and is never run again.
        """
        header = protocol.JobHeader(kind, media_type, parse_limits)
        job = [protocol.encode_job_header(header), protocol.LENGTH.pack(len(payload)), payload]
        server = self._fork_server()
        try:
            return self._run_on(server, job, on_progress)
        except SandboxUnavailable:
            if server.alive:
                raise  # a child that could not jail, a missing layer: a retry would meet it too
        return self._run_on(self._fork_server(), job, on_progress)

    def _run_on(
        self, server: ForkServer, job: list[bytes], on_progress: ProgressCallback | None
    ) -> ExtractionResult:
        child = server.take(_CHILD_READY_SECONDS)
        try:
            missing = self._require - child.mechanisms
            if missing:
                os.close(child.job_fd)
                child.kill()
                raise SandboxUnavailable(
                    f"a sandbox child came up without {', '.join(sorted(missing))}"
                )
            deadline = time.monotonic() + self.limits.wall_seconds
            try:
                exchange = _exchange(child, job, deadline, self.limits.output_bytes, on_progress)
            except BaseException:
                child.kill()
                raise
            return self._conclude(server, child, exchange, deadline)
        finally:
            os.close(child.answer_fd)
            os.close(child.pidfd)
            server.forget(child.pid)

    def _conclude(
        self, server: ForkServer, child: WarmChild, exchange: _Exchange, deadline: float
    ) -> ExtractionResult:
        limits = self.limits
        if exchange.untrusted_body is not None:
            child.kill()  # single use: nothing it does after answering may matter
            answer = protocol.decode_answer(exchange.untrusted_body)
            if isinstance(answer, protocol.TextAnswer):
                return ExtractionResult(answer.text, answer.pages)
            if isinstance(answer, protocol.Progress):
                raise MalformedAnswer("the child's answer is malformed: a progress frame last")
            raise verdict.from_error_answer(answer, limits)
        if exchange.untrusted_length is not None:
            child.kill()
            raise OutputTooLarge(
                f"the parser's answer announced {exchange.untrusted_length} bytes; "
                f"the output limit is {limits.output_bytes} bytes"
            )
        notice = None if exchange.timed_out else server.wait_exit(child.pid, deadline)
        if notice is None:
            child.kill()
            raise WallClockExceeded(
                f"the parser ran past the {limits.wall_seconds:g}-second wall-clock limit "
                "and was killed"
            )
        raise verdict.from_exit(notice, limits, exchange.received)

    def close(self) -> None:
        """Stop the fork server; it kills every child it still has. Idempotent."""
        with self._lock:
            self._closed = True
            server, self._server = self._server, None
        if server is not None:
            server.close()

    def __enter__(self) -> SandboxRunner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _forget_after_fork(self) -> None:
        """In a forked copy of the worker, start over with a fork server of its own."""
        self._lock = threading.Lock()
        self._server = None


def _close_all() -> None:
    for runner in tuple(_RUNNERS):
        runner.close()


def _after_fork_in_child() -> None:
    for runner in tuple(_RUNNERS):
        runner._forget_after_fork()


atexit.register(_close_all)
os.register_at_fork(after_in_child=_after_fork_in_child)
