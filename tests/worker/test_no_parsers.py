"""The worker's own process never loads a parser: untrusted bytes are parsed only in the sandbox."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO_ROOT

_PROBE = """
import sys
import worker
worker.app.loader.import_default_modules()
import bridge.queue.celery_queue, bridge.queue.source, worker.cache, worker.extraction, worker.tasks
parsers = {"pypdf", "docx", "PIL", "pytesseract", "lxml"}
print(sorted(name for name in sys.modules if name.split(".")[0] in parsers))
"""


def test_building_the_worker_app_imports_no_parser() -> None:
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "AIRLOCK_BROKER_URL": "redis://127.0.0.1:1/0"},
        timeout=60,
        check=True,
    )
    assert probe.stdout.strip() == "[]"
