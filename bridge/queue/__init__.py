"""The queue client: jobs, envelopes and claim checks on Celery and Redis (docs/queue.md).

What a caller needs is importable from here; the modules below hold one decision each.
:class:`CeleryQueue` is imported on first use: Celery costs a third of a second, which every
importer of a sibling module (the CLI's settings, a local extraction) would pay for nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bridge.queue.source import (
    ExtractionQueue,
    QueueAttachmentSource,
    QueueFull,
    QueueUnavailable,
    gather,
    gather_async,
)

if TYPE_CHECKING:
    from bridge.queue.celery_queue import CeleryQueue

__all__ = [
    "CeleryQueue",
    "ExtractionQueue",
    "QueueAttachmentSource",
    "QueueFull",
    "QueueUnavailable",
    "gather",
    "gather_async",
]


def __getattr__(name: str) -> Any:
    if name == "CeleryQueue":
        from bridge.queue.celery_queue import CeleryQueue  # noqa: PLC0415

        return CeleryQueue
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
