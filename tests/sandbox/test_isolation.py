"""Attacks from inside a jailed child, each against the real kernel mechanism (no mocks).

The probes in ``tests.sandbox.probes`` are registered like real parsers and run in a fork
server that also imported the real ones, so they run in exactly the process a document would.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox.errors import (
    ChildCrashed,
    CpuLimitExceeded,
    ForbiddenOperation,
    MalformedAnswer,
    MemoryLimitExceeded,
    NoAnswer,
    OutputTooLarge,
    ParserError,
    ProcessLimitExceeded,
    SandboxUnavailable,
    WallClockExceeded,
)
from sandbox.jail import DEFAULT_UID_BASE, MECHANISMS
from sandbox.limits import MIB, SandboxLimits
from sandbox.runner import SandboxRunner
from tests.sandbox.probes import PROBE_MODULES

LIMITS = SandboxLimits(
    memory_bytes=768 * MIB,
    cpu_seconds=1,
    wall_seconds=10.0,
    output_bytes=4 * MIB,
    processes=4,
    file_size_bytes=1 * MIB,
)
REDIS_PORT = 6379


@pytest.fixture(scope="module")
def runner() -> Iterator[SandboxRunner]:
    with SandboxRunner(LIMITS, modules=PROBE_MODULES) as sandbox:
        yield sandbox


def run(sandbox: SandboxRunner, kind: str, argument: str | bytes = b"") -> str:
    payload = argument.encode() if isinstance(argument, str) else argument
    return sandbox.run(kind, "text/plain", payload).text


@pytest.fixture(scope="module")
def listener() -> Iterator[int]:
    """A TCP listener on loopback that an unconfined process can certainly reach."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


def test_every_mechanism_is_active_on_this_host(runner: SandboxRunner) -> None:
    # CI runs as root on a Landlock kernel with libseccomp: nothing may silently degrade here.
    assert runner.mechanisms == MECHANISMS


# --- network ---------------------------------------------------------------------------------


@pytest.mark.parametrize("port", ["listener", "redis"])
def test_tcp_connect_kills_the_child(runner: SandboxRunner, listener: int, port: str) -> None:
    target = listener if port == "listener" else REDIS_PORT
    with pytest.raises(ForbiddenOperation, match="forbidden system call"):
        run(runner, "probe-connect", str(target))


def test_the_probe_connects_when_every_network_layer_is_skipped(listener: int) -> None:
    """The control: the same probe, the same listener, no network layer: it gets through."""
    skip = frozenset({"seccomp", "landlock", "netns"})
    with SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES, skip=skip) as sandbox:
        assert run(sandbox, "probe-connect", str(listener)) == "connected"


@pytest.mark.parametrize(
    ("alone", "message"),
    [
        ("netns", "Network is unreachable"),  # loopback is down in a fresh network namespace
        ("landlock", "PermissionError"),  # Landlock handles connect_tcp with no allowed port
    ],
)
def test_each_network_layer_blocks_the_connect_on_its_own(
    listener: int, alone: str, message: str
) -> None:
    skip = frozenset({"seccomp", "landlock", "netns"}) - {alone}
    with SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES, skip=skip) as sandbox:
        assert alone in sandbox.mechanisms
        with pytest.raises(ParserError, match=message):
            run(sandbox, "probe-connect", str(listener))


# --- files -----------------------------------------------------------------------------------


def test_a_job_cannot_create_a_file_even_in_its_scratch_directory(runner: SandboxRunner) -> None:
    """No file means no disk filled, nothing left behind and no tree to remove (O_CREAT kills)."""
    with pytest.raises(ForbiddenOperation):
        run(runner, "probe-write", "notes.txt 1000")


@pytest.mark.parametrize("skip", [{"seccomp"}, {"seccomp", "landlock"}])
def test_without_the_filter_file_creation_is_still_refused(skip: set[str]) -> None:
    """Landlock grants no write beneath scratch, and the directory is read-only to its owner."""
    with (
        SandboxRunner(
            LIMITS, warm_children=0, modules=PROBE_MODULES, skip=frozenset(skip)
        ) as sandbox,
        pytest.raises(ParserError, match="PermissionError"),
    ):
        run(sandbox, "probe-write", "notes.txt 1000")


@pytest.mark.parametrize(
    "target",
    ["/tmp/airlock-escape", str(Path(__file__).resolve().parents[2] / "airlock-escape")],
)
def test_writing_outside_the_scratch_directory_is_denied(target: str) -> None:
    for skip in (frozenset(), frozenset({"seccomp"})):
        with (
            SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES, skip=skip) as sandbox,
            pytest.raises(ForbiddenOperation if not skip else ParserError),
        ):
            run(sandbox, "probe-write", f"{target} 10")
        assert not os.path.exists(target)


