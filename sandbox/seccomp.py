"""The system-call filters: the allow list of ``sandbox/policy.py`` compiled to BPF, default
kill, and the process guard, which hands every task-making call to the fork server.

*Kill*, not EPERM: an error can be swallowed by a parser's own ``except``. ``log`` mode is for
deriving the list, never for serving jobs. See docs/sandbox.md, "System calls" and "The job's
budget".
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import fcntl
import functools
import os
import re
import select
import struct
from dataclasses import dataclass

from sandbox import policy

_KILL_PROCESS = 0x80000000
_LOG = 0x7FFC0000
_ALLOW = 0x7FFF0000
_NOTIFY = 0x7FC00000
_ERRNO = 0x00050000
_ATTR_ACT_BADARCH = 2
_CMP_MASKED_EQ = 7
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_BPF_INSTRUCTION_BYTES = 8
# seccomp(2) with a listener: the filter's notifications go to the descriptor it returns.
_SET_MODE_FILTER = 1
_FILTER_FLAG_NEW_LISTENER = 1 << 3
# struct seccomp_notif (id, pid, flags, then struct seccomp_data) and seccomp_notif_resp (id,
# val, error, flags), and their ioctls: _IOWR('!', 0 and 1, the struct).
_NOTIFICATION = struct.Struct("<QII64x")
_RESPONSE = struct.Struct("<QqiI")
_NOTIF_RECV = 0xC0000000 | _NOTIFICATION.size << 16 | 0x2100
_NOTIF_SEND = 0xC0000000 | _RESPONSE.size << 16 | 0x2101
_USER_NOTIF_FLAG_CONTINUE = 1


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


_LIBC = ctypes.CDLL(None, use_errno=True)


@functools.cache
def _libseccomp() -> ctypes.CDLL | None:
    """libseccomp, loaded once: finding it runs ``ldconfig``, which no jailed child can."""
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = (ctypes.c_uint32,)
    lib.seccomp_release.argtypes = (ctypes.c_void_p,)
    lib.seccomp_attr_set.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32)
    lib.seccomp_syscall_resolve_name.argtypes = (ctypes.c_char_p,)
    lib.seccomp_rule_add_array.argtypes = (
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    )
    lib.seccomp_export_bpf.argtypes = (ctypes.c_void_p, ctypes.c_int)
    return lib


def _check(result: int, what: str) -> None:
    if result < 0:
        raise OSError(-result, f"libseccomp {what} failed: {os.strerror(-result)}")


def _add(lib: ctypes.CDLL, context: int, action: int, rule: policy.ArgRule | str) -> None:
    name = rule if isinstance(rule, str) else rule.syscall
    number = lib.seccomp_syscall_resolve_name(name.encode())
    if number < 0:
        return  # not a system call on this architecture
    checks = () if isinstance(rule, str) else rule.checks
    conditions = (_ArgCmp * max(len(checks), 1))(
        *(_ArgCmp(check.index, _CMP_MASKED_EQ, check.mask, check.value) for check in checks)
    )
    _check(lib.seccomp_rule_add_array(context, action, number, len(checks), conditions), name)


def _compile(default: int, rules: list[tuple[int, policy.ArgRule | str]]) -> bytes | None:
    """``rules`` (action, rule) as raw BPF, or None when libseccomp is not installed here.

    A call of another architecture's table (32-bit ``int 0x80``, x32) is killed in every
    filter: it would otherwise be a second table of calls no rule here names.
    """
    lib = _libseccomp()
    if lib is None:
        return None
    context = lib.seccomp_init(default)
    if not context:
        raise OSError("libseccomp could not allocate a filter")
    try:
        _check(lib.seccomp_attr_set(context, _ATTR_ACT_BADARCH, _KILL_PROCESS), "attr_set")
        for action, rule in rules:
            _add(lib, context, action, rule)
        memfd = os.memfd_create("airlock-seccomp", os.MFD_CLOEXEC)
        try:
            _check(lib.seccomp_export_bpf(context, memfd), "export_bpf")
            size = os.lseek(memfd, 0, os.SEEK_CUR)
            return os.pread(memfd, size, 0)
        finally:
            os.close(memfd)
    finally:
        lib.seccomp_release(context)


def compile_filter(log: bool = False) -> bytes | None:
    """The allow list as raw BPF, or None when libseccomp is not installed on this host."""
    rules: list[tuple[int, policy.ArgRule | str]] = [
        *((_ALLOW, name) for name in policy.ALLOWED_SYSCALLS),
        *((_ALLOW, rule) for rule in policy.ARGUMENT_RULES),
        *((_ERRNO | getattr(errno, error), rule) for rule, error in policy.ERRNO_RULES),
    ]
    return _compile(_LOG if log else _KILL_PROCESS, rules)


def _kernel_lets_a_call_continue() -> bool:
    """Whether the listener may answer "run the call as made" (Linux 5.5): without it a
    listener can only fail calls, and every tesseract would fail to start."""
    release = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return release is not None and (int(release[1]), int(release[2])) >= (5, 5)


def compile_guard() -> bytes | None:
    """The process guard as raw BPF: every task-making call is handed to the listener, every
    other call allowed (the allow list, a filter of its own, decides what may run at all).
    None where libseccomp or the kernel cannot have one."""
    if not _kernel_lets_a_call_continue():
        return None
    program = _compile(_ALLOW, [(_NOTIFY, name) for name in policy.GUARDED_SYSCALLS])
    return None if program is None or _seccomp_number() < 0 else program


def install(program: bytes) -> None:
    """Load a compiled filter into the calling process; it applies to every later descendant.

    Requires no_new_privs (or CAP_SYS_ADMIN): the kernel refuses a filter that a setuid binary
    could otherwise inherit and be confused by.
    """
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // _BPF_INSTRUCTION_BYTES, ctypes.addressof(buffer))
    if _LIBC.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"loading the seccomp filter failed: {os.strerror(error)}")


@functools.cache
def _seccomp_number() -> int:
    """seccomp(2)'s number on this architecture, -1 if unknown; resolved in the fork server."""
    lib = _libseccomp()
    return -1 if lib is None else int(lib.seccomp_syscall_resolve_name(b"seccomp"))


