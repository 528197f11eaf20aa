"""Test-only worker behaviour, loaded by ``celery worker -I tests.integration.worker_hooks``.

Loaded only through Celery's own ``--include`` option, so nothing in ``worker/`` knows about it
and no environment variable can switch it on in production (the ``tests`` package is not
installed there). It wraps each stage's sandbox extractor; a payload whose first line is an
``airlock-test:`` directive then behaves as the directive says, in the pool process, before
the real sandbox extracts it:

- ``airlock-test: sleep SECONDS TAG``: write this process's pid to ``$AIRLOCK_TEST_MARKER_DIR/TAG``
  (appending, one line per delivery), then sleep; a slow but legitimate job to kill mid-way.
- ``airlock-test: stall SECONDS TAG``: record the pid likewise, and sleep only if no run of
  ``TAG`` was recorded before: a host that is slow once (past the task's soft time limit).
- ``airlock-test: crash TAG``: record the pid likewise, then SIGKILL this pool process, every
  time; the payload that kills its worker.

- A page of a split PDF whose page dictionary holds ``/AirlockTest (airlock-test: crash TAG)``:
  the same, for the page task of that page only (the document's own jobs never see it there).

The extracted text is the sandbox's own, so the local path (which has no hooks) produces the
same text for the same payload.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Any

from sandbox.enclosures import Unpacked
from sandbox.extractor import SandboxExtractor
from sandbox.pages import PAGE_KIND
from worker import extraction

_DIRECTIVE = b"airlock-test: "
_PAGE_ENTRY = b"/AirlockTest ("
_real_sandbox_extractor = extraction.sandbox_extractor


def _record(tag: str) -> bool:
    """Append this process's pid to the marker ``tag``; whether it is the first run recorded."""
    marker_path = Path(os.environ["AIRLOCK_TEST_MARKER_DIR"]) / tag
    first = not marker_path.exists()
    with marker_path.open("a") as marker:
        marker.write(f"{os.getpid()}\n")
    return first


def _directive(kind: str, payload: bytes) -> bytes | None:
    """The directive on the payload's first line; for a page of a split PDF, the one in its
    page dictionary (``/AirlockTest (airlock-test: crash TAG)``), which the split copies."""
    first_line = payload.split(b"\n", 1)[0]
    if first_line.startswith(_DIRECTIVE):
        return first_line[len(_DIRECTIVE) :]
    if kind == PAGE_KIND and _PAGE_ENTRY in payload:
        written = payload.split(_PAGE_ENTRY, 1)[1].split(b")", 1)[0]
        # pypdf writes the string with '-' and ':' as octal escapes.
        directive = re.sub(rb"\\([0-7]{3})", lambda match: bytes([int(match[1], 8)]), written)
        return directive[len(_DIRECTIVE) :] if directive.startswith(_DIRECTIVE) else None
    return None


class HookedExtractor:
    def __init__(self, inner: SandboxExtractor) -> None:
        self._inner = inner

    def unpack(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> Unpacked:
        return self._inner.unpack(kind, media_type, payload, max_pages=max_pages)

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        directive = _directive(kind, payload)
        if directive is not None:
            action, *arguments = directive.decode().split()
            if action == "sleep":
                _record(arguments[1])
                time.sleep(float(arguments[0]))
            elif action == "stall":
                if _record(arguments[1]):
                    time.sleep(float(arguments[0]))
            elif action == "crash":
                _record(arguments[0])
                os.kill(os.getpid(), signal.SIGKILL)
        return self._inner.extract(kind, media_type, payload, max_pages=max_pages)


def _hooked(*args: Any, **kwargs: Any) -> HookedExtractor:
    """The worker's own sandbox extractor, whatever it is asked with, behind the hooks: a
    parameter the worker adds passes through without a copy of its signature here."""
    return HookedExtractor(_real_sandbox_extractor(*args, **kwargs))


extraction.sandbox_extractor = _hooked  # type: ignore[assignment]
