"""The system-call filter: which calls kill a jailed child, compiled once, installed per child.

A deny list with a *kill-process* action. An EPERM answer would reach the parser as an
exception its own ``except`` might swallow and carry on; a kill cannot be swallowed, and the
parent sees SIGSYS and names it. The list is what no parser needs and an escape would: network
sockets, debugging other processes, namespaces and mounts, kernel keyrings, BPF, module loading,
io_uring (which performs socket and file operations beyond the reach of this filter), and
leaving the process group (the parent kills the job by its group). ``execve`` stays allowed: the
OCR path execs tesseract, and Landlock confines which file may be executed.

libseccomp compiles the rules to BPF once, in the fork server (compiling costs about a
millisecond); each child only hands the ready program to the kernel with one ``prctl``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os

_KILL_PROCESS = 0x80000000
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_ATTR_ACT_BADARCH = 2
_CMP_NE = 1
_CMP_EQ = 4
_CMP_MASKED_EQ = 7
_PR_SET_SECCOMP = 22
_AF_UNIX = 1
_SECCOMP_MODE_FILTER = 2

FORBIDDEN_SYSCALLS = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "open_by_handle_at",
    "name_to_handle_at",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "setsid",
    "setpgid",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "sethostname",
    "setdomainname",
    "syslog",
    "quotactl",
    "iopl",
    "ioperm",
)

# clone() flags that create namespaces; a child could otherwise enter a fresh user namespace
# and reach kernel code paths (and capabilities inside it) the jail does not expect. CLONE_NEWTIME
# is left out: in clone()'s first argument that bit is part of the exit-signal byte.
_CLONE_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)


class _ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


_BPF_INSTRUCTION_BYTES = 8
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


def _add_socket_rules(lib: ctypes.CDLL, context: int) -> None:
    """Kill on any socket but AF_UNIX, which fails with EACCES instead.

    glibc's user lookup (run inside tesseract at start-up) tries the nscd daemon's unix socket
    and falls back to /etc files on failure; killing it there would kill every OCR job, and a
    refused unix socket reaches nothing either.
    """
    socket = lib.seccomp_syscall_resolve_name(b"socket")
    unix = _ArgCmp(0, _CMP_EQ, _AF_UNIX, 0)
    other = _ArgCmp(0, _CMP_NE, _AF_UNIX, 0)
    _check(
        lib.seccomp_rule_add_array(context, _ERRNO | errno.EACCES, socket, 1, ctypes.byref(unix)),
        "socket",
    )
    _check(
        lib.seccomp_rule_add_array(context, _KILL_PROCESS, socket, 1, ctypes.byref(other)),
        "socket",
    )


def compile_filter() -> bytes | None:
    """Return the filter as raw BPF, or None when libseccomp is not installed on this host."""
    lib = _libseccomp()
    if lib is None:
        return None
    context = lib.seccomp_init(_ALLOW)
    if not context:
        raise OSError("libseccomp could not allocate a filter")
    try:
        # A 32-bit or x32 system call would be a second, unfiltered table: kill those too.
        _check(lib.seccomp_attr_set(context, _ATTR_ACT_BADARCH, _KILL_PROCESS), "attr_set")
        for name in FORBIDDEN_SYSCALLS:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                continue  # not a system call on this architecture
            _check(lib.seccomp_rule_add_array(context, _KILL_PROCESS, number, 0, None), name)
        _add_socket_rules(lib, context)
        clone = lib.seccomp_syscall_resolve_name(b"clone")
        for flag in _CLONE_NAMESPACE_FLAGS:
            condition = ctypes.byref(_ArgCmp(0, _CMP_MASKED_EQ, flag, flag))
            _check(lib.seccomp_rule_add_array(context, _KILL_PROCESS, clone, 1, condition), "clone")
        # clone3 passes its flags in memory, where BPF cannot look. ENOSYS makes glibc fall back
        # to clone(), whose flags the rules above do inspect.
        clone3 = lib.seccomp_syscall_resolve_name(b"clone3")
        if clone3 >= 0:
            _check(
                lib.seccomp_rule_add_array(context, _ERRNO | errno.ENOSYS, clone3, 0, None),
                "clone3",
            )
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
