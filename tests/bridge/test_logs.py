"""Machine-readable log lines (bridge/logs.py): the context fields and nothing else attached."""

from __future__ import annotations

import json
import logging

from bridge.logs import JsonFormatter, LogFormat, configure, requested_log_format


def test_json_lines_hold_the_context_fields_and_nothing_else_attached() -> None:
    record = logging.LogRecord("worker.tasks", logging.INFO, __file__, 1, "done\nforged", (), None)
    record.__dict__.update(request_id="r1", outcome="admitted", deliveries=1, payload=b"secret")
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed = json.loads(line)
    assert parsed["message"] == "done\nforged"
    assert parsed["request_id"] == "r1" and parsed["deliveries"] == 1
    assert "payload" not in parsed and "secret" not in line


def test_the_log_format_is_read_and_applied() -> None:
    assert requested_log_format({}) is None
    assert requested_log_format({"AIRLOCK_LOG_FORMAT": " JSON "}) is LogFormat.JSON
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        configure(LogFormat.JSON)
        [handler] = root.handlers
        assert isinstance(handler.formatter, JsonFormatter)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
