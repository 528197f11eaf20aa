"""airlock's Celery workers: ``celery -A worker worker -Q airlock.light,airlock.ocr``.

``worker.app`` is built from the environment on first access, so importing :mod:`worker.config`
builds nothing; the package composes the bridge's guards with the sandbox and parses nothing
itself. See docs/queue.md.
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def _app() -> Any:
    # Deferred so that importing worker.config (as the CLI does) stays free of Celery.
    from worker.application import create_app  # noqa: PLC0415
    from worker.config import Settings  # noqa: PLC0415

    return create_app(Settings.from_env())


def __getattr__(name: str) -> Any:
    if name == "app":
        return _app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