def test_the_scratch_directory_is_private_empty_and_the_process_group_leader(
    runner: SandboxRunner,
) -> None:
    report = json.loads(run(runner, "probe-identity"))
    assert report["cwd"] == report["tmpdir"]
    assert report["cwd_listing"] == []
    assert oct(report["cwd_mode"]) == oct(0o500)
    assert report["cwd_uid"] == report["uid"]
    assert report["pgid_is_pid"]


# --- processes, memory, CPU, wall clock --------------------------------------------------------


def test_fork_is_a_forbidden_call(runner: SandboxRunner) -> None:
    """A job is its child plus the programs it execs: a forked copy would get limits of its own."""
    with pytest.raises(ForbiddenOperation):
        run(runner, "probe-fork", "50")


def test_without_the_filter_the_process_guard_refuses_the_fork_past_the_budget() -> None:
    """The fork server admits each fork (the guard is a filter of its own): three, then the
    fourth task of a 4-task budget is refused and the job killed, naming the budget."""
    with (
        SandboxRunner(
            LIMITS, warm_children=0, modules=PROBE_MODULES, skip=frozenset({"seccomp"})
        ) as sandbox,
        pytest.raises(ProcessLimitExceeded, match=r"exceeded its limit of 4 at once \(5 counted"),
    ):
        run(sandbox, "probe-fork", "50")


def test_without_the_filter_or_the_guard_forking_stops_at_the_process_limit() -> None:
    skip = frozenset({"seccomp", "process_guard"})
    with SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES, skip=skip) as sandbox:
        text = run(sandbox, "probe-fork", "50")
    # The job itself counts against RLIMIT_NPROC of its own uid.
    assert text.startswith(f"forked {LIMITS.processes - 1} then BlockingIOError")


def test_allocating_past_the_memory_limit(runner: SandboxRunner) -> None:
    with pytest.raises(MemoryLimitExceeded, match="768 MiB address-space limit"):
        run(runner, "probe-alloc", str(2 * 1024 * MIB))


@pytest.mark.slow
def test_a_busy_loop_hits_the_cpu_limit(runner: SandboxRunner) -> None:
    # The kernel's SIGXCPU at the soft limit, or the job budget's kill at the same second:
    # on a loaded machine the budget's poll has been first (CI, 2026-12-04). Either is the
    # CPU limit, said so.
    with pytest.raises(CpuLimitExceeded, match=r"SIGXCPU|1-second CPU limit"):
        run(runner, "probe-busy")


@pytest.mark.slow
def test_a_busy_loop_ignoring_sigxcpu_is_killed_at_the_hard_limit(runner: SandboxRunner) -> None:
    # The fork server's job budget kills it at the limit, before the kernel's hard limit does.
    with pytest.raises(CpuLimitExceeded, match="1-second CPU limit"):
        run(runner, "probe-busy-ignoring-sigxcpu")


@pytest.mark.slow
def test_sleeping_hits_the_wall_clock() -> None:
    limits = SandboxLimits(wall_seconds=1.0)
    with (
        SandboxRunner(limits, warm_children=1, modules=PROBE_MODULES) as sandbox,
        pytest.raises(WallClockExceeded, match="1-second wall-clock limit"),
    ):
        run(sandbox, "probe-sleep", "30")


# --- crashes and answers ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["SIGSEGV", "SIGBUS", "SIGABRT"])
def test_a_crash_is_named(runner: SandboxRunner, name: str) -> None:
    with pytest.raises(ChildCrashed, match=f"the parser crashed with {name}"):
        run(runner, "probe-signal", name)


def test_a_100_mb_answer_is_refused_at_its_length() -> None:
    # Encoding 100 MB of answer takes over a CPU second on a loaded machine: this test gives the
    # child room, so the outcome under test is the output cap and not the CPU limit.
    roomy = replace(LIMITS, cpu_seconds=20, wall_seconds=60.0, memory_bytes=2048 * MIB)
    with (
        SandboxRunner(roomy, warm_children=1, modules=PROBE_MODULES) as sandbox,
        pytest.raises(OutputTooLarge, match="output limit is 4194304 bytes"),
    ):
        run(sandbox, "probe-big-answer", str(100 * MIB))


def test_printing_100_mb_reaches_nobody(runner: SandboxRunner) -> None:
    assert run(runner, "probe-print", "100") == "printed"


def _frame(body: bytes) -> bytes:
    return struct.pack("!I", len(body)) + body


def _blocks(paragraph_fields: bytes) -> bytes:
    """A forged document of one paragraph with these fields."""
    return b'{"blocks": [{"block": "paragraph", %s}]}' % paragraph_fields


NONE = b'{"blocks": []}'  # a document with no blocks


