"""The runner's handle on one zygote process: start it, take warm children, learn how they died.

See docs/sandbox.md, "Shape" and "Notes by module".
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass

from sandbox import policy, temp_dirs
from sandbox.errors import SandboxUnavailable
from sandbox.jail import remove_tree
from sandbox.limits import SandboxLimits
from sandbox.zygote import ZygoteConfig

_STOP_SECONDS = 10.0
_MESSAGE_BYTES = 4096


@dataclass(frozen=True)
class WarmChild:
    """A jailed child waiting for its one job. The job that takes it owns (and closes) its fds."""

    pid: int
    mechanisms: frozenset[str]
    job_fd: int
    answer_fd: int
    pidfd: int

    def kill(self) -> None:
        """SIGKILL through the pidfd: cannot hit an unrelated process that reused the pid.

        The zygote then kills the rest of the child's process group when it reaps the child.
        """
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)


@dataclass(frozen=True)
class ExitNotice:
    """How a child died, as its parent (the zygote) saw it in ``wait4``."""

    pid: int
    status: int
    cpu_seconds: float
    max_rss_bytes: int
    job_peak_bytes: int = 0  # the most the job's processes held together
    job_peak_tasks: int = 0
    job_limit: str | None = None  # "memory", "cpu" or "processes" when the job broke one


@dataclass(frozen=True)
class _Hello:
    pid: int
    mechanisms: frozenset[str]


def _zygote_env() -> dict[str, str]:
    """A minimal environment: the zygote's children can read their own memory, environment
    included, so the worker's secrets (broker passwords, cloud keys) must never be in it."""
    search_path = [entry or os.getcwd() for entry in sys.path if os.path.isdir(entry or ".")]
    env = {
        "PATH": os.environ.get("PATH", policy.SEARCH_PATH),
        "PYTHONPATH": os.pathsep.join(search_path),
        "LANG": policy.LANG,
        **policy.THREAD_ENV,
    }
    tessdata = policy.tessdata_dir()
    if tessdata:
        env["TESSDATA_PREFIX"] = tessdata
    return env


def _close_child(child: WarmChild) -> None:
    for fd in (child.job_fd, child.answer_fd, child.pidfd):
        with contextlib.suppress(OSError):
            os.close(fd)


_LIVE: weakref.WeakSet[ForkServer] = weakref.WeakSet()


def _make_scratch_root() -> str:
    """One directory per fork server; each child gets a 0700 subdirectory owned by its uid.

    0711 on the root lets a child's uid reach its own subdirectory without listing its
    siblings'. Named after this process, so a root a killed process left is reclaimed by the
    next one (``sandbox.temp_dirs``).
    """
    return temp_dirs.claim("airlock-sandbox-", 0o711)


