"""The bridge-facing extractor: ``extract(kind, media_type, payload, *, max_pages) -> str``.

It satisfies the bridge's TextExtractor port structurally; importing the bridge here would make
the sandbox depend on the code it protects. Runners are shared per ``SandboxLimits`` value and
created on first use, so constructing a ``SandboxExtractor`` costs nothing and many of them
share one fork server.
"""

from __future__ import annotations

import dataclasses
import threading

from sandbox.limits import ParseLimits, SandboxLimits
from sandbox.runner import ProgressCallback, SandboxRunner

_shared_lock = threading.Lock()
_shared: dict[SandboxLimits, SandboxRunner] = {}


def shared_runner(limits: SandboxLimits) -> SandboxRunner:
    with _shared_lock:
        runner = _shared.get(limits)
        if runner is None:
            runner = _shared[limits] = SandboxRunner(limits)
        return runner


class SandboxExtractor:
    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),  # noqa: B008 - frozen value
        parse_limits: ParseLimits = ParseLimits(),  # noqa: B008 - frozen value
        runner: SandboxRunner | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> None:
        self._limits = limits
        self._parse_limits = parse_limits
        self._runner = runner
        self._on_progress = on_progress

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        """Text of ``payload``, or a ``SandboxError`` subclass naming why there is none."""
        runner = self._runner or shared_runner(self._limits)
        limits = dataclasses.replace(self._parse_limits, max_pages=max_pages)
        return runner.run(kind, media_type, payload, limits, self._on_progress).text
