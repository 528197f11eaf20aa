"""The system-call filter: the allow list of ``sandbox/policy.py`` compiled to BPF, default kill.

*Kill*, not EPERM: an error can be swallowed by a parser's own ``except``. ``log`` mode is for
deriving the list, never for serving jobs. See docs/sandbox.md, "System calls".
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os

from sandbox import policy

_KILL_PROCESS = 0x80000000
_LOG = 0x7FFC0000
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_ATTR_ACT_BADARCH = 2
_CMP_MASKED_EQ = 7
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_BPF_INSTRUCTION_BYTES = 8


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


def _libseccomp() -> ctypes.CDLL | None:
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
    if isinstance(rule, str) or rule.mask == 0:
        _check(lib.seccomp_rule_add_array(context, action, number, 0, None), name)
        return
    condition = _ArgCmp(rule.argument, _CMP_MASKED_EQ, rule.mask, rule.value)
    _check(lib.seccomp_rule_add_array(context, action, number, 1, ctypes.byref(condition)), name)


def compile_filter(log: bool = False) -> bytes | None:
    """Return the filter as raw BPF, or None when libseccomp is not installed on this host."""
    lib = _libseccomp()
    if lib is None:
        return None
    context = lib.seccomp_init(_LOG if log else _KILL_PROCESS)
    if not context:
        raise OSError("libseccomp could not allocate a filter")
    try:
        _check(lib.seccomp_attr_set(context, _ATTR_ACT_BADARCH, _KILL_PROCESS), "attr_set")
        for name in policy.ALLOWED_SYSCALLS:
            _add(lib, context, _ALLOW, name)
        for rule in policy.ARGUMENT_RULES:
            _add(lib, context, _ALLOW, rule)
        for rule, error in policy.ERRNO_RULES:
            _add(lib, context, _ERRNO | getattr(errno, error), rule)
        memfd = os.memfd_create("airlock-seccomp", os.MFD_CLOEXEC)
        try:
            _check(lib.seccomp_export_bpf(context, memfd), "export_bpf")
            size = os.lseek(memfd, 0, os.SEEK_CUR)
            return os.pread(memfd, size, 0)
        finally:
            os.close(memfd)
    finally:
        lib.seccomp_release(context)


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
