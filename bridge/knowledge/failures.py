"""Why one attachment has no text, as one plain value from where it happened to the selection.

The sandbox's verdict, a worker's own failure and a guard's refusal all become a :class:`Failure`;
it crosses the queue as plain data and is worded for the caller once, with the caller's label.
See docs/queue.md (Failures).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: The code of a guard's refusal (``IngestionRejected``): its reason is already the caller's text.
REFUSED: Final = "IngestionRejected"
#: What every other failure reaches the caller as.
EXTRACTION_FAILED: Final = "ExtractionFailed"

# The codes of failures the bridge and the worker conclude themselves (the sandbox's verdicts
# are named by their classes' ``reported_as``). Callers, metrics and docs match these strings.
#: The worker's stored answer was refused by the bridge's decoder.
MALFORMED_ANSWER: Final = "MalformedAnswer"
#: The task raised, or ended in a state that carries no answer.
WORKER_ERROR: Final = "WorkerError"
#: A declared value is longer than a job may carry.
DECLARATION_TOO_LONG: Final = "DeclarationTooLong"
#: No answer within the caller's deadline.
DEADLINE_EXCEEDED: Final = "DeadlineExceeded"
#: No worker consumes the job's queue.
NO_WORKERS: Final = "NoWorkers"
#: The job's queue is at its bound.
QUEUE_FULL: Final = "QueueFull"
#: Answered instead of run, because the job was delivered too often.
WORKER_LOST: Final = "WorkerLost"
#: The payload a job names expired or is not the one it names.
PAYLOAD_UNAVAILABLE: Final = "PayloadUnavailable"


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
