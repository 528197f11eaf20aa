"""The fork server: imports the parsers once, then forks pre-jailed single-use children.

See docs/sandbox.md, "Shape" and "Notes by module".
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import importlib
import json
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field, fields
from typing import Any

from sandbox import budget, child, jail, prefault, protocol, seccomp
from sandbox.limits import SandboxLimits

_PR_SET_CHILD_SUBREAPER = 36
_LIBC = ctypes.CDLL(None)
_PIPE_BYTES = 1 << 20
_SHUTDOWN_GRACE_SECONDS = 5.0
_RETRY_SCRATCH_SECONDS = 1.0
# How often the job totals are sampled: a process's own rlimits hold between two samples.
_WATCH_SECONDS = 0.05


@dataclass(frozen=True)
class ZygoteConfig:
    """Everything the runner decides for its fork server, as plain data on the command line."""

    limits: SandboxLimits
    modules: tuple[str, ...]
    scratch_root: str
    uid_base: int
    skip: frozenset[str]
    seccomp_log: bool = False

    def to_json(self) -> str:
        return json.dumps(
            {
                "limits": {f.name: getattr(self.limits, f.name) for f in fields(SandboxLimits)},
                "modules": list(self.modules),
                "scratch_root": self.scratch_root,
                "uid_base": self.uid_base,
                "skip": sorted(self.skip),
                "seccomp_log": self.seccomp_log,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> ZygoteConfig:
        value = json.loads(text)
        return cls(
            SandboxLimits(**value["limits"]),
            tuple(value["modules"]),
            value["scratch_root"],
            int(value["uid_base"]),
            frozenset(value["skip"]),
            bool(value["seccomp_log"]),
        )


def _send(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    data = json.dumps(message).encode()
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def _import_parsers(modules: tuple[str, ...]) -> list[tuple[str, bytes]]:
    """Import every parser module and warm it up before the first fork; the sample documents
    the modules offer for a rehearsal of a job.

    After the uid drop a child cannot read the interpreter's files, so a lazy import (a codec,
    an image plugin) would fail in the child; warming here makes it a shared, read-only page.
    """
    offered: list[tuple[str, bytes]] = []
    for name in modules:
        module = importlib.import_module(name)
        warm_up = getattr(module, "warm_up", None)
        if callable(warm_up):
            warm_up()
        samples = getattr(module, "samples", None)
        if callable(samples):
            offered.extend(samples())
    return offered


@dataclass
class _Job:
    """The job-wide peaks of one handed-over child, the job limit it broke, if any, and the
    process guard's listener with what it admitted lately."""

    listener: int | None
    peak_tasks: int = 0
    peak_resident_bytes: int = 0
    cpu_seconds: float = 0.0
    # CPU of the job's processes the fork server adopted and reaped: wait4 charged it to us.
    reaped_cpu_seconds: float = 0.0
    broke: str | None = None
    admissions: budget.Admissions = field(default_factory=budget.Admissions)


@dataclass
class _Pending:
    """A child forked but not yet ready: the zygote still holds its parent-side pipe ends and
    its end of the channel the process guard's listener comes through."""

    job_w: int
    answer_r: int
    guard: socket.socket | None
    received: bytes = b""
    watching: bool = True


@dataclass(frozen=True)
class _Listener:
    """Selector data: the process guard's listener of the job whose leader is ``pid``."""

    pid: int


