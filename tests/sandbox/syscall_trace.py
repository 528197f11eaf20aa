"""Which system calls jailed children really make, seen by strace attached to the fork server.

The seccomp allow list (``sandbox/policy.py``) is derived from this: the jobs below (every
corpus document, the hostile files of the suite, OCR) run in children of a fork server that
strace follows, and every call a child makes after its filter is installed, or that a process
it started makes, is collected. ``python -m tests.sandbox.syscall_trace`` prints the result;
the test in ``test_syscall_allowlist.py`` fails naming any call the list lacks.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import re
import signal
import subprocess
import sys
import tempfile
import termios
import time
import zipfile
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from sandbox import policy
from sandbox.enclosures import UNPACK_KINDS
from sandbox.errors import SandboxError
from sandbox.runner import SandboxRunner
from tests.conftest import CORPUS_DIR
from tests.sandbox.hostile_inputs import DOCX, HOSTILE, LIMITS, PPTX, XLSX

OFFICE_DATA = Path(__file__).parents[1] / "data" / "office"

# Room for every corpus page to be OCR'd under strace, which slows each call.
TRACE_LIMITS = replace(LIMITS, cpu_seconds=120, wall_seconds=300.0)

# "PID name(" for a call, "PID <... name resumed>" for the second half of an interrupted one.
_CALL = re.compile(r"^(\d+) +(?:<\.\.\. (\w+) resumed>|(\w+)\()")
_NEW_PROCESS = re.compile(r"^(\d+) +(?:<\.\.\. )?(?:vfork|clone|clone3|fork)\b.*= (\d+)$")
# The allow list, not the process guard: the guard is a filter too (loaded with a listener,
# before the jail's last steps), but the calls after it are still the jail's own.
_FILTER_LOADED = re.compile(
    r"^(\d+) +(?:prctl\(PR_SET_SECCOMP|seccomp\((?!.*SECCOMP_FILTER_FLAG_NEW_LISTENER))"
)

Job = tuple[str, str, bytes]


def _filtered(strace_output: str) -> list[tuple[str, str]]:
    """(name, line) of each call made under the seccomp allow list: after it, or by a filtered
    pid's descendants. The jail's own set-up calls (before the list) are not the parsers'.

    A vfork child runs (and strace prints its calls) before its parent's vfork returns, so
    who is filtered from which line on is settled first and the calls are read after.
    """
    lines = strace_output.splitlines()
    filtered_from: dict[int, int] = {}
    births: list[tuple[int, int, int]] = []  # (line, parent, child)
    for number, line in enumerate(lines):
        loaded = _FILTER_LOADED.match(line)
        if loaded:
            filtered_from.setdefault(int(loaded.group(1)), number)
        born = _NEW_PROCESS.match(line)
        if born:
            births.append((number, int(born.group(1)), int(born.group(2))))
    changed = True
    while changed:
        changed = False
        for number, parent, child in births:
            if filtered_from.get(parent, len(lines)) < number and child not in filtered_from:
                filtered_from[child] = -1
                changed = True
    calls = []
    for number, line in enumerate(lines):
        call = _CALL.match(line)
        if call is None or call.group(3) is None:  # resumed halves were read at the start
            continue
        if filtered_from.get(int(call.group(1)), len(lines)) < number:
            calls.append((call.group(3), line))
    return calls


def children_calls(strace_output: str) -> dict[str, int]:
    """How often each call was made under the allow list."""
    return dict(Counter(name for name, _ in _filtered(strace_output)))


# The calls whose arguments the allow list checks, as strace names them: "fcntl(3, F_GETFD",
# "ioctl(0, TCGETS, ...", "prlimit64(0, RLIMIT_STACK, NULL, ...".
# A call another thread interrupted ends its first half with " <unfinished ...>": an argument
# stops at a space too, so "F_GETFD <unfinished ...>" reads as F_GETFD.
_ARGUMENTS = re.compile(r"^\d+ +(fcntl|ioctl|prlimit64)\(([^,)\s]*), ([^,)\s]*)(?:, ([^,)\s]*))?")


def argument_breaches(strace_output: str) -> dict[str, int]:
    """The calls made under the allow list with arguments it refuses ("fcntl F_SETPIPE_SZ":
    times made): the name is allowed, so only the argument rule would kill the real job."""
    breaches: Counter[str] = Counter()
    for _, line in _filtered(strace_output):
        match = _ARGUMENTS.match(line)
        if match is None:
            continue
        call, first, second, third = match.groups()
        if call == "fcntl":
            allowed = getattr(fcntl, second, None) in policy.ALLOWED_FCNTLS
        elif call == "ioctl":
            allowed = getattr(termios, second, None) in policy.ALLOWED_IOCTLS
        else:  # on itself, reading only: "prlimit64 RLIMIT_CPU" names a limit it set
            allowed = first == "0" and third == "NULL"
        if not allowed:
            breaches[f"{call} {second}"] += 1
    return dict(breaches)


def trace(runner: SandboxRunner, jobs: Iterable[Job], output: Path) -> str:
    """Run ``jobs`` on ``runner`` (built with ``warm_children=0``, so every child is forked
    while strace follows the fork server) and return what strace saw."""
    zygote = runner.fork_server_pid
    command = ["strace", "-f", "-qq", "-e", "signal=none", "-s", "0", "-o", str(output)]
    tracer = subprocess.Popen([*command, "-p", str(zygote)], stderr=subprocess.PIPE)
    try:
        time.sleep(0.5)  # strace attaches asynchronously; a job before that would go unseen
        for kind, media_type, payload in jobs:
            # Hostile files end in typed failures; their calls count all the same.
            with contextlib.suppress(SandboxError):
                runner.run(kind, media_type, payload)
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(30)
    return output.read_text()


def corpus_jobs(corpus: Path) -> list[Job]:
    """Every corpus document as the kind the CLI would send it as."""
    kinds = {
        ".pdf": ("pdf", "application/pdf"),
        ".docx": ("docx", DOCX),
        ".xlsx": ("spreadsheet", XLSX),
        ".xlsm": ("spreadsheet", XLSX),
        ".xls": ("spreadsheet", XLSX),
        ".ods": ("spreadsheet", XLSX),
        ".pptx": ("presentation", PPTX),
        ".odp": ("presentation", PPTX),
        ".odt": ("odt", "application/vnd.oasis.opendocument.text"),
        ".rtf": ("rtf", "application/rtf"),
        ".epub": ("epub", "application/epub+zip"),
        ".html": ("html", "text/html"),
        ".eml": ("email", "message/rfc822"),
        ".png": ("image", "image/png"),
        ".tif": ("image", "image/tiff"),
        ".jpg": ("image", "image/jpeg"),
        ".txt": ("text", "text/plain"),
        ".ipynb": ("text", "application/x-ipynb+json"),
        ".json": ("text", "application/json"),
        ".py": ("text", "text/x-python"),
        ".xml": ("text", "application/xml"),
    }
    documents = [
        (*kinds[path.suffix], path.read_bytes())
        for path in sorted(corpus.iterdir())
        if path.suffix in kinds
    ]
    return documents + _container_jobs(documents)


def _container_jobs(documents: list[Job]) -> list[Job]:
    """Each e-mail unpacked, Outlook's messages read and unpacked, and a ZIP of the corpus's
    text files unpacked: the unpacking children's calls count as a parser's do."""
    messages = [payload for kind, _, payload in documents if kind == "email"]
    messages += [path.read_bytes() for path in sorted(OFFICE_DATA.glob("*.msg"))]
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as archive:
        for index, (kind, _, payload) in enumerate(documents):
            if kind == "text":
                archive.writestr(f"texts/{index}.txt", payload)
    return [
        *(("email", "application/vnd.ms-outlook", payload) for payload in messages),
        *((UNPACK_KINDS["email"], "message/rfc822", payload) for payload in messages),
        (UNPACK_KINDS["archive"], "application/zip", bundle.getvalue()),
    ]


def hostile_jobs() -> list[Job]:
    return [(kind, media_type, build()) for _, kind, media_type, build, _ in HOSTILE]


def main() -> int:
    with (
        SandboxRunner(TRACE_LIMITS, warm_children=0, seccomp_log=True) as runner,
        tempfile.TemporaryDirectory() as directory,
    ):
        jobs = corpus_jobs(CORPUS_DIR) + hostile_jobs()
        calls = children_calls(trace(runner, jobs, Path(directory) / "strace.log"))
    for name in sorted(calls):
        print(f"{name} {calls[name]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
