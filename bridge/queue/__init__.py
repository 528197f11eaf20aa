"""The queue client: jobs, envelopes and claim checks on Celery and Redis (docs/queue.md).

What a caller needs is importable from here; the modules below hold one decision each.
"""

from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.source import (
    ExtractionQueue,
    QueueAttachmentSource,
    QueueFull,
    QueueUnavailable,
    gather,
    gather_async,
)

__all__ = [
    "CeleryQueue",
    "ExtractionQueue",
    "QueueAttachmentSource",
    "QueueFull",
    "QueueUnavailable",
    "gather",
    "gather_async",
]