@pytest.mark.parametrize(
    ("raw", "error", "message"),
    [
        (_frame(b"not json"), MalformedAnswer, "JSONDecodeError"),
        (_frame(b"\xff\xfe"), MalformedAnswer, "UnicodeDecodeError"),
        (_frame(b"[1, 2]"), MalformedAnswer, "not a JSON object"),
        (
            _frame(b'{"ok": true, "document": %s, "pages": 1, "x": 1}' % NONE),
            MalformedAnswer,
            "exactly",
        ),
        # Text where a document is due: lines no renderer quoted.
        (_frame(b'{"ok": true, "text": "[page 9]", "pages": 1}'), MalformedAnswer, "exactly"),
        (
            _frame(b'{"ok": true, "document": %s, "pages": 1}' % _blocks(b'"text": 5')),
            MalformedAnswer,
            "schema",
        ),
        (_frame(b'{"ok": true, "document": %s, "pages": true}' % NONE), MalformedAnswer, "pages"),
        (
            _frame(b'{"ok": true, "document": %s, "ok": false}' % NONE),
            MalformedAnswer,
            "repeats a key",
        ),
        (
            _frame(b'{"ok": true, "document": %s, "pages": 1}' % _blocks(b'"text": "\\ud800"')),
            MalformedAnswer,
            "surrogate",
        ),
        (_frame(b'{"ok": true, "document": %s, "pages": NaN}' % NONE), MalformedAnswer, "NaN"),
        # Past 4,300 digits json.loads raises a bare ValueError; below, the count is still a lie.
        (
            _frame(b'{"ok": true, "document": %s, "pages": 1%s}' % (NONE, b"0" * 4999)),
            MalformedAnswer,
            "7 digits",
        ),
        (
            _frame(b'{"ok": true, "document": %s, "pages": 1%s}' % (NONE, b"0" * 4000)),
            MalformedAnswer,
            "7 digits",
        ),
        (_frame(b'{"ok": true, "document": %s, "pages": 1000001}' % NONE), MalformedAnswer, "0 to"),
        (_frame(b'{"ok": true, "document": %s, "pages": -1}' % NONE), MalformedAnswer, "0 to"),
        (
            _frame(b'{"ok": true, "document": %s, "pages": 1e999}' % NONE),
            MalformedAnswer,
            "pages is",
        ),
        (_frame(b'{"ok": false, "code": 1%s}' % (b"0" * 4999)), MalformedAnswer, "7 digits"),
        (
            _frame(b'{"ok": false, "code": "pwned", "type": "X", "reason": "r"}'),
            MalformedAnswer,
            "unknown error code",
        ),
        (
            _frame(b'{"ok": false, "code": "parser", "type": "a b", "reason": "r"}'),
            MalformedAnswer,
            "identifier",
        ),
        (struct.pack("!I", 100) + b"short", MalformedAnswer, "cut off after 9 bytes"),
        (b"\xff\xff\xff\xff", OutputTooLarge, "announced 4294967295 bytes"),
        (b"", NoAnswer, "exited with status 0 without answering"),
    ],
)
def test_a_forged_answer_is_typed(
    runner: SandboxRunner, raw: bytes, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        run(runner, "probe-raw-answer", raw)


def test_a_control_character_in_a_reason_cannot_forge_a_log_line(runner: SandboxRunner) -> None:
    with pytest.raises(ParserError) as caught:
        run(runner, "probe-raise", "boom\nINFO all good\x1b[2J")
    assert "\n" not in str(caught.value) and "\x1b" not in str(caught.value)
    assert str(caught.value) == "parser raised ValueError: boom\\x0aINFO all good\\x1b[2J"


def test_exiting_without_an_answer(runner: SandboxRunner) -> None:
    with pytest.raises(NoAnswer, match="exited with status 3 without answering"):
        run(runner, "probe-exit", "3")


# --- descriptors, programs, identity ---------------------------------------------------------


def test_the_child_cannot_reach_the_workers_descriptors(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    with (
        open(secret) as held,
        SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES) as sandbox,
    ):
        fd = held.fileno()
        identity = json.loads(run(sandbox, "probe-identity"))
        for owner in (os.getpid(), identity["ppid"]):  # the worker and the fork server
            report = json.loads(run(sandbox, "probe-fd", f"{fd} {owner}"))
            assert report["fstat"] == "OSError"
            assert report["proc"] == "PermissionError"
            assert report["proc_read"] == "PermissionError"
            assert report["open_fds"] == "[0, 1, 2, 3]"


def test_a_shell_cannot_be_executed(runner: SandboxRunner) -> None:
    with pytest.raises(ParserError, match=r"PermissionError.*'/bin/sh'"):
        run(runner, "probe-exec", "/bin/sh -c true")


def test_the_loader_cannot_run_an_unreadable_program(runner: SandboxRunner) -> None:
    """Execute is granted on ld.so (tesseract needs it); it cannot load a program it cannot read."""
    report = json.loads(run(runner, "probe-exec", "/lib64/ld-linux-x86-64.so.2 /bin/sh -c true"))
    assert report["status"] != 0
    assert "cannot open shared object file" in report["out"] or "Permission" in report["out"]


def test_tesseract_can_be_executed(runner: SandboxRunner) -> None:
    report = json.loads(run(runner, "probe-exec", "tesseract --version"))
    assert report["status"] == 0
    assert report["out"].startswith("tesseract ")


def test_the_child_is_unprivileged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AIRLOCK_TEST_SECRET", "hunter2")
    with SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES) as sandbox:
        report = json.loads(run(sandbox, "probe-identity"))
    assert report["uid"] == report["euid"] == report["gid"]
    assert report["uid"] >= DEFAULT_UID_BASE
    assert report["groups"] == []
    assert report["no_new_privs"] == 1
    # Every capability set is empty, the bounding set included, so nothing can be regained.
    assert report["capabilities"] == {
        "effective": 0,
        "permitted": 0,
        "inheritable": 0,
        "bounding": 0,
    }
    # The worker's environment (and any secret in it) never reaches the fork server or a child.
    assert report["environ"] == ["HOME", "LANG", "OMP_THREAD_LIMIT", "PATH", "TMPDIR"]


