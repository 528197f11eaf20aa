"""One temporary directory per worker, holding everything its processes put in /tmp.

A clean exit removes it, and the next worker on the machine reclaims one whose owner was killed.
See docs/operations.md (Temporary files).
"""

from __future__ import annotations

import atexit
import os
import tempfile
from typing import Any

from celery import signals

from sandbox import temp_dirs
from sandbox.jail import remove_tree

PREFIX = "airlock-worker-"


def _claim(**_: Any) -> None:
    owner = os.getpid()
    # Traversable by the jailed children's uids, whose scratch directories lie beneath it.
    path = temp_dirs.claim(PREFIX, 0o711)
    tempfile.tempdir = path
    os.environ["TMPDIR"] = path

    def remove() -> None:
        if os.getpid() == owner:  # a forked pool process runs its inherited handlers too
            remove_tree(path)

    atexit.register(remove)


def install() -> None:
    """Claim the directory in the worker's main process, before its pool is forked."""
    signals.worker_init.connect(_claim, weak=False)