class ForkServer:
    def __init__(
        self,
        limits: SandboxLimits,
        modules: tuple[str, ...],
        uid_base: int,
        skip: frozenset[str],
        start_timeout: float,
        *,
        seccomp_log: bool = False,
    ) -> None:
        self._changed = threading.Condition()
        self._ready: deque[WarmChild] = deque()
        self._exits: dict[int, ExitNotice] = {}
        self._running: set[int] = set()
        self._owed: set[int] = set()  # jobs whose replacement child is asked for when they end
        self._failures = 0
        self._failure_reason = ""
        self._dead = False
        self._send_lock = threading.Lock()
        self._owner_pid = os.getpid()
        try:
            self._scratch_root = _make_scratch_root()
        except OSError as exc:  # a full or read-only temp dir: the host, not the document
            raise SandboxUnavailable(f"no scratch directory for the sandbox: {exc}") from exc
        config = ZygoteConfig(limits, modules, self._scratch_root, uid_base, skip, seccomp_log)
        # Python makes both ends close-on-exec; only the zygote's end is passed on, explicitly.
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._process: subprocess.Popen[bytes] | None = None
        try:
            self._process = subprocess.Popen(
                # -P: the working directory is not an import path (a stray sandbox.py there must not
                # shadow ours).
                [
                    sys.executable,
                    "-P",
                    "-m",
                    "sandbox.zygote",
                    str(theirs.fileno()),
                    config.to_json(),
                ],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=_zygote_env(),
                cwd="/",
                start_new_session=True,  # a terminal's Ctrl-C must not kill it before the worker
            )
        except OSError as exc:
            self.close()
            raise SandboxUnavailable(
                f"the sandbox fork server could not be started: {exc}"
            ) from exc
        finally:
            theirs.close()
        try:
            hello = self._receive_hello(start_timeout)
        except BaseException:
            self.close()
            raise
        self.zygote_pid = hello.pid
        self.mechanisms = hello.mechanisms
        self._thread = threading.Thread(target=self._dispatch, name="airlock-zygote", daemon=True)
        self._thread.start()
        _LIVE.add(self)

    def _receive_hello(self, timeout: float) -> _Hello:
        readable, _, _ = select.select([self._sock], [], [], timeout)
        if not readable:
            raise SandboxUnavailable(f"the sandbox fork server did not start within {timeout:g}s")
        data = self._sock.recv(_MESSAGE_BYTES)
        if not data:
            assert self._process is not None
            status = self._process.wait(_STOP_SECONDS)
            raise SandboxUnavailable(
                f"the sandbox fork server exited at start-up (status {status})"
            )
        message = json.loads(data)
        if message.get("event") == "error":
            raise SandboxUnavailable(
                f"the sandbox fork server could not start: {message['reason']}"
            )
        pid, mechanisms = message.get("pid"), message.get("mechanisms")
        if (
            message.get("event") != "hello"
            or not isinstance(pid, int)
            or not isinstance(mechanisms, list)
        ):
            raise SandboxUnavailable("the sandbox fork server did not greet as expected")
        return _Hello(pid, frozenset(str(name) for name in mechanisms))

    @property
    def alive(self) -> bool:
        return not self._dead and self._owner_pid == os.getpid()

    def _dispatch(self) -> None:
        """File every message until the zygote's end closes; then wake every waiting job."""
        try:
            while True:
                data, fds, _, _ = socket.recv_fds(self._sock, _MESSAGE_BYTES, 3)
                if not data:
                    break
                self._file(json.loads(data), fds)
        except OSError:
            pass  # the socket was shut down by close(), or the zygote died
        finally:
            self._die()

    def _die(self) -> None:
        """Mark the server dead (the runner starts another) and wake every job waiting on it."""
        with self._changed:
            self._dead = True
            while self._ready:
                _close_child(self._ready.popleft())
            self._changed.notify_all()

    def _file(self, message: dict[str, object], fds: list[int]) -> None:
        event, pid = message["event"], message["pid"]
        assert isinstance(pid, int)
        with self._changed:
            if event == "ready" and len(fds) == 3:
                mechanisms = message["mechanisms"]
                assert isinstance(mechanisms, list)
                self._ready.append(WarmChild(pid, frozenset(mechanisms), *fds))
            elif event == "exited":
                status, cpu = message["status"], message["cpu_seconds"]
                rss, peak = message["max_rss_bytes"], message["job_peak_bytes"]
                tasks, broke = message["job_peak_tasks"], message["job_limit"]
                assert isinstance(status, int) and isinstance(cpu, float) and isinstance(rss, int)
                assert isinstance(peak, int) and isinstance(tasks, int)
                assert broke is None or isinstance(broke, str)
                if pid in self._running:
                    self._exits[pid] = ExitNotice(pid, status, cpu, rss, peak, tasks, broke)
                else:
                    self._discard_idle(pid)
            else:
                for fd in fds:
                    os.close(fd)
                self._failures += 1
                self._failure_reason = (
                    f"a child could not be forked or jailed (status {message.get('status')})"
                )
            self._changed.notify_all()

    def _discard_idle(self, pid: int) -> None:
        """A warm child died before any job took it (killed by an operator, say): drop it."""
        for child in tuple(self._ready):
            if child.pid == pid:
                self._ready.remove(child)
                _close_child(child)

    def _send_want(self) -> None:
        with self._send_lock:
            try:
                self._sock.send(b'{"op": "want"}')
            except OSError as exc:
                # The zygote's end is closed: dead now, not once the dispatcher notices, so the
                # job that found out is retried on a fresh fork server.
                self._die()
                raise SandboxUnavailable(f"the sandbox fork server died: {exc}") from exc

    def prefill(self, count: int) -> None:
        for _ in range(count):
            self._send_want()

    def take(self, timeout: float) -> WarmChild:
        """Take a ready child, and see that a replacement is forked.

        While another warm child remains, the replacement is asked for only when the job ends
        (``forget``): a fork copies the page tables of the whole fork server, and running one
        beside the job it was taken for made a small job 3x slower on two cores (2.3 ms vs
        0.7 ms). Taking the last one, or finding none, asks at once, so a burst of jobs keeps
        the server forking.
        """
        with self._changed:
            if self._dead:
                raise SandboxUnavailable("the sandbox fork server died")
            if len(self._ready) >= 2:
                child = self._ready.popleft()
                self._running.add(child.pid)
                self._owed.add(child.pid)
                return child
            failures = self._failures
        self._send_want()
        deadline = time.monotonic() + timeout
        with self._changed:
            while not self._ready:
                if self._dead:
                    raise SandboxUnavailable("the sandbox fork server died")
                if self._failures != failures:
                    raise SandboxUnavailable(f"no sandbox child: {self._failure_reason}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SandboxUnavailable(f"no sandbox child became ready within {timeout:g}s")
                self._changed.wait(remaining)
            child = self._ready.popleft()
            self._running.add(child.pid)
            return child

    def wait_exit(self, pid: int, deadline: float) -> ExitNotice | None:
        """The child's exit notice, or None if it is still running at ``deadline``."""
        with self._changed:
            while pid not in self._exits:
                if self._dead:
                    raise SandboxUnavailable("the sandbox fork server died while a job ran")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(remaining)
            return self._exits[pid]

    def forget(self, pid: int) -> None:
        """The job on ``pid`` is over: drop its bookkeeping, and ask for its replacement if owed."""
        with self._changed:
            self._running.discard(pid)
            self._exits.pop(pid, None)
            owed = pid in self._owed
            self._owed.discard(pid)
        if owed:
            # A dead fork server is the next job's problem (it restarts one), not this one's.
            with contextlib.suppress(SandboxUnavailable):
                self._send_want()

    def close(self) -> None:
        """End the zygote and remove the scratch root. Never raises.

        Closing our end is the zygote's signal to kill every child and exit. ``close`` also
        runs on a server found dead (its processes may be gone already, its scratch tree
        whatever a parser left there) before the runner starts the next: an exception here
        would fail that job and every one after it.
        """
        if self._owner_pid != os.getpid():
            return
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # also wakes the dispatcher's recv
        thread = getattr(self, "_thread", None)
        if thread is not None:
            thread.join(_STOP_SECONDS)
        self._sock.close()
        if self._process is not None:
            try:
                self._process.wait(_STOP_SECONDS)
            except subprocess.TimeoutExpired:
                self._process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._process.wait(_STOP_SECONDS)
        self._die()
        remove_tree(self._scratch_root)

    def abandon_after_fork(self) -> None:
        """In a forked copy of the worker: drop the inherited descriptors without touching the
        zygote, which belongs to the original process (and must still see *its* EOF)."""
        self._dead = True
        self._changed = threading.Condition()  # another thread may have held the old one
        self._sock.close()
        while self._ready:
            _close_child(self._ready.popleft())


def _after_fork_in_child() -> None:
    for server in tuple(_LIVE):
        server.abandon_after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