class Zygote:
    def __init__(
        self, sock: socket.socket, plan: jail.JailPlan, copy_ahead: prefault.Ranges
    ) -> None:
        self.sock = sock
        self.plan = plan
        self.copy_ahead = copy_ahead
        self.pid = os.getpid()
        self.selector = selectors.DefaultSelector()
        self.pending: dict[int, _Pending] = {}
        self.handed_over: dict[int, _Job] = {}
        self.next_watch = 0.0
        self.unremoved_scratch: set[int] = set()
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wake_r = wake_r
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.selector.register(sock, selectors.EVENT_READ, "runner")
        self.selector.register(wake_r, selectors.EVENT_READ, "sigchld")

    def fork_child(self) -> int:
        job_r, job_w = os.pipe2(os.O_CLOEXEC)
        answer_r, answer_w = os.pipe2(os.O_CLOEXEC)
        for fd in (job_w, answer_w):
            with contextlib.suppress(OSError):  # over the per-user pipe budget: small pipes
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        guard, guard_theirs = _guard_channel(self.plan)
        pid = os.fork()
        if pid == 0:
            try:
                mechanisms = jail.jail(self.plan, self.pid, job_r, answer_w, guard_theirs)
            except BaseException:  # noqa: BLE001 - a child that cannot jail must not run a job
                os._exit(70)
            child.serve(mechanisms, self.copy_ahead)
        os.close(job_r)
        os.close(answer_w)
        if guard_theirs >= 0:
            os.close(guard_theirs)
        self.pending[pid] = _Pending(job_w, answer_r, guard)
        self.selector.register(answer_r, selectors.EVENT_READ, pid)
        return pid

    def on_ready(self, pid: int) -> None:
        entry = self.pending[pid]
        chunk = os.read(entry.answer_r, 4096)
        if not chunk:
            # Died while jailing: stop watching the pipe; the reaper reports the failure.
            self.selector.unregister(entry.answer_r)
            entry.watching = False
            return
        entry.received += chunk
        if len(entry.received) < protocol.LENGTH.size:
            return
        (length,) = protocol.LENGTH.unpack_from(entry.received)
        if len(entry.received) < protocol.LENGTH.size + length:
            return  # a jailed child writes its ready frame in one go; wait for the rest
        ready = protocol.decode_ready(entry.received[protocol.LENGTH.size :])
        self.selector.unregister(entry.answer_r)
        entry.watching = False
        listener = _receive_listener(entry.guard)
        entry.guard = None
        if (listener is not None) != (jail.PROCESS_GUARD in ready.mechanisms):
            # Jailed with a guard nobody holds (every clone would fail) or one we never got:
            # the child is not the one we meant to run a job in. The reaper reports it failed.
            if listener is not None:
                os.close(listener)
            os.kill(pid, signal.SIGKILL)
            return
        del self.pending[pid]
        pidfd = os.pidfd_open(pid)
        try:
            _send(
                self.sock,
                {"event": "ready", "pid": pid, "mechanisms": sorted(ready.mechanisms)},
                (entry.job_w, entry.answer_r, pidfd),
            )
        finally:
            for fd in (entry.job_w, entry.answer_r, pidfd):
                os.close(fd)
        self.handed_over[pid] = _Job(listener)
        if listener is not None:
            self.selector.register(listener, selectors.EVENT_READ, _Listener(pid))

    def on_task_request(self, pid: int) -> None:
        """Let a job start one more process or thread only while it stays within its budget.

        The count is taken now, over every process of the job however it is parented, plus
        what was admitted too recently to show (``budget.Admissions``). A job asking past its
        budget is refused the task and killed whole: the refusal is what keeps the pids a
        container shares out of its reach, the kill is its typed outcome.
        """
        job = self.handed_over.get(pid)
        if job is None or job.listener is None:
            return  # the job ended earlier in this round of events
        request = seccomp.next_request(job.listener)
        if request is None:
            return
        tids = self.census()[0].get(pid, budget.Usage()).tids
        wanted = job.admissions.admit(time.monotonic(), tids, self.plan.limits.processes)
        admit = job.broke is None and wanted <= self.plan.limits.processes
        if not admit and job.broke is None:
            # Killed before the refusal is answered, so no task of the job runs again to
            # take the EAGAIN for an answer of its own.
            job.peak_tasks = max(job.peak_tasks, wanted)
            self.break_job(pid, job, "processes")
        seccomp.answer(job.listener, request, admit)

    def reap(self) -> None:
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            pid = info.si_pid
            ours = pid in self.pending or pid in self.handed_over
            if ours:
                # Kill the rest of the job's process group while the dead leader still holds
                # the group id, so the id cannot have been reused by an unrelated process.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
            # A process we adopted from a running job is in that job's group (as a zombie too).
            group = None if ours else budget.process_group(pid)
            adopted_from = self.handed_over.get(group) if group is not None else None
            _, status, usage = os.wait4(pid, 0)
            if ours:
                self.finish(pid, status, usage)
            elif adopted_from is not None:
                adopted_from.reaped_cpu_seconds += usage.ru_utime + usage.ru_stime

    def finish(self, pid: int, status: int, usage: Any) -> None:
        self.remove_scratch(pid)
        if pid in self.pending:
            entry = self.pending.pop(pid)
            if entry.watching:
                self.selector.unregister(entry.answer_r)
            if entry.guard is not None:
                entry.guard.close()
            os.close(entry.job_w)
            os.close(entry.answer_r)
            _send(self.sock, {"event": "failed", "pid": pid, "status": status})
            return
        job = self.handed_over.pop(pid)
        if job.listener is not None:
            self.selector.unregister(job.listener)
            os.close(job.listener)
        self.kill_strays()
        _send(
            self.sock,
            {
                "event": "exited",
                "pid": pid,
                "status": status,
                # wait4 counts the child and every descendant it waited for; the samples
                # also saw those it did not live to wait for.
                "cpu_seconds": max(
                    usage.ru_utime + usage.ru_stime + job.reaped_cpu_seconds, job.cpu_seconds
                ),
                "max_rss_bytes": usage.ru_maxrss * 1024,
                "job_peak_bytes": max(job.peak_resident_bytes, usage.ru_maxrss * 1024),
                "job_peak_tasks": job.peak_tasks,
                "job_limit": job.broke,
            },
        )

    def census(self) -> tuple[dict[int, budget.Usage], tuple[int, ...]]:
        return budget.census(self.pid, self.handed_over, self.pending)

    def watch_jobs(self) -> None:
        """Hold every running job to its memory, CPU and task budget as a whole, and kill
        every process beneath us that belongs to no job.

        A job over a budget loses its whole process group at once; the limit it broke goes
        out with its exit notice, so the runner can say which one.
        """
        now = time.monotonic()
        if now < self.next_watch:
            return  # a busy loop (many jobs a second) must not sample at every event
        self.next_watch = now + _WATCH_SECONDS
        limits = self.plan.limits
        jobs, strays = self.census()
        _kill_each(strays)
        for pid, usage in jobs.items():
            job = self.handed_over[pid]
            if job.broke is not None:
                continue
            job.admissions.look(now, usage.tids)
            cpu_seconds = usage.cpu_seconds + job.reaped_cpu_seconds
            job.peak_tasks = max(job.peak_tasks, usage.tasks)
            job.peak_resident_bytes = max(job.peak_resident_bytes, usage.resident_bytes)
            job.cpu_seconds = max(job.cpu_seconds, cpu_seconds)
            if usage.resident_bytes > limits.memory_bytes:
                self.break_job(pid, job, "memory")
            elif cpu_seconds > limits.cpu_seconds:
                self.break_job(pid, job, "cpu")
            elif usage.tasks > limits.processes:
                self.break_job(pid, job, "processes")

    @staticmethod
    def break_job(pid: int, job: _Job, limit: str) -> None:
        job.broke = limit
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)

    def kill_strays(self) -> None:
        """Kill what we adopted that belongs to no running job (see ``budget.census``).

        Only a process that left its job's group can be one while its job runs, which the
        seccomp filter forbids; this catches it on hosts where seccomp is unavailable.
        """
        _kill_each(self.census()[1])

    def remove_scratch(self, pid: int) -> None:
        if jail.remove_scratch(self.plan, pid):
            self.unremoved_scratch.discard(pid)
        else:
            self.unremoved_scratch.add(pid)  # a dying group member was still writing; retry

    def on_runner_message(self) -> bool:
        data = self.sock.recv(4096)
        if not data:
            return False
        message = json.loads(data)
        if message.get("op") == "want":
            try:
                self.fork_child()
            except OSError as exc:  # out of processes or memory: the job must hear of it
                _send(self.sock, {"event": "failed", "pid": 0, "status": f"fork failed: {exc}"})
        return True

    def serve(self) -> None:
        """Run until the runner's end closes (or a message to it can no longer be sent)."""
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._loop()

    def _loop(self) -> None:
        while True:
            timeout = _RETRY_SCRATCH_SECONDS if self.unremoved_scratch else None
            if self.handed_over:
                timeout = _WATCH_SECONDS
            for key, _ in self.selector.select(timeout):
                if key.data == "runner":
                    if not self.on_runner_message():
                        return
                elif key.data == "sigchld":
                    with contextlib.suppress(BlockingIOError):
                        while os.read(self.wake_r, 4096):
                            pass
                    self.reap()
                elif isinstance(key.data, _Listener):
                    self.on_task_request(key.data.pid)
                elif key.data in self.pending:
                    self.on_ready(key.data)
            for pid in tuple(self.unremoved_scratch):
                self.remove_scratch(pid)
            self.watch_jobs()

    def shutdown(self) -> None:
        """Kill every job and everything they started, reap them, and remove their scratch.

        Tolerates processes that are already gone: a shutdown that stopped at the first
        ProcessLookupError left two jobs' grandchildren running with ppid 1.
        """
        for pid in (*self.pending, *self.handed_over):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            # A child forked a moment ago may not have made its own group yet; as our
            # unreaped child its pid cannot have been reused.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + _SHUTDOWN_GRACE_SECONDS
        while time.monotonic() < deadline:
            _kill_each(budget.census(self.pid, (), ())[1])  # everything beneath us
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.01)
            else:
                jail.remove_scratch(self.plan, pid)
        for pid in (*self.pending, *self.handed_over, *self.unremoved_scratch):
            jail.remove_scratch(self.plan, pid)
        # The runner removes the root too, but it may be the one that died.
        with contextlib.suppress(OSError):
            os.rmdir(self.plan.scratch_root)


