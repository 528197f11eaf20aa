"""Test-only worker behaviour, loaded by ``celery worker -I tests.integration.worker_hooks``.

Loaded only through Celery's own ``--include`` option, so nothing in ``worker/`` knows about it
and no environment variable can switch it on in production (the ``tests`` package is not
installed there). It wraps each stage's sandbox extractor; a payload whose first line is an
``airlock-test:`` directive then behaves as the directive says, in the pool process, before
the real sandbox extracts it:

- ``airlock-test: sleep SECONDS TAG``: write this process's pid to ``$AIRLOCK_TEST_MARKER_DIR/TAG``
  (appending, one line per delivery), then sleep; a slow but legitimate job to kill mid-way.
- ``airlock-test: crash TAG``: record the pid likewise, then SIGKILL this pool process, every
  time; the payload that kills its worker.

The extracted text is the sandbox's own, so the local path (which has no hooks) produces the
same text for the same payload.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from bridge.knowledge.attachments import ExtractionLimits, TextExtractor
from bridge.queue.jobs import Stage
from sandbox.runner import ProgressCallback
from worker import extraction
from worker.config import Settings

_DIRECTIVE = b"airlock-test: "
_real_sandbox_extractor = extraction.sandbox_extractor


def _record(tag: str) -> None:
    marker_dir = Path(os.environ["AIRLOCK_TEST_MARKER_DIR"])
    with (marker_dir / tag).open("a") as marker:
        marker.write(f"{os.getpid()}\n")


class HookedExtractor:
    def __init__(self, inner: TextExtractor) -> None:
        self._inner = inner

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        first_line = payload.split(b"\n", 1)[0]
        if first_line.startswith(_DIRECTIVE):
            action, *arguments = first_line[len(_DIRECTIVE) :].decode().split()
            if action == "sleep":
                _record(arguments[1])
                time.sleep(float(arguments[0]))
            elif action == "crash":
                _record(arguments[0])
                os.kill(os.getpid(), signal.SIGKILL)
        return self._inner.extract(kind, media_type, payload, max_pages=max_pages)


def _hooked(
    settings: Settings,
    stage: Stage,
    limits: ExtractionLimits,
    on_progress: ProgressCallback | None = None,
) -> TextExtractor:
    return HookedExtractor(_real_sandbox_extractor(settings, stage, limits, on_progress))


extraction.sandbox_extractor = _hooked
