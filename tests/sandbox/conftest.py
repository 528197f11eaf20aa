"""Fixtures the sandbox tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sandbox.canary import Canary


@pytest.fixture
def canary() -> Iterator[Canary]:
    """A loopback HTTP server that counts every request: a parser that fetches a URL an upload
    names is caught fetching it."""
    with Canary() as server:
        yield server
