"""Small pieces more than one suite needs (each used by tests of two different layers)."""

from __future__ import annotations

import asyncio
import io
import os
import pty
import subprocess
import time
import zipfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from bridge.knowledge.contracts import IngestSelection

T = TypeVar("T")


def selection_as_json(selection: IngestSelection) -> dict[str, Any]:
    """A selection as its JSON form on the wire: ``dropped`` pairs become lists."""
    document = asdict(selection)
    document["dropped"] = [list(pair) for pair in selection.dropped]
    return document


async def ticks_while(awaitable: Awaitable[T], period: float) -> tuple[T, int]:
    """Await ``awaitable`` while a task ticks every ``period`` seconds on the same loop.

    A loop blocked by the awaited call ticks once at most, so the count shows whether the
    call left the event loop free for other requests.
    """
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(period)

    ticker = asyncio.create_task(tick())
    try:
        result = await awaitable
    finally:
        ticker.cancel()
    return result, ticks


def run_on_a_terminal(
    command: Sequence[str], env: Mapping[str, str], timeout: float = 120
) -> tuple[int, bytes, bytes]:
    """Run ``command`` with its stderr on a pseudo-terminal, as a person at a shell would:
    (exit status, stdout, what the terminal showed)."""
    controller, terminal = pty.openpty()
    try:
        process = subprocess.Popen(
            list(command), stdout=subprocess.PIPE, stderr=terminal, env=dict(env)
        )
        os.close(terminal)
        stdout, _ = process.communicate(timeout=timeout)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
    return process.returncode, stdout, shown


def zipped(members: Mapping[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A ZIP archive of ``members`` (name: bytes), in order, each stored with ``method``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def running(pid: int) -> bool:
    """Whether process ``pid`` is alive: a zombie has ended, only its parent has not reaped it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def least_cpu_seconds(work: Callable[[], object], runs: int = 3) -> float:
    """The least CPU time of ``runs`` calls of ``work``: the machine is shared, and load from
    elsewhere only adds (to the wall clock most), so the least run is nearest the work's cost."""
    least = float("inf")
    for _ in range(runs):
        started = time.process_time()
        work()
        least = min(least, time.process_time() - started)
    return least
