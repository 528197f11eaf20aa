"""airlock's Celery workers: ``celery -A worker worker -Q airlock.light,airlock.ocr``.

``worker.app`` (alias ``worker.celery``, the names ``celery -A`` looks for) is built from the
environment on first access, so importing :mod:`worker.config` neither imports Celery nor
builds an app. This package composes the bridge's guards with the sandbox's isolated extractor
and never parses anything in its own process.
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
    if name in ("app", "celery"):
        return _app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
