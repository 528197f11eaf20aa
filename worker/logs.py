"""How a worker logs: Celery's own handlers in the chosen format, and no task result in any line.

Celery's "Task ... succeeded" line would quote the answer envelope, extracted text and all: that
value is withheld. See docs/operations.md (Logs).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from celery import signals
from celery.utils.log import get_multiprocessing_logger

from bridge.logs import LogFormat, use_format

_WITHHELD = "<withheld>"


class _WithholdReturnValues(logging.Filter):
    """Blanks the ``return_value`` Celery puts in its success line and in the line's ``data``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, Mapping) and "return_value" in record.args:
            record.args = {**record.args, "return_value": _WITHHELD}
        data = record.__dict__.get("data")
        if isinstance(data, Mapping) and "return_value" in data:
            record.data = {**data, "return_value": _WITHHELD}
        return True


_WITHHOLD = _WithholdReturnValues()


def _json_process_loggers(logger: logging.Logger, **_: object) -> None:
    use_format([*logger.handlers, *get_multiprocessing_logger().handlers], LogFormat.JSON)


def _json_task_logger(logger: logging.Logger, **_: object) -> None:
    use_format(logger.handlers, LogFormat.JSON)


def install(log_format: LogFormat) -> None:
    """Log this process's worker in ``log_format``, never quoting a task's result."""
    logging.getLogger("celery.app.trace").addFilter(_WITHHOLD)
    if log_format is LogFormat.JSON:
        # Celery builds the worker's handlers itself (root, task and pool loggers); replaced
        # handlers would be rebuilt under us, so the format is applied once it has built them.
        signals.after_setup_logger.connect(_json_process_loggers, weak=False)
        signals.after_setup_task_logger.connect(_json_task_logger, weak=False)
