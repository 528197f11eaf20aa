"""Test-only extractors that attack the jail from inside it, registered like real parsers.

Loaded into a fork server with ``SandboxRunner(modules=(..., "tests.sandbox.probes"))``; the
production fork server never imports this module, so these kinds do not exist there. Each
probe's payload is its argument (a port, a path, a size), as plain ASCII.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import termios
import time
import zlib
from collections.abc import Callable

from sandbox.document import Document, Heading, Paragraph
from sandbox.extractors import registry
from sandbox.extractors.registry import Refusal, lookup, report_progress
from sandbox.jail import ANSWER_FD
from sandbox.limits import ParseLimits

# The fork servers in tests load the real parsers as well, so a probe runs in the same process
# image (same imports, same warm-up) as a production job.
PROBE_MODULES = ("sandbox.extractors.all", "tests.sandbox.probes")


def extractor(kind: str) -> Callable[[Callable[..., object]], Callable[..., object]]:
    """Register a probe whose answer is a string (what it saw) as a parser answering a
    document of that one paragraph; a probe that returns something else answers it as is,
    so the child's own checks of what a parser returns are exercised too."""

    def register(probe: Callable[..., object]) -> Callable[..., object]:
        def answer(media_type: str, payload: bytes, limits: ParseLimits) -> object:
            said = probe(media_type, payload, limits)
            return Document([Paragraph(said)]) if isinstance(said, str) else said

        registry.extractor(kind)(answer)  # type: ignore[arg-type]  # a probe may answer anything
        return probe

    return register


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


_PR_CAPBSET_READ = 23


def _capabilities(libc: ctypes.CDLL) -> dict[str, int]:
    """The capability sets as capget(2) and PR_CAPBSET_READ report them (/proc/self/status is
    not readable after the uid drop)."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.capget(header, data) != 0:
        return {"error": 1}
    bounding = sum(1 << cap for cap in range(41) if libc.prctl(_PR_CAPBSET_READ, cap, 0, 0, 0) == 1)
    return {
        "effective": data[0] | data[3] << 32,
        "permitted": data[1] | data[4] << 32,
        "inheritable": data[2] | data[5] << 32,
        "bounding": bounding,
    }


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
            "capabilities": _capabilities(libc),
            "cwd": os.getcwd(),
            # Seen from inside: the fork server removes the directory as soon as the job ends.
            "cwd_mode": os.stat(".").st_mode & 0o777,
            "cwd_uid": os.stat(".").st_uid,
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


_IPC_PRIVATE = 0
_IPC_CREAT = 0o1000


@extractor("probe-shm")
def shared_memory(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Payload 'SEGMENTS BYTES': SysV shared memory, world-writable, touched, left behind."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    segments, size = (int(word) for word in _arg(payload).split())
    for _ in range(segments):
        segment = libc.shmget(_IPC_PRIVATE, ctypes.c_size_t(size), _IPC_CREAT | 0o666)
        if segment < 0:
            return f"shmget failed: errno {ctypes.get_errno()}"
        address = libc.shmat(segment, None, 0)
        ctypes.memset(address, 1, size)
    return f"left {segments} segments"


@extractor("probe-msgqueue")
def message_queue(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    queue = libc.msgget(_IPC_PRIVATE, _IPC_CREAT | 0o666)
    return f"msgget answered {queue}"


@extractor("probe-posix-mq")
def posix_queue(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    queue = libc.mq_open(b"/airlock-probe", os.O_CREAT | os.O_RDWR, 0o666, None)
    return f"mq_open answered {queue}"


@extractor("probe-memfd")
def memory_file(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Pages written into a memfd are outside RLIMIT_AS; an ELF in one could be executed."""
    fd = os.memfd_create("probe")
    os.write(fd, b"x" * int(_arg(payload)))
    return "memfd written"


