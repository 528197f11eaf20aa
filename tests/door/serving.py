"""``airlock serve`` as a test starts it: a process on a free loopback port, ready on return."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Collection
from pathlib import Path

import httpx

from tests.integration.load import wait_until
from tests.metrics_scrape import free_port

AIRLOCK = Path(sys.executable).parent / "airlock"
_START_SECONDS = 60


class Door:
    """One ``airlock serve`` process on a free loopback port."""

    def __init__(self, env: dict[str, str], tmp_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        clean = {k: v for k, v in os.environ.items() if not k.startswith("AIRLOCK_")}
        self.log = tmp_path / f"serve-{self.port}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [str(AIRLOCK), "serve", "--port", str(self.port)],
                env={**clean, **env},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + _START_SECONDS
        while True:
            assert self.process.poll() is None, self.log.read_text()
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "airlock serve did not answer /healthz"
            time.sleep(0.05)

    def resident_bytes(self) -> int:
        """The server's resident memory (VmRSS)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def busy_job_children(starters: Collection[int]) -> dict[int, float]:
    """The busy sandbox job processes of the fork servers ``starters`` started (the door, or a
    worker's pool processes): a fork server's children that lead their own process group, with
    the CPU seconds each has used."""
    ticks = os.sysconf("SC_CLK_TCK")
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            parent = int(fields[1])
            command = Path(f"/proc/{parent}/cmdline").read_bytes()
            grandparent = int(Path(f"/proc/{parent}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        leader = int(fields[2]) == int(entry.name)
        if leader and b"sandbox.zygote" in command and grandparent in starters:
            cpu = (int(fields[11]) + int(fields[12])) / ticks
            if cpu > 0.3:  # a warm child waiting for a job has used next to none
                found[int(entry.name)] = cpu
    return found


def busy_child(starters: Collection[int], timeout: float = 120) -> int:
    """The one busy sandbox job process of ``starters``' fork servers, once there is one."""
    wait_until(lambda: bool(busy_job_children(starters)), timeout, "a job's child to run")
    [child] = busy_job_children(starters)
    return child


def cpu_until_gone(child: int, starters: Collection[int], timeout: float = 30) -> float:
    """The CPU seconds ``child`` used before it was gone (it must go within ``timeout``)."""
    used = 0.0

    def gone() -> bool:
        nonlocal used
        used = max(used, busy_job_children(starters).get(child, 0.0))
        return not Path(f"/proc/{child}").exists()

    wait_until(gone, timeout, f"job child {child} to be killed")
    return used
