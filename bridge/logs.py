"""Log lines a machine can read: one JSON object per line, with only the fields named here.

A fixed set of context fields is written and nothing else a caller attaches, so a payload or an
extracted text cannot reach the log by being passed along as ``extra`` (docs/operations.md).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum

LOG_FORMAT_VARIABLE = "AIRLOCK_LOG_FORMAT"

#: The ``extra`` fields a JSON line carries: who asked (request id), for which attachment
#: (label, kind, stage; the payload's SHA-256, to find it in the payload store) and what came
#: of it. Values must be scalars.
CONTEXT_FIELDS = frozenset(
    {
        "request_id",
        "label",
        "sha256",
        "kind",
        "stage",
        "outcome",
        "reason_class",
        "duration_seconds",
        "deliveries",
    }
)


class LogFormat(StrEnum):
    JSON = "json"
    PLAIN = "plain"


def requested_log_format(env: Mapping[str, str]) -> LogFormat | None:
    """``AIRLOCK_LOG_FORMAT``, or ``None`` when unset (each command has its own default).

    Raises :class:`ValueError` naming the variable for any other value.
    """
    raw = env.get(LOG_FORMAT_VARIABLE, "").strip().lower()
    if not raw:
        return None
    try:
        return LogFormat(raw)
    except ValueError:
        choices = ", ".join(member.value for member in LogFormat)
        raise ValueError(f"{LOG_FORMAT_VARIABLE}={raw!r} must be one of {choices}") from None


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line: time, level, logger, message, context."""

    def __init__(self, fields: frozenset[str] = CONTEXT_FIELDS) -> None:
        super().__init__()
        self._fields = fields

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in sorted(self._fields):
            value = record.__dict__.get(name)
            if value is not None:
                line[name] = value if isinstance(value, int | float | bool) else str(value)
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def use_format(handlers: list[logging.Handler], log_format: LogFormat) -> None:
    """Give ``handlers`` the JSON formatter; plain leaves the formatter they were set up with."""
    if log_format is LogFormat.JSON:
        for handler in handlers:
            handler.setFormatter(JsonFormatter())


def configure(log_format: LogFormat, level: int = logging.INFO) -> None:
    """Log every logger of this process to stderr in ``log_format`` (for processes that are
    not Celery workers; Celery sets up its own handlers, see ``worker.logs``)."""
    handler = logging.StreamHandler(sys.stderr)
    if log_format is LogFormat.PLAIN:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    use_format([handler], log_format)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
