"""Run one parser on untrusted bytes in a pre-jailed child and return its text or a typed failure.

Nothing read back is trusted until ``sandbox.protocol`` has checked it; thread-safe.
See docs/sandbox.md, "Shape" and "Notes by module".
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
from typing import Protocol

from sandbox import pages, protocol, verdict
from sandbox.document import Document
from sandbox.errors import (
    OutputTooLarge,
    SandboxUnavailable,
    WallClockExceeded,
    Withdrawn,
)
from sandbox.fork_server import ForkServer, WarmChild
from sandbox.jail import DEFAULT_UID_BASE, MECHANISMS, UID_DROP
from sandbox.limits import ParseLimits, SandboxLimits
from sandbox.progress import ProgressGate
from sandbox.render import render

DEFAULT_MODULES = ("sandbox.extractors.all",)
# Importing and warming every parser can take seconds on a cold disk; a child, milliseconds.
_START_SECONDS = 120.0
_CHILD_READY_SECONDS = 30.0
_CHUNK_BYTES = 1 << 20
#: How often a job that can be withdrawn looks whether it was: the longest a withdrawn
#: child runs on.
_CANCEL_TICK = 0.1


class Withdrawal(Protocol):
    """Whether the caller withdrew a job: a :class:`threading.Event` in the caller's process, or
    a mark a caller elsewhere left (a queue worker's job, withdrawn by the client that sent it).
    Asked every ``_CANCEL_TICK`` while the child runs, so it must answer cheaply."""

    def is_set(self) -> bool: ...


@dataclass(frozen=True)
class _Bounds:
    """When one job's child is killed and how many answer bytes are read from it."""

    deadline: float
    cap: int
    #: True when ``deadline`` is the caller's, earlier than the wall-clock limit.
    callers: bool
    #: True when the job's kind answers parts of a document (text), not a document.
    parts: bool
    #: Set by the caller to withdraw the job; its child is killed within ``_CANCEL_TICK``.
    withdrawn: Withdrawal | None = None


@dataclass(frozen=True)
class ExtractionResult:
    """A child's answer: ``text`` as a model reads it (the ``document`` rendered, for a kind
    that answers one; the parts' JSON for a kind that answers parts of one)."""

    text: str
    pages: int | None  # None when the extractor does not report a page count
    document: Document | None = None


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


def root_requirement() -> frozenset[str]:
    """What running as root adds to any requirement: a job must never parse as root."""
    return frozenset({UID_DROP}) if os.geteuid() == 0 else frozenset()


@dataclass(frozen=True)
class _Exchange:
    """What the job's pipe conversation produced (before anything is trusted)."""

    untrusted_body: bytes | None = None
    received: int = 0  # bytes of an unfinished frame when the pipe closed
    timed_out: bool = False
    withdrawn: bool = False


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


class _Frames:
    """Splits what the child writes into frames, never reading past the output budget.

    Length prefixes count against the budget like bodies: a flood of tiny frames is mostly
    prefixes. Bytes are read in large chunks and split here, so a frame costs a slice and a
    match rather than a poll and two reads.
    """

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._untrusted_bytes = bytearray()
        self._start = 0  # where the first unfinished frame begins in the buffer
        self._finished = 0  # bytes of complete frames, prefixes included

    def room(self) -> int:
        """How many more bytes may be read from the child."""
        return self._cap - self._finished - (len(self._untrusted_bytes) - self._start)

    def add(self, chunk: bytes) -> None:
        del self._untrusted_bytes[: self._start]
        self._start = 0
        self._untrusted_bytes += chunk

    def unfinished(self) -> int:
        return len(self._untrusted_bytes) - self._start

    def next_body(self) -> bytes | None:
        """The next complete frame's body, or None until more bytes arrive.

        Raises ``OutputTooLarge`` as soon as a length prefix announces more than the budget has
        left, or the budget is spent with no frame complete.
        """
        header = protocol.LENGTH.size
        if self.unfinished() < header:
            if self.room() == 0:
                raise OutputTooLarge(
                    f"the parser's frames filled the {self._cap}-byte output limit "
                    "without an answer"
                )
            return None
        (untrusted_length,) = protocol.LENGTH.unpack_from(self._untrusted_bytes, self._start)
        if self._finished + header + untrusted_length > self._cap:
            earlier = f" after {self._finished} bytes of progress" if self._finished else ""
            raise OutputTooLarge(
                f"the parser's answer announced {untrusted_length} bytes{earlier}; "
                f"the output limit is {self._cap} bytes, length prefixes included"
            )
        end = self._start + header + untrusted_length
        if len(self._untrusted_bytes) < end:
            return None
        untrusted_body = bytes(self._untrusted_bytes[self._start + header : end])
        self._finished += end - self._start
        self._start = end
        return untrusted_body


def _exchange(
    child: WarmChild,
    job: list[bytes],
    bounds: _Bounds,
    on_progress: ProgressCallback | None,
) -> _Exchange:
    """Send the job while reading the answer, until a full answer, EOF, the cap or the deadline.

    Progress frames ahead of the answer are validated and pass through a ``ProgressGate`` to
    ``on_progress``; the progress it held back is delivered when the answer arrives. At most
    ``cap`` bytes of frames, length prefixes included, are ever read.
    """
    os.set_blocking(child.job_fd, False)
    pending = deque(memoryview(part) for part in job if part)
    poller = select.poll()
    poller.register(child.job_fd, select.POLLOUT)
    poller.register(child.answer_fd, select.POLLIN)
    job_open = True
    frames = _Frames(bounds.cap)
    gate = None if on_progress is None else ProgressGate(on_progress)
    withdrawn = bounds.withdrawn
    try:
        while True:
            if withdrawn is not None and withdrawn.is_set():
                return _Exchange(withdrawn=True)
            remaining = bounds.deadline - time.monotonic()
            if remaining <= 0:
                return _Exchange(timed_out=True)
            wait = remaining if withdrawn is None else min(remaining, _CANCEL_TICK)
            for fd, events in poller.poll(math.ceil(wait * 1000)):
                if fd == child.job_fd:
                    if _feed(fd, pending) or events & (select.POLLERR | select.POLLHUP):
                        poller.unregister(fd)
                        os.close(fd)  # EOF tells the child the job is complete
                        job_open = False
                    continue
                chunk = os.read(fd, min(frames.room(), _CHUNK_BYTES))
                if not chunk:
                    return _Exchange(received=frames.unfinished())
                frames.add(chunk)
                while (untrusted_body := frames.next_body()) is not None:
                    progress = protocol.decode_progress(untrusted_body)
                    if progress is None:
                        if gate is not None:
                            gate.flush()
                        return _Exchange(untrusted_body)
                    if gate is not None:
                        gate.offer(progress)
    finally:
        if job_open:
            os.close(child.job_fd)


_RUNNERS: weakref.WeakSet[SandboxRunner] = weakref.WeakSet()


class SandboxRunner:
    """Jobs in isolated children of one fork server that imported ``modules`` once.

    ``require`` names mechanisms without which the runner refuses to run anything (a
    deployment's ``AIRLOCK_SANDBOX_REQUIRE``, read by ``worker/config.py``); as root,
    ``uid_drop`` is always required, because a job must never parse as root. Each child runs as
    ``uid_base`` plus its pid when the uid drop holds. ``skip`` turns mechanisms off on purpose,
    so a test can show that each remaining layer holds on its own; naming one in both is an
    error. ``seccomp_log`` makes the filter log instead of kill, for deriving the allow list only.
    """

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),  # noqa: B008 - frozen value
        *,
        warm_children: int = 2,
        modules: tuple[str, ...] = DEFAULT_MODULES,
        require: frozenset[str] = frozenset(),
        uid_base: int = DEFAULT_UID_BASE,
        skip: frozenset[str] = frozenset(),
        seccomp_log: bool = False,
    ) -> None:
        if warm_children < 0:
            raise ValueError("warm_children must be zero or more")
        self.limits = limits
        self._warm_children = warm_children
        self._modules = tuple(modules)
        self._require = mechanism_names(",".join(require), "require")
        self._skip = mechanism_names(",".join(skip), "skip")
        if self._require & self._skip:
            both = sorted(self._require & self._skip)
            raise ValueError(f"mechanisms both required and skipped: {both}")
        # As root, a child whose uid drop failed would parse as root: it never gets a job
        # (the fork server still starts, so the doctor can report what the host lacks).
        self._job_require = self._require | root_requirement()
        if self._job_require & self._skip:
            raise ValueError("uid_drop cannot be skipped when running as root")
        self._seccomp_log = seccomp_log
        self._uid_base = uid_base
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
                self.limits,
                self._modules,
                self._uid_base,
                self._skip,
                _START_SECONDS,
                seccomp_log=self._seccomp_log,
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
    def fork_server_pid(self) -> int:
        """The fork server's pid (starting it if need be), for operators' and tests' tracing."""
        return self._fork_server().zygote_pid

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
        *,
        output_bytes: int | None = None,
        deadline: float | None = None,
        withdrawn: Withdrawal | None = None,
    ) -> ExtractionResult:
        """Run one job in a fresh jailed child; ``on_progress(done, total)`` hears its pages
        (at most once a second and always further along: see ``sandbox.progress``).

        ``output_bytes`` raises the answer cap for a job whose answer is known to be larger
        (a PDF split into pages); ``deadline`` (a :func:`time.monotonic` value) is the caller's,
        and a child still running then is killed: nobody would read its answer. So is one
        still running when ``withdrawn`` is set (``Withdrawn``).

        A job whose fork server dies under it (while it takes a child, or while the child
        runs and before the child's answer or exit notice arrived) never got a verdict on its
        document: it runs once more, from its first page, on a fresh fork server, within what
        is left of the same wall clock (a retry must not double the time a caller waits).
        Only once: a second death is an infrastructure failure to report. A job whose child
        answered, or whose exit the fork server reported, has its verdict and is never rerun.
        """
        header = protocol.JobHeader(kind, media_type, parse_limits)
        job = [protocol.encode_job_header(header), protocol.LENGTH.pack(len(payload)), payload]
        server = self._fork_server()
        wall = time.monotonic() + self.limits.wall_seconds
        bounds = _Bounds(
            min(wall, deadline) if deadline is not None else wall,
            max(self.limits.output_bytes, output_bytes or 0),
            deadline is not None and deadline < wall,
            kind in pages.PARTS_KINDS,
            withdrawn,
        )
        try:
            return self._run_on(server, job, bounds, on_progress)
        except SandboxUnavailable:
            if server.alive:
                raise  # a child that could not jail, a missing layer: a retry would meet it too
        return self._run_on(self._fork_server(), job, bounds, on_progress)

    def _run_on(
        self,
        server: ForkServer,
        job: list[bytes],
        bounds: _Bounds,
        on_progress: ProgressCallback | None,
    ) -> ExtractionResult:
        child = server.take(_CHILD_READY_SECONDS)
        try:
            missing = self._job_require - child.mechanisms
            if missing:
                os.close(child.job_fd)
                child.kill()
                raise SandboxUnavailable(
                    f"a sandbox child came up without {', '.join(sorted(missing))}, "
                    "which this host requires"
                )
            try:
                exchange = _exchange(child, job, bounds, on_progress)
            except BaseException:
                child.kill()
                raise
            return self._conclude(server, child, exchange, bounds)
        finally:
            os.close(child.answer_fd)
            os.close(child.pidfd)
            server.forget(child.pid)

    def _conclude(
        self, server: ForkServer, child: WarmChild, exchange: _Exchange, bounds: _Bounds
    ) -> ExtractionResult:
        limits = self.limits
        if exchange.untrusted_body is not None:
            child.kill()  # single use: nothing it does after answering may matter
            answer = protocol.decode_answer(exchange.untrusted_body, parts=bounds.parts)
            if isinstance(answer, protocol.DocumentAnswer):
                return ExtractionResult(render(answer.document), answer.pages, answer.document)
            if isinstance(answer, protocol.TextAnswer):
                return ExtractionResult(answer.text, answer.pages)
            raise verdict.from_error_answer(answer, limits)
        if exchange.withdrawn:
            child.kill()
            raise Withdrawn("the caller withdrew the job while it ran, and it was killed")
        notice = None if exchange.timed_out else server.wait_exit(child.pid, bounds.deadline)
        if notice is None:
            child.kill()
            if bounds.callers:
                raise WallClockExceeded(
                    "the caller's deadline passed while the parser ran, and it was killed"
                )
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
