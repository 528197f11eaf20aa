"""Shared fixtures: where the real-document corpus lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS_DIR = Path(os.environ.get("AIRLOCK_CORPUS_DIR", REPO_ROOT.parent / "shared" / "corpus"))


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    if not CORPUS_DIR.is_dir():
        pytest.fail(f"the corpus is missing at {CORPUS_DIR}; set AIRLOCK_CORPUS_DIR")
    return CORPUS_DIR
