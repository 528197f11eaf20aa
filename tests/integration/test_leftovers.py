"""A worker killed with SIGKILL leaves nothing in the temporary directory for good.

Everything a worker's processes put there (Celery's ``pymp-*`` directory, each pool process's
sandbox scratch root) lies under the worker's own ``airlock-worker-<pid>-*`` directory, which
the next worker on the machine reclaims once its owner is dead.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.knowledge.attachments import AttachmentRef
from bridge.queue.celery_queue import CeleryQueue
from bridge.queue.source import gather
from sandbox.jail import remove_tree
from tests.integration.conftest import WorkerFactory

pytestmark = [pytest.mark.integration, pytest.mark.redis]


def _entries(directory: Path) -> set[str]:
    return {path.name for path in directory.iterdir()}


@pytest.fixture
def temp() -> Iterator[Path]:
    """A temporary directory of the workers' own; traversable, as /tmp is, by the jailed
    children's uids (pytest's own directories are not)."""
    path = Path(tempfile.mkdtemp(prefix="airlock-test-tmp-"))
    path.chmod(0o711)
    yield path
    remove_tree(str(path))


@pytest.mark.slow
def test_a_killed_workers_temporary_files_are_reclaimed(
    start_worker: WorkerFactory, client: CeleryQueue, temp: Path
) -> None:
    env = {"TMPDIR": str(temp)}
    killed = start_worker(env=env)
    ref = AttachmentRef("note.txt", "text", "text/plain", b"a job, so the pool makes a sandbox")
    assert gather([ref], client, deadline=60, use_cache=False).dropped == ()
    (own,) = _entries(temp) - {"airlock-worker.heartbeat"}
    assert own.startswith(f"airlock-worker-{killed.process.pid}-")
    # The sandbox's scratch root (and Celery's pymp-* when it makes one) are inside it.
    assert any(name.startswith("airlock-sandbox-") for name in _entries(temp / own))
    killed.kill_everything()
    assert own in _entries(temp)

    survivor = start_worker(env=env)
    deadline = time.monotonic() + 10
    while own in _entries(temp) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert own not in _entries(temp)
    assert all(
        name.startswith(f"airlock-worker-{survivor.process.pid}-")
        for name in _entries(temp) - {"airlock-worker.heartbeat"}
    )
    assert not [name for name in _entries(temp) if name.startswith(("pymp-", "airlock-sandbox-"))]
