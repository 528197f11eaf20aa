"""Test-only extractors that attack the jail from inside it, registered like real parsers.

Loaded into a fork server with ``SandboxRunner(modules=(..., "tests.sandbox.probes"))``; the
production fork server never imports this module, so these kinds do not exist there. Each
probe's payload is its argument (a port, a path, a size), as plain ASCII.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import time
import zlib

from sandbox.extractors.registry import Refusal, extractor, lookup, report_progress
from sandbox.jail import ANSWER_FD
from sandbox.limits import ParseLimits

# The fork servers in tests load the real parsers as well, so a probe runs in the same process
# image (same imports, same warm-up) as a production job.
PROBE_MODULES = ("sandbox.extractors.all", "tests.sandbox.probes")

_PR_GET_NO_NEW_PRIVS = 39
_CLONE_NEWUSER = 0x10000000


def _arg(payload: bytes) -> str:
    return payload.decode("ascii")


@extractor("probe-echo")
def echo(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    return payload.decode("utf-8")


@extractor("probe-connect")
def connect(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    # A bytes host: a str host would make the socket module import the idna codec lazily.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(2)
        sock.connect((b"127.0.0.1", int(_arg(payload))))
        return "connected"


@extractor("probe-write")
def write(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Payload 'PATH SIZE': write SIZE bytes to PATH (relative paths land in scratch)."""
    path, size = _arg(payload).split()
    with open(path, "wb") as file:
        file.write(b"x" * int(size))
    return f"wrote {os.path.getsize(path)} bytes to {os.path.abspath(path)}"


@extractor("probe-fork")
def fork(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Fork until the kernel refuses; the forked copies sleep until the job's group is killed."""
    started = 0
    try:
        for _ in range(int(_arg(payload))):
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            started += 1
    except OSError as exc:
        return f"forked {started} then {type(exc).__name__}: {exc}"
    return f"forked {started}"


@extractor("probe-alloc")
def alloc(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    block = bytearray(int(_arg(payload)))
    return str(len(block))


@extractor("probe-busy")
def busy(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    while True:
        pass


@extractor("probe-busy-ignoring-sigxcpu")
def busy_ignoring_sigxcpu(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    signal.signal(signal.SIGXCPU, signal.SIG_IGN)
    while True:
        pass


@extractor("probe-sleep")
def sleep(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    time.sleep(float(_arg(payload)))
    return "slept"


@extractor("probe-signal")
def raise_signal(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    os.kill(os.getpid(), signal.Signals[_arg(payload)])
    time.sleep(5)
    return "survived"


@extractor("probe-big-answer")
def big_answer(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    return "x" * int(_arg(payload))


@extractor("probe-print")
def loud(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    chunk = "y" * (1 << 20)
    for _ in range(int(_arg(payload))):
        print(chunk)
        os.write(2, chunk.encode())
    return "printed"


@extractor("probe-raw-answer")
def raw_answer(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Write the payload straight to the answer pipe, bypassing the child's framing, and die."""
    os.write(ANSWER_FD, payload)
    os._exit(0)


@extractor("probe-exit")
def exit_now(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    os._exit(int(_arg(payload)))


@extractor("probe-raise")
def raise_value_error(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    raise ValueError(_arg(payload))


@extractor("probe-refuse")
def refuse(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    raise Refusal(_arg(payload), f"refused by probe ({_arg(payload)})")


@extractor("probe-fd")
def inherited_fd(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Payload 'FD PPID': try to use a descriptor number the worker holds, and its /proc."""
    fd, parent = (int(word) for word in _arg(payload).split())
    report = {}
    try:
        os.fstat(fd)
        report["fstat"] = "ok"
    except OSError as exc:
        report["fstat"] = type(exc).__name__
    try:
        report["proc"] = str(os.listdir(f"/proc/{parent}/fd"))
    except OSError as exc:
        report["proc"] = type(exc).__name__
    try:
        with open(f"/proc/{parent}/fd/{fd}", "rb") as file:
            report["proc_read"] = file.read(100).decode("latin-1")
    except OSError as exc:
        report["proc_read"] = type(exc).__name__
    report["open_fds"] = str([number for number in range(1024) if _is_open(number)])
    return json.dumps(report)


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@extractor("probe-exec")
def run_program(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    done = subprocess.run(_arg(payload).split(), capture_output=True, timeout=20, check=False)
    return json.dumps(
        {"status": done.returncode, "out": (done.stdout + done.stderr).decode(errors="replace")}
    )


@extractor("probe-identity")
def identity(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    libc = ctypes.CDLL(None)
    try:
        with open("/proc/self/status") as file:
            status = {
                key: value.strip()
                for key, _, value in (line.partition(":") for line in file)
                if key in {"NoNewPrivs", "Seccomp", "Uid", "Gid", "Groups"}
            }
    except OSError as exc:
        status = {"error": type(exc).__name__}
    return json.dumps(
        {
            "uid": os.getuid(),
            "euid": os.geteuid(),
            "gid": os.getgid(),
            "groups": os.getgroups(),
            "no_new_privs": libc.prctl(_PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0),
            "cwd": os.getcwd(),
            "cwd_listing": os.listdir("."),
            "tmpdir": os.environ.get("TMPDIR"),
            "environ": sorted(os.environ),
            "status": status,
            "pgid_is_pid": os.getpgrp() == os.getpid(),
            "ppid": os.getppid(),
        }
    )


@extractor("probe-kill")
def kill_pid(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    os.kill(int(_arg(payload)), signal.SIGKILL)
    return "killed"


@extractor("probe-unshare-user")
def unshare_user(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    result = ctypes.CDLL(None, use_errno=True).unshare(_CLONE_NEWUSER)
    return f"unshare returned {result}"


@extractor("probe-lazy-import")
def lazy_import(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    __import__(_arg(payload))
    return "imported"


@extractor("probe-text")
def text_from_json(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Return exactly the string the JSON payload holds (lone surrogates included)."""
    value = json.loads(payload)
    assert isinstance(value, str)
    return value


@extractor("probe-limits")
def report_limits(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    return json.dumps(
        {
            "media_type": media_type,
            "max_pages": limits.max_pages,
            "max_pixels": limits.max_pixels,
            "max_text_chars": limits.max_text_chars,
            "ocr_language": limits.ocr_language,
        }
    )


@extractor("probe-length")
def length(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    return f"{len(payload)} {zlib.crc32(payload)}"


@extractor("probe-exit-raise")
def raise_system_exit(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    raise SystemExit(int(_arg(payload)))


@extractor("probe-progress-then")
def progress_then(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Payload 'KIND ARG': report page 1 of 2, then do what probe KIND does with ARG."""
    kind, _, argument = _arg(payload).partition(" ")
    report_progress(1, 2)
    then = lookup(kind)
    assert then is not None
    return then(media_type, argument.encode(), limits)


@extractor("probe-deep-dirs")
def deep_dirs(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Leave a chain of N nested directories in scratch (mkdir d; chdir d, N times)."""
    levels = int(_arg(payload))
    for _ in range(levels):
        os.mkdir("d")
        os.chdir("d")
    return f"made {levels}"
