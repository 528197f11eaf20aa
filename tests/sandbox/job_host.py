"""Sandbox jobs run by a process of their own, under the uid it was started with.

The deployments run the sandbox two ways: as root, where every child gets a uid of its own
(and ``RLIMIT_NPROC`` per job), and as the image's unprivileged uid 10001, where every child
shares the worker's uid and there is no per-job kernel counter. A test starts a ``JobHost``
as either and attacks the same jobs through both, measuring from outside (as root).

``python -m tests.sandbox.job_host`` is the host: it reads one JSON line (the runner's limits
and skipped layers), starts a runner with the probes and says ``{"zygote": PID, "mechanisms":
[...]}``; then for every line ``{"jobs": [...]}`` it runs those jobs at once (each ``after``
seconds in) and says their outcomes, in order.
"""

from __future__ import annotations

import base64
import ctypes
import json
import os
import socket
import struct
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sandbox import seccomp
from sandbox.errors import SandboxError
from sandbox.limits import SandboxLimits
from sandbox.runner import SandboxRunner
from tests.sandbox.probes import PROBE_MODULES

ROOT = 0
IMAGE_UID = 10001  # the image's user (Dockerfile, deploy/): no uid drop, no RLIMIT_NPROC
_REPO = Path(__file__).resolve().parents[2]
_ANSWER_SECONDS = 120.0


@dataclass(frozen=True)
class Job:
    kind: str
    payload: bytes
    media_type: str = "text/plain"
    after: float = 0.0  # seconds after the batch starts


@dataclass(frozen=True)
class Outcome:
    """A job's text, or the name of the ``SandboxError`` it ended in and its reason."""

    text: str | None = None
    error: str | None = None
    reason: str = ""


class UnreachableCheckout(RuntimeError):
    """The uid asked for cannot run this checkout (it lives under a 0700 home, say)."""


def _world_reachable(path: Path, mode: int) -> bool:
    """Whether a uid that is neither owner nor group may reach ``path`` (every directory on
    the way searchable) and use it with ``mode`` (the other-bits: 0o5 to run, 0o4 to read)."""
    path = path.resolve()
    for directory in path.parents:
        if not directory.stat().st_mode & 0o001:
            return False
    return path.exists() and path.stat().st_mode & mode == mode


def _command(uid: int) -> tuple[list[str], dict[str, str]] | None:
    """How ``uid`` runs this module with this checkout and the venv's packages, if it can.

    As root, the test's own interpreter. An unprivileged uid cannot enter a 0700 home where a
    pyenv interpreter may live; the system's interpreter of the same version runs the venv's
    packages (they are built for that version) when the venv's own base cannot be reached.
    """
    paths = sysconfig.get_paths()
    search = [str(_REPO), paths["purelib"], paths["platlib"]]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONPATH": os.pathsep.join(search)}
    if uid == ROOT:
        return [sys.executable, "-P", "-m", __name__], env
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(sys.executable).resolve(), Path("/usr/bin") / version]
    usable = [path for path in candidates if _world_reachable(path, 0o005)]
    if not usable or not all(_world_reachable(Path(entry), 0o005) for entry in search):
        return None
    return [str(usable[0]), "-P", "-m", __name__], env


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


_PR_SET_NO_NEW_PRIVS = 38
_ALLOW_EVERYTHING = struct.pack("<HBBI", 0x06, 0, 0, 0x7FFF0000)  # BPF: return ALLOW


def _give_away_a_listener(to: socket.socket) -> None:
    """Put the host under a filter whose listener the test holds, as a container runtime may
    hold one on a container's filter: the kernel allows one listener per filter chain (while
    its descriptor is open), so no child of the host can have the guard."""
    ctypes.CDLL(None).prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    listener = seccomp.install_guard(_ALLOW_EVERYTHING)
    socket.send_fds(to, [b"listener"], [listener])


class JobHost:
    """A host process as ``uid``, its fork server's pid, and the jobs it runs on request."""

    def __init__(
        self,
        uid: int,
        limits: SandboxLimits,
        skip: frozenset[str] = frozenset(),
        *,
        listener_taken: bool = False,
    ) -> None:
        command = _command(uid)
        if command is None:
            raise UnreachableCheckout(
                f"uid {uid} cannot reach a Python interpreter, this checkout and its packages "
                "(every directory on the way must be searchable by others, as in the image)"
            )
        argv, env = command
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd="/",
            user=uid,
            group=uid,
            extra_groups=[],
            preexec_fn=(lambda: _give_away_a_listener(theirs)) if listener_taken else None,
        )
        with ours, theirs:
            self._held = socket.recv_fds(ours, 16, 1)[1] if listener_taken else []
        config = {"limits": asdict(limits), "skip": sorted(skip)}
        hello = self._ask(config)
        self.zygote = int(hello["zygote"])
        self.mechanisms = frozenset(hello["mechanisms"])
        self.uid = uid

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the job host exited with status {self.process.wait(10)}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(self, *jobs: Job) -> list[Outcome]:
        batch = [{**asdict(job), "payload": _b64(job.payload)} for job in jobs]
        return [Outcome(**outcome) for outcome in self._ask({"jobs": batch})["outcomes"]]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)
        for fd in self._held:
            os.close(fd)

    def __enter__(self) -> JobHost:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- the host ---------------------------------------------------------------------------------


def _outcome(runner: SandboxRunner, job: dict[str, Any], start: float) -> dict[str, Any]:
    time.sleep(max(0.0, start + float(job["after"]) - time.monotonic()))
    try:
        text = runner.run(job["kind"], job["media_type"], base64.b64decode(job["payload"])).text
    except SandboxError as exc:
        return {"error": type(exc).__name__, "reason": str(exc)}
    return {"text": text}


def _run_batch(runner: SandboxRunner, jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    outcomes: list[dict[str, Any]] = [{} for _ in jobs]
    start = time.monotonic()

    def run(index: int) -> None:
        outcomes[index] = _outcome(runner, jobs[index], start)

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(_ANSWER_SECONDS)
    return outcomes


def main() -> int:
    config = json.loads(sys.stdin.readline())
    limits = SandboxLimits(**config["limits"])
    with SandboxRunner(
        limits, warm_children=0, modules=PROBE_MODULES, skip=frozenset(config["skip"])
    ) as runner:
        hello = {"zygote": runner.fork_server_pid, "mechanisms": sorted(runner.mechanisms)}
        print(json.dumps(hello), flush=True)
        for line in sys.stdin:
            outcomes = _run_batch(runner, json.loads(line)["jobs"])
            print(json.dumps({"outcomes": outcomes}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
