"""Landlock over ctypes: confine a process's file access, TCP and signals to an allow list.

Unprivileged and stacking with everything else, so it holds where a container forbids
namespaces. See docs/sandbox.md, "Layers" and "Notes by module".
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from dataclasses import dataclass

# System call numbers are the same on every architecture (added after the syscall table merge).
_CREATE_RULESET = 444
_ADD_RULE = 445
_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13
TRUNCATE = 1 << 14
IOCTL_DEV = 1 << 15

_NET_BIND_TCP = 1 << 0
_NET_CONNECT_TCP = 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
_SCOPE_SIGNAL = 1 << 1

# Rights that make sense on a regular file; a rule granting a directory-only right on a file
# is rejected by the kernel.
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

READ = READ_FILE | READ_DIR
RUN = READ_FILE | EXECUTE


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long


def abi_version() -> int:
    """The Landlock ABI this kernel offers, 0 when Landlock is absent or disabled."""
    version = int(_LIBC.syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION))
    return max(version, 0)


def _handled_fs(abi: int) -> int:
    rights = (MAKE_SYM << 1) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


@dataclass(frozen=True)
class Rules:
    """Pre-opened paths (O_PATH descriptors held by the fork server) and the rights on each."""

    abi: int
    grants: tuple[tuple[int, int], ...]


def prepare(allowed: Iterable[tuple[str, int]]) -> Rules:
    """Open each existing path once; a missing one (no tesseract on this host) is skipped."""
    abi = abi_version()
    grants: list[tuple[int, int]] = []
    if abi == 0:
        return Rules(0, ())
    for path, rights in allowed:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        applicable = rights if os.path.isdir(path) else rights & _FILE_RIGHTS
        grants.append((fd, applicable & _handled_fs(abi)))
    return Rules(abi, tuple(grants))


def _fail(what: str) -> OSError:
    error = ctypes.get_errno()
    return OSError(error, f"landlock {what} failed: {os.strerror(error)}")


def restrict(rules: Rules, scratch_fd: int) -> None:
    """Confine the calling process for good: read the granted paths and its (empty) scratch
    directory, write nothing but what the rules grant (``/dev/null``).

    The caller must already have no_new_privs set.
    """
    handled = _handled_fs(rules.abi)
    attr = _RulesetAttr(
        handled,
        (_NET_BIND_TCP | _NET_CONNECT_TCP) if rules.abi >= 4 else 0,
        (_SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL) if rules.abi >= 6 else 0,
    )
    size = ctypes.sizeof(_RulesetAttr) if rules.abi >= 6 else 16 if rules.abi >= 4 else 8
    ruleset = int(_LIBC.syscall(_CREATE_RULESET, ctypes.byref(attr), size, 0))
    if ruleset < 0:
        raise _fail("create_ruleset")
    try:
        for fd, rights in (*rules.grants, (scratch_fd, READ & handled)):
            beneath = _PathBeneathAttr(rights, fd)
            if _LIBC.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(beneath), 0):
                raise _fail("add_rule")
        if _LIBC.syscall(_RESTRICT_SELF, ruleset, 0):
            raise _fail("restrict_self")
    finally:
        os.close(ruleset)