def install_guard(program: bytes) -> int:
    """Load the process guard into the calling process; return the listener descriptor.

    Every later clone, fork or vfork of this process and its descendants waits until whoever
    holds the listener answers it (the fork server). The caller must pass the listener on and
    close its own copy before any job code runs: a job holding it could admit its own calls.
    """
    number = _seccomp_number()
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // _BPF_INSTRUCTION_BYTES, ctypes.addressof(buffer))
    listener = int(
        _LIBC.syscall(number, _SET_MODE_FILTER, _FILTER_FLAG_NEW_LISTENER, ctypes.byref(fprog))
    )
    if listener < 0:
        error = ctypes.get_errno()
        raise OSError(error, f"loading the process guard failed: {os.strerror(error)}")
    return listener


@dataclass(frozen=True)
class TaskRequest:
    """A clone, fork or vfork a guarded process is waiting in, until the listener answers."""

    id: int
    tid: int  # the calling thread, as the listener's pid namespace numbers it


def next_request(listener: int) -> TaskRequest | None:
    """The next waiting call, or None when there is none (any more: its caller died, or was
    interrupted by a signal and will ask again if it restarts the call).

    Asked first with a poll because receiving blocks, whatever the descriptor's flags, and a
    listener whose tasks are all gone reads as ready to a selector too: the fork server must
    never block on a job.
    """
    poller = select.poll()
    poller.register(listener, select.POLLIN)
    if not any(events & select.POLLIN for _, events in poller.poll(0)):
        return None
    buffer = bytearray(_NOTIFICATION.size)  # the kernel refuses a buffer that is not zeroed
    try:
        fcntl.ioctl(listener, _NOTIF_RECV, buffer, True)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EINTR):
            return None
        raise
    request_id, tid, _ = _NOTIFICATION.unpack(buffer)
    return TaskRequest(request_id, tid)


def answer(listener: int, request: TaskRequest, admit: bool) -> None:
    """Let the call run as made, or fail it with EAGAIN (what fork says at a process limit).

    Letting it continue is sound here although the kernel warns against it for checks on
    pointer arguments: the guard counts, it does not inspect, and every flag the allow list
    checks was checked before the call was handed over.
    """
    response = (
        _RESPONSE.pack(request.id, 0, 0, _USER_NOTIF_FLAG_CONTINUE)
        if admit
        else _RESPONSE.pack(request.id, 0, -errno.EAGAIN, 0)
    )
    with contextlib.suppress(FileNotFoundError):  # the caller died meanwhile
        fcntl.ioctl(listener, _NOTIF_SEND, bytearray(response), True)
