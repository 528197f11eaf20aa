"""Which function parses which kind, and the ``Refusal`` an extractor raises.

The fork server imports every registering module before it forks, so no child imports a
parser lazily. See docs/sandbox.md, "Notes by module".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sandbox.document import Document
from sandbox.limits import ParseLimits


class Extractor(Protocol):
    """A parser: the document it reads, or, for a kind of ``pages.PARTS_KINDS``, the JSON of
    parts of a document for the parent to put together."""

    def __call__(self, media_type: str, payload: bytes, limits: ParseLimits) -> Document | str: ...


class Refusal(Exception):
    """Raised *inside the child* when a document breaks a ParseLimits ceiling.

    It never crosses the process boundary as an object: the child turns it into the error
    code ``code`` plus ``reason`` in its JSON answer, and the parent maps the code to one of
    its own exception classes.
    """

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


_REGISTRY: dict[str, Extractor] = {}

ProgressSink = Callable[[int, int], None]


def _discard(done: int, total: int) -> None:
    """Outside a sandbox child (tests, warm-up) progress goes nowhere."""


_progress_sink: ProgressSink = _discard


def report_progress(done: int, total: int) -> None:
    """Tell whoever waits on this job that ``done`` of ``total`` pages or frames are read.

    Long OCR jobs take minutes; a caller that sees nothing for that long cannot tell a busy
    parser from a stuck one.
    """
    _progress_sink(done, total)


def set_progress_sink(sink: ProgressSink) -> None:
    """Route :func:`report_progress` (called once per child, before its one job)."""
    global _progress_sink  # noqa: PLW0603 - one sink per single-use child process
    _progress_sink = sink


def extractor(kind: str) -> Callable[[Extractor], Extractor]:
    """Register the decorated function as the parser for ``kind`` (see :class:`Extractor`)."""

    def register(function: Extractor) -> Extractor:
        if kind in _REGISTRY and _REGISTRY[kind] is not function:
            raise ValueError(f"an extractor for kind {kind!r} is already registered")
        _REGISTRY[kind] = function
        return function

    return register


def lookup(kind: str) -> Extractor | None:
    return _REGISTRY.get(kind)
