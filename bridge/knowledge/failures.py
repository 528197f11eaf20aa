"""Why one attachment has no text, as one plain value from where it happened to the selection.

The sandbox's verdict, a worker's own failure and a guard's refusal all become a :class:`Failure`;
it crosses the queue as plain data and is worded for the caller once, with the caller's label.
See docs/queue.md (Failures).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The code of a guard's refusal (``IngestionRejected``): its reason is already the caller's text.
REFUSED = "IngestionRejected"
#: What every other failure reaches the caller as.
EXTRACTION_FAILED = "ExtractionFailed"


@dataclass(frozen=True)
class Failure:
    """``code`` names what failed as the caller reads it (``ParserError``, ``WorkerLost``);
    ``reason`` says what happened. ``transient``: the host failed, not the document, so another
    attempt may succeed; it never crosses the queue (a worker retries before it answers)."""

    code: str
    reason: str
    transient: bool = False

    @property
    def refused(self) -> bool:
        return self.code == REFUSED

    @property
    def error(self) -> str:
        """The error it reaches the caller as: ``IngestionRejected`` or ``ExtractionFailed``."""
        return REFUSED if self.refused else EXTRACTION_FAILED

    @classmethod
    def of(cls, exc: BaseException) -> Failure:
        """What an extractor raised. The sandbox's verdicts name themselves (their class's
        ``reported_as`` and ``transient``); any other exception is named by its class."""
        reported_as = getattr(type(exc), "reported_as", None)
        return cls(
            reported_as if isinstance(reported_as, str) else type(exc).__name__,
            str(exc),
            getattr(type(exc), "transient", False) is True,
        )