def test_the_child_cannot_signal_the_fork_server_or_the_worker(runner: SandboxRunner) -> None:
    zygote = json.loads(run(runner, "probe-identity"))["ppid"]
    for target in (zygote, os.getpid()):
        with pytest.raises(ParserError, match="PermissionError"):
            run(runner, "probe-kill", str(target))
    assert run(runner, "probe-echo", "still here") == "still here"


def test_a_new_user_namespace_is_a_forbidden_call(runner: SandboxRunner) -> None:
    with pytest.raises(ForbiddenOperation):
        run(runner, "probe-unshare-user")


def test_a_lazy_import_fails_inside_the_jail(runner: SandboxRunner) -> None:
    """Why the fork server warms every parser: the interpreter's files are out of reach."""
    assert "wave" not in sys.modules
    with pytest.raises(ParserError, match="ModuleNotFoundError"):
        run(runner, "probe-lazy-import", "wave")


# --- degradation and requirements ------------------------------------------------------------


def test_a_skipped_mechanism_is_reported_missing() -> None:
    with SandboxRunner(
        LIMITS, warm_children=0, modules=PROBE_MODULES, skip=frozenset({"landlock"})
    ) as sandbox:
        assert sandbox.mechanisms == MECHANISMS - {"landlock"}
        assert run(sandbox, "probe-echo", "ok") == "ok"


def test_required_and_skipped_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="both required and skipped"):
        SandboxRunner(require=frozenset({"seccomp"}), skip=frozenset({"seccomp"}))


def test_the_runner_requires_what_it_is_given_not_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker's configuration reads AIRLOCK_SANDBOX_REQUIRE and passes it on; the runner
    itself holds only its ``require``, so the doctor can probe a layer alone."""
    monkeypatch.setenv("AIRLOCK_SANDBOX_REQUIRE", "landlock,seccomp")
    with pytest.raises(ValueError, match="both required and skipped"):
        SandboxRunner(require=frozenset({"landlock", "seccomp"}), skip=frozenset({"landlock"}))
    with SandboxRunner(
        LIMITS, warm_children=0, modules=PROBE_MODULES, skip=frozenset({"landlock"})
    ) as probe:
        assert "landlock" not in probe.mechanisms
        assert run(probe, "probe-echo", "ok") == "ok"


def test_an_unknown_required_mechanism_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="firewall"):
        SandboxRunner(require=frozenset({"netns", "firewall"}))


def test_a_failed_uid_drop_as_root_refuses_every_job() -> None:
    """As root the uid drop is required whatever AIRLOCK_SANDBOX_REQUIRE says: no job ever
    parses as root. A uid base this high leaves no valid uid to drop to, as on a container whose
    user namespace maps no spare uids."""
    assert os.geteuid() == 0, "this suite runs as root"
    with (
        SandboxRunner(LIMITS, warm_children=0, modules=PROBE_MODULES, uid_base=2**32 - 1) as strict,
        pytest.raises(SandboxUnavailable, match="came up without uid_drop"),
    ):
        assert "uid_drop" not in strict.mechanisms
        run(strict, "probe-echo", "never")
    with pytest.raises(ValueError, match="uid_drop cannot be skipped"):
        SandboxRunner(skip=frozenset({"uid_drop"}))