def _kill_each(pids: tuple[int, ...]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _guard_channel(plan: jail.JailPlan) -> tuple[socket.socket | None, int]:
    """Our end and the child's descriptor of the channel its guard's listener comes back by
    (none, -1: the guard is skipped)."""
    if plan.guard_program is None:
        return None, -1
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    return ours, theirs.detach()


def _receive_listener(guard: socket.socket | None) -> int | None:
    """The listener a ready child sent before it said it was ready, if it sent one."""
    if guard is None:
        return None
    with guard:
        guard.setblocking(False)
        try:
            _, fds, _, _ = socket.recv_fds(guard, 16, 1)
        except BlockingIOError:
            return None
    return fds[0] if fds else None


def _probe_mechanisms(plan: jail.JailPlan) -> frozenset[str]:
    """Jail one throwaway child to learn which layers this host really grants."""
    read_end, write_end = os.pipe()
    job_r, job_w = os.pipe()
    guard, guard_theirs = _guard_channel(plan)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            mechanisms = jail.jail(plan, parent, job_r, write_end, guard_theirs)
            os.write(jail.ANSWER_FD, protocol.encode_ready(mechanisms))
        finally:
            os._exit(0)
    os.close(write_end)
    os.close(job_r)
    if guard_theirs >= 0:
        os.close(guard_theirs)
    data = b""
    while chunk := os.read(read_end, 4096):
        data += chunk
    os.close(read_end)
    os.close(job_w)
    listener = _receive_listener(guard)
    if listener is not None:
        os.close(listener)
    os.waitpid(pid, 0)
    jail.remove_scratch(plan, pid)
    if len(data) < protocol.LENGTH.size:
        raise RuntimeError("the probe child could not jail itself")
    return protocol.decode_ready(data[protocol.LENGTH.size :]).mechanisms


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[1]))
    # Ctrl-C in a terminal belongs to the worker; the zygote ends when the worker's socket does.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        config = ZygoteConfig.from_json(argv[2])
        # Orphaned grandchildren come to us, not to init, so they are reaped and killed here.
        _LIBC.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        samples = _import_parsers(config.modules)
        plan = jail.plan(
            config.limits, config.scratch_root, config.uid_base, config.skip, config.seccomp_log
        )
        mechanisms = _probe_mechanisms(plan)
    except Exception as exc:  # noqa: BLE001 - reported to the runner as SandboxUnavailable
        traceback.print_exc()
        _send(sock, {"event": "error", "reason": f"{type(exc).__name__}: {exc}"})
        return 1
    # Every fork copies the page tables of our resident memory and every exit tears them down:
    # hand the memory warm-up freed back to the kernel (about a quarter of the heap), and keep
    # the collector from touching (and so copying) the parsers' objects in every child.
    gc.collect()
    _LIBC.malloc_trim(0)
    gc.freeze()
    # Learned last, once the memory every child starts from is laid out as it will stay.
    copy_ahead = prefault.learn(lambda: child.rehearse(samples)) if samples else ()
    zygote = Zygote(sock, plan, copy_ahead)
    _send(sock, {"event": "hello", "pid": zygote.pid, "mechanisms": sorted(mechanisms)})
    try:
        zygote.serve()
    finally:
        zygote.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
