"""The bridge-facing extractor: ``extract(kind, media_type, payload, *, max_pages) -> str``.

It satisfies the bridge's TextExtractor port structurally and shares one runner per limits,
requirement and uid base. See docs/sandbox.md, "Notes by module".
"""

from __future__ import annotations

import dataclasses
import threading

from sandbox.jail import DEFAULT_UID_BASE
from sandbox.limits import ParseLimits, SandboxLimits
from sandbox.runner import ProgressCallback, SandboxRunner

_shared_lock = threading.Lock()
_shared: dict[tuple[SandboxLimits, frozenset[str], int], SandboxRunner] = {}


def shared_runner(
    limits: SandboxLimits, require: frozenset[str] = frozenset(), uid_base: int = DEFAULT_UID_BASE
) -> SandboxRunner:
    with _shared_lock:
        key = (limits, require, uid_base)
        runner = _shared.get(key)
        if runner is None:
            runner = _shared[key] = SandboxRunner(limits, require=require, uid_base=uid_base)
        return runner


class SandboxExtractor:
    """``require`` and ``uid_base`` are ``SandboxRunner``'s, for the shared runner; a ``runner``
    given here is used as it was built."""

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),  # noqa: B008 - frozen value
        parse_limits: ParseLimits = ParseLimits(),  # noqa: B008 - frozen value
        runner: SandboxRunner | None = None,
        on_progress: ProgressCallback | None = None,
        *,
        require: frozenset[str] = frozenset(),
        uid_base: int = DEFAULT_UID_BASE,
    ) -> None:
        self._limits = limits
        self._parse_limits = parse_limits
        self._runner = runner
        self._on_progress = on_progress
        self._require = require
        self._uid_base = uid_base

    def extract(self, kind: str, media_type: str, payload: bytes, *, max_pages: int) -> str:
        """Text of ``payload``, or a ``SandboxError`` subclass naming why there is none."""
        runner = self._runner or shared_runner(self._limits, self._require, self._uid_base)
        limits = dataclasses.replace(self._parse_limits, max_pages=max_pages)
        return runner.run(kind, media_type, payload, limits, self._on_progress).text