@extractor("probe-deep-tree")
def deep_tree(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    for depth in range(int(_arg(payload))):
        try:
            os.mkdir("d")
            os.chdir("d")
        except OSError as exc:
            return f"stopped at depth {depth}: {type(exc).__name__}"
    return "built"


@extractor("probe-fork-and-touch")
def fork_and_touch(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Payload 'PROCESSES BYTES': each forked process touches BYTES and waits to be killed."""
    processes, size = (int(word) for word in _arg(payload).split())
    for _ in range(processes):
        if os.fork() == 0:
            block = bytearray(size)
            block[::4096] = b"\x01" * len(block[::4096])
            time.sleep(60)
            os._exit(0)
    time.sleep(60)
    return "survived"


@extractor("probe-fork-and-spin")
def fork_and_spin(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    for _ in range(int(_arg(payload))):
        if os.fork() == 0:
            while True:
                pass
    while True:
        pass


@extractor("probe-document-off-schema")
def document_off_schema(media_type: str, payload: bytes, limits: ParseLimits) -> Document:
    """A parser's bug: a document the schema forbids (msgspec does not check on building)."""
    return Document([Heading(10, "deeper than any heading")])


@extractor("probe-progress-then")
def progress_then(media_type: str, payload: bytes, limits: ParseLimits) -> Document | str:
    """Payload 'KIND ARG': report page 1 of 2, then do what probe KIND does with ARG."""
    kind, _, argument = _arg(payload).partition(" ")
    report_progress(1, 2)
    then = lookup(kind)
    assert then is not None
    return then(media_type, argument.encode(), limits)


_SYS_EXECVEAT = 322  # x86_64
_AT_EMPTY_PATH = 0x1000


@extractor("probe-execveat")
def execute_descriptor(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Execute a program by descriptor (the memfd path's second half), here tesseract's own."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(_arg(payload), os.O_PATH)
    argv = (ctypes.c_char_p * 2)(b"program", None)
    envp = (ctypes.c_char_p * 1)(None)
    libc.syscall(_SYS_EXECVEAT, fd, b"", argv, envp, _AT_EMPTY_PATH)
    return f"execveat failed: errno {ctypes.get_errno()}"


@extractor("probe-fork-from-thread")
def fork_from_thread(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """probe-fork-and-touch, started from a second thread: its children are listed under that
    thread in /proc, not under the main one."""
    import threading  # noqa: PLC0415 - only this probe starts a thread

    worker = threading.Thread(target=fork_and_touch, args=(media_type, payload, limits))
    worker.start()
    worker.join()
    return "survived"


# --- the job's processes however they are parented -------------------------------------------

_CLONE_VM = 0x00000100
_CLONE_VFORK = 0x00004000
# What a thread library passes: one address space, descriptors, handlers and thread group.
_CLONE_A_THREAD = 0x00000100 | 0x00000200 | 0x00000400 | 0x00000800 | 0x00010000 | 0x00040000
_SIGCHLD = 17
_STACK_BYTES = 1 << 20
_THREAD_STACK_BYTES = 64 << 10


def _run_clone_body(index: int | None) -> int:
    _CLONE_BODIES[index or 0]()
    return 0


#: glibc's clone() runs a C function in the child: this one calls the Python body registered
#: under the index passed as its argument. Made here, in the fork server: making a ctypes
#: callback calls statfs(2) in libffi, which the jail's filter kills.
_CLONE_BODIES: list[Callable[[], object]] = []
_CLONE_TRAMPOLINE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(_run_clone_body)


class _Clone:
    """glibc's clone(fn, stack, flags, arg) running Python bodies, each on a stack of its own.

    With CLONE_VM|CLONE_VFORK the caller waits, as with vfork, until the child execs or exits:
    Python in the child runs in the caller's memory while the caller is held, like a nested
    call. Stacks are kept for the life of the process.
    """

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.clone.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)
        self.libc.clone.restype = ctypes.c_int
        self.stacks: list[ctypes.Array[ctypes.c_char]] = []

    def _stack_top(self, size: int) -> int:
        stack = ctypes.create_string_buffer(size)
        self.stacks.append(stack)
        return (ctypes.addressof(stack) + size - 64) & ~15

    def vfork(self, body: Callable[[], object]) -> int:
        """Run ``body`` in a vfork child (sharing our memory); its pid once it exec'd or exited."""
        _CLONE_BODIES.append(body)
        function = ctypes.cast(_CLONE_TRAMPOLINE, ctypes.c_void_p)
        stack = self._stack_top(_STACK_BYTES)
        flags = _CLONE_VM | _CLONE_VFORK | _SIGCHLD
        return int(self.libc.clone(function, stack, flags, len(_CLONE_BODIES) - 1))

    def sleeping_thread(self) -> int:
        """A thread (of the calling process) that sleeps in C, never in Python, for an hour."""
        sleep = ctypes.cast(self.libc.sleep, ctypes.c_void_p)
        stack = self._stack_top(_THREAD_STACK_BYTES)
        return int(self.libc.clone(sleep, stack, _CLONE_A_THREAD, 3600))

    def orphan(self, in_grandchild: Callable[[], object]) -> int:
        """Leave a grandchild the fork server adopts: vfork-clone M, which vfork-clones G (to
        run ``in_grandchild`` until it execs or exits) and exits. G's pid; M is reaped."""
        grandchild = ctypes.c_int(-1)

        def middle() -> None:
            grandchild.value = self.vfork(in_grandchild)

        middle_pid = self.vfork(middle)
        if middle_pid > 0:
            os.waitpid(middle_pid, 0)
        return grandchild.value


@extractor("probe-orphan-tesseracts")
def orphan_tesseracts(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Payload 'COUNT GAP HOLD\\n' and an image: COUNT orphaned tesseracts read the image from
    a pipe (GAP seconds apart), then the job sleeps HOLD seconds and answers."""
    head, _, image = payload.partition(b"\n")
    count, gap, hold = _arg(head).split()
    clone = _Clone()
    program = shutil.which("tesseract")
    assert program is not None
    argv = (ctypes.c_char_p * 4)(b"tesseract", b"stdin", b"stdout", None)
    envp = (ctypes.c_char_p * 2)(b"OMP_THREAD_LIMIT=1", None)
    started = []
    for _ in range(int(count)):
        read_end, write_end = os.pipe()

        def run_tesseract(read_end: int = read_end) -> None:
            os.dup2(read_end, 0)
            clone.libc.execve(program.encode(), argv, envp)
            os._exit(127)

        started.append(clone.orphan(run_tesseract))
        os.close(read_end)
        os.write(write_end, image)
        os.close(write_end)
        time.sleep(float(gap))
    time.sleep(float(hold))
    return f"answered with {len(started)} orphans: {started}"


@extractor("probe-orphan-threads")
def orphan_threads(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Payload 'THREADS HOLD': an orphan starts up to THREADS threads that sleep (until one is
    refused), then the job sleeps HOLD seconds and answers how many it got."""
    threads, hold = _arg(payload).split()
    clone = _Clone()
    started = ctypes.c_int(0)
    refused = ctypes.c_int(0)

    def start_threads() -> None:
        for _ in range(int(threads)):
            if clone.sleeping_thread() < 0:
                refused.value = ctypes.get_errno()
                return
            started.value += 1

    clone.orphan(start_threads)  # G's first thread returns and exits; the others stay
    time.sleep(float(hold))
    return f"an orphan holds {started.value} threads (refused: errno {refused.value})"


@extractor("probe-tesseract-runs")
def tesseract_runs(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Payload 'COUNT': run ``tesseract --version`` COUNT times, one after another."""
    statuses = [
        subprocess.run(["tesseract", "--version"], capture_output=True, check=False).returncode
        for _ in range(int(_arg(payload)))
    ]
    return f"ran {len(statuses)}, statuses {sorted(set(statuses))}"


@extractor("probe-threads")
def many_threads(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Payload 'THREADS HOLD': start THREADS Python threads that sleep HOLD seconds."""
    import threading  # noqa: PLC0415 - only these probes start threads

    threads, hold = _arg(payload).split()
    started = 0
    try:
        for _ in range(int(threads)):
            threading.Thread(target=time.sleep, args=(float(hold),), daemon=True).start()
            started += 1
    except RuntimeError as exc:
        return f"started {started} threads, then {exc}"
    return f"started {started} threads"


# --- the smaller calls: limits, pipe sizes, FIONREAD -----------------------------------------


@extractor("probe-cpu-limit")
def cpu_limit(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Payload 'read' (report the CPU limit) or 'raise' (soft up to hard, so no SIGXCPU)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if _arg(payload) == "raise":
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
        soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    return f"soft {soft} hard {hard}"


@extractor("probe-pipes")
def pipes(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """Payload 'SIZE': make pipes until descriptors run out, size each to SIZE (0: leave the
    default) and fill it; answer how many bytes the pipes hold, which no RSS shows."""
    size = int(_arg(payload))
    held = 0
    made = 0
    try:
        while True:
            _, write_end = os.pipe()  # both ends stay open: the pipe holds what was written
            made += 1
            if size:
                fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, size)
            os.set_blocking(write_end, False)
            chunk = b"x" * (1 << 16)
            try:
                while True:
                    held += os.write(write_end, chunk)
            except BlockingIOError:
                pass
    except OSError as exc:
        return json.dumps({"pipes": made, "held_bytes": held, "stopped": type(exc).__name__})


@extractor("probe-fionread")
def fionread(media_type: str, payload: bytes, limits: ParseLimits) -> str:
    """ioctl(FIONREAD) on a pipe holding the payload: how many bytes wait to be read."""
    read_end, write_end = os.pipe()
    os.write(write_end, payload)
    count = bytearray(4)
    fcntl.ioctl(read_end, termios.FIONREAD, count, True)
    return str(int.from_bytes(count, "little"))
