"""Fixtures the sandbox tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox.runner import SandboxRunner
from tests.sandbox.canary import Canary
from tests.sandbox.hostile_inputs import LIMITS


@pytest.fixture
def canary() -> Iterator[Canary]:
    """A loopback HTTP server that counts every request: a parser that fetches a URL an upload
    names is caught fetching it."""
    with Canary() as server:
        yield server


@pytest.fixture(scope="module")
def runner() -> Iterator[SandboxRunner]:
    """One sandbox under the hostile-input limits for a module's tests of a format; modules
    that need other limits or probe modules define their own."""
    with SandboxRunner(LIMITS) as sandbox:
        yield sandbox
